#!/usr/bin/env bash
# Runs the relay from a fresh Debian 12 machine: installs what is missing, builds (release),
# and — when WIMZ_DATABASE_URL is not set — starts a private PostgreSQL cluster under
# .local/ (or WIMZ_STATE_DIR), migrates it, creates a demo device with a robot and an app
# token, starts a private coturn on loopback that reads the relay's turn_secret table (unless
# WIMZ_TURN_URLS is set), and prints ready-to-paste examples. Stopping it (Ctrl-C, SIGTERM)
# stops the relay, then the coturn and PostgreSQL it started. Extra arguments go to
# 'wimz-relay serve'.
#   scripts/run.sh [serve flags…]
# Environment: WIMZ_STATE_DIR (default ./.local), WIMZ_TURN_PORT (default 13478: 3478 is left to a coturn the host may run),
# WIMZ_BUILD_CONFIG (release, or debug to reuse the test build), and every WIMZ_* of serve.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

ensure_packages

relay=$(build_relay)
export WIMZ_MIGRATIONS_DIR="$PWD/migrations"

# What this script started, stopped again when it ends (Ctrl-C, SIGTERM or the relay exiting).
started_pg=""
turn_pid=""
relay_pid=""
cleanup() {
    if [ -n "$turn_pid" ] && kill -0 "$turn_pid" 2>/dev/null; then
        say "stopping the private coturn"
        kill "$turn_pid" 2>/dev/null; wait "$turn_pid" 2>/dev/null || true
    fi
    if [ -n "$started_pg" ]; then
        say "stopping the private PostgreSQL"
        pg_stop "$started_pg"
    fi
}
trap cleanup EXIT
trap 'if [ -n "$relay_pid" ]; then kill -TERM "$relay_pid" 2>/dev/null; else exit 130; fi' INT TERM

if [ -z "${WIMZ_DATABASE_URL:-}" ]; then
    state=$(state_dir)
    say "starting the private PostgreSQL in $state/pg"
    pg_running "$state/pg" || started_pg="$state/pg"
    admin_url=$(pg_start "$state/pg")
    psql "$admin_url" -qtAc "SELECT 1 FROM pg_database WHERE datname = 'wimz'" | grep -q 1 \
        || psql "$admin_url" -qc "CREATE DATABASE wimz" >/dev/null
    export WIMZ_DATABASE_URL="${admin_url/dbname=postgres/dbname=wimz}"
    "$relay" migrate >&2

    demo="$state/demo.env"
    if [ ! -f "$demo" ]; then
        "$relay" device list | grep -q '^demo-robot ' || "$relay" device add demo-robot --name "Demo robot" >&2
        robot=$("$relay" token issue --device demo-robot --role robot --label demo | tail -n 1)
        app=$("$relay" token issue --device demo-robot --role app --label demo | tail -n 1)
        admin="wimz_admin_$(head -c 32 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 40)"
        printf 'DEMO_ROBOT_TOKEN=%s\nDEMO_APP_TOKEN=%s\nWIMZ_ADMIN_TOKEN=%s\n' "$robot" "$app" "$admin" > "$demo"
        chmod 600 "$demo"
    fi
    # shellcheck disable=SC1090
    source "$demo"
    export WIMZ_ADMIN_TOKEN="${WIMZ_ADMIN_TOKEN}"
    export WIMZ_SPOOL_DIR="${WIMZ_SPOOL_DIR:-$state/spool}"
    listen=${WIMZ_LISTEN:-127.0.0.1:8080}

    # TURN out of the box: coturn in the deploy recipe's shared-DB mode, reading the secrets
    # the relay signs with from turn_secret live; the relay's TURN URLs point at it.
    turn_note="TURN: WIMZ_TURN_URLS is set, so no private coturn was started."
    if [ -z "${WIMZ_TURN_URLS:-}" ]; then
        realm=${WIMZ_TURN_REALM:-wimz}
        turn_port=${WIMZ_TURN_PORT:-13478}
        if [ "$("$relay" turn-secret list --realm "$realm" | grep -c .)" -le 1 ]; then
            "$relay" turn-secret add --realm "$realm" >&2
        fi
        turn_pid=$(turn_start "$state/turn" "$turn_port" "$realm" "${WIMZ_DATABASE_URL}")
        export WIMZ_TURN_URLS="turn:127.0.0.1:$turn_port?transport=udp,turn:127.0.0.1:$turn_port?transport=tcp"
        turn_note="TURN: a private coturn listens on 127.0.0.1:$turn_port (log: $state/turn/turnserver.log)."
    fi
    cat >&2 <<MSG

Demo device 'demo-robot' (tokens kept in $demo):
  robot token: $DEMO_ROBOT_TOKEN
  app token:   $DEMO_APP_TOKEN
  admin token: $WIMZ_ADMIN_TOKEN
$turn_note

Try:
  curl -s http://$listen/readyz
  curl -s -H "Authorization: Bearer $DEMO_APP_TOKEN" http://$listen/api/devices/demo-robot/status
  curl -s -H "Authorization: Bearer $DEMO_ROBOT_TOKEN" http://$listen/api/turn/credentials
  app socket: ws://$listen/ws/app?device_id=demo-robot (Authorization: Bearer \$DEMO_APP_TOKEN)
Examples (docs/clients.md "Client libraries"), each in its own terminal:
  scripts/example-robot.sh     # simulated robot (Python) on demo-robot
  scripts/example-app.sh       # terminal app (Swift WimzRelayClient) watching it
Database: $WIMZ_DATABASE_URL

MSG
fi

say "serving (Ctrl-C stops)"
"$relay" serve "$@" &
relay_pid=$!
# wait returns early when a trapped signal arrives: keep waiting for the relay's own exit.
status=0
while kill -0 "$relay_pid" 2>/dev/null; do
    wait "$relay_pid" && status=0 || status=$?
done
exit "$status"
