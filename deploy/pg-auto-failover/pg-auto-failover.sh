#!/usr/bin/env bash
# PostgreSQL that fails over, on pg_auto_failover (Debian 12: postgresql-15-auto-failover and
# pg-auto-failover-cli): a monitor and two data nodes with synchronous replication; the monitor
# promotes the standby when the primary fails. Run as root; PostgreSQL and pg_autoctl run as
# `postgres`. docs/operations.md "PostgreSQL with a standby" walks through it.
#
#   pg-auto-failover.sh monitor PGDATA PORT HOST            create the monitor (a third host)
#   pg-auto-failover.sh node PGDATA PORT HOST MONITOR_URI   create a data node (twice: the first is the primary)
#   pg-auto-failover.sh run PGDATA                          run a monitor or node in the foreground (what the unit runs)
#   pg-auto-failover.sh unit PGDATA                         install and start its systemd unit instead
#   pg-auto-failover.sh monitor-uri PGDATA                  the URI the data nodes are given
#   pg-auto-failover.sh tune PGDATA                         on the monitor: notice a dead primary in seconds
#   pg-auto-failover.sh database PGDATA NAME PASSWORD       on the primary: the relay's role and database
#   pg-auto-failover.sh relay-url PGDATA NAME PASSWORD      WIMZ_DATABASE_URL: both hosts, target_session_attrs=read-write
#   pg-auto-failover.sh state PGDATA                        who is primary (any node or the monitor)
#   pg-auto-failover.sh switchover PGDATA                   a planned switchover (maintenance on the primary)
#
# PGAF_AUTH (default scram-sha-256) and PGAF_SSL (default --ssl-self-signed) choose what pg_autoctl
# writes into pg_hba.conf and postgresql.conf; the loopback test uses trust and --no-ssl.
set -euo pipefail

bindir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
auth=${PGAF_AUTH:-scram-sha-256}
ssl=${PGAF_SSL:---ssl-self-signed}

as_postgres() { runuser -u postgres -- env PATH="$bindir:$PATH" HOME="${PGAF_HOME:-$(getent passwd postgres | cut -d: -f6)}" \
                XDG_CONFIG_HOME="${XDG_CONFIG_HOME:-}" XDG_DATA_HOME="${XDG_DATA_HOME:-}" "$@"; }
prepare() { mkdir -p "$(dirname "$1")"; chown postgres: "$(dirname "$1")"; }
# On the local instance, through its Unix socket as `postgres`.
sql() { as_postgres psql -X -qtA -p "$1" -d "$2" -c "$3"; }
setting() { as_postgres pg_autoctl config get --pgdata "$1" "$2"; }

case "${1:-}" in
    monitor)
        prepare "$2"
        as_postgres pg_autoctl create monitor --pgdata "$2" --pgport "$3" --hostname "$4" --auth "$auth" $ssl ;;
    node)
        prepare "$2"
        # Synchronous replication: with one standby it is on as soon as the standby has caught up.
        as_postgres pg_autoctl create postgres --pgdata "$2" --pgport "$3" --hostname "$4" --monitor "$5" \
            --auth "$auth" $ssl --dbname postgres --replication-quorum true ;;
    run)
        exec runuser -u postgres -- env PATH="$bindir:$PATH" XDG_CONFIG_HOME="${XDG_CONFIG_HOME:-}" \
            XDG_DATA_HOME="${XDG_DATA_HOME:-}" pg_autoctl run --pgdata "$2" ;;
    unit)
        as_postgres pg_autoctl -q show systemd --pgdata "$2" > /etc/systemd/system/pgautofailover.service
        systemctl daemon-reload
        systemctl enable --now pgautofailover.service ;;
    monitor-uri)
        as_postgres pg_autoctl show uri --pgdata "$2" --json | python3 -c \
            'import json, sys; print(next(u["uri"] for u in json.load(sys.stdin) if u["type"] == "monitor"))' ;;
    tune)
        # Checked every second, unhealthy after 2 s without an answer, and no 30 s wait for a primary
        # that will never answer again (pg_auto_failover's defaults take about 30 s to promote).
        port=$(setting "$2" postgresql.port)
        for line in "health_check_period TO 1000" "health_check_timeout TO 1000" "health_check_max_retries TO 1" \
                    "health_check_retry_delay TO 500" "node_considered_unhealthy_timeout TO 2000" \
                    "primary_demote_timeout TO 5000"; do
            sql "$port" pg_auto_failover "ALTER SYSTEM SET pgautofailover.$line" >/dev/null
        done
        sql "$port" pg_auto_failover "SELECT pg_reload_conf()" >/dev/null ;;
    database)
        port=$(setting "$2" postgresql.port)
        sql "$port" postgres "CREATE ROLE \"$3\" LOGIN PASSWORD '$4'" >/dev/null
        sql "$port" postgres "CREATE DATABASE \"$3\" OWNER \"$3\"" >/dev/null ;;
    relay-url)
        # The formation's URI names both data nodes; the relay's role and database replace postgres.
        uri=$(as_postgres pg_autoctl show uri --pgdata "$2" --formation default)
        hosts=${uri#postgres://}; hosts=${hosts%%/*}
        echo "postgresql://$3:$4@$hosts/$3?target_session_attrs=read-write&connect_timeout=2" ;;
    state)
        as_postgres pg_autoctl show state --pgdata "$2" ;;
    switchover)
        as_postgres pg_autoctl perform switchover --pgdata "$2" ;;
    *)
        sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'
        exit 2 ;;
esac
