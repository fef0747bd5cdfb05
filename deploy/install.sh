#!/usr/bin/env bash
# Installs wimz-relay on a Debian 12 host: user, directories, binary, migrations, systemd unit,
# environment file, and (optionally) the database and role.
#   sudo deploy/install.sh [--prefix /usr/local] [--database-admin-url URL] [--no-start]
# Run from a checkout; builds the release binary first. Idempotent: re-running upgrades the
# binary and migrations and keeps /etc/wimz-relay/wimz-relay.env as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

prefix=/usr/local
admin_url=
start=1
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix=$2; shift 2 ;;
        --database-admin-url) admin_url=$2; shift 2 ;;
        --no-start) start=0; shift ;;
        *) die "unknown option $1 (see the header of this script)" ;;
    esac
done
[ "$(id -u)" -eq 0 ] || die "run as root (it creates a user and installs a systemd unit)"

ensure_packages
say "building the release binary"
swift build -c release --product wimz-relay >&2
bin="$(swift build -c release --show-bin-path)/wimz-relay"

say "installing into $prefix"
getent passwd wimz-relay >/dev/null || useradd --system --home-dir /var/lib/wimz-relay --shell /usr/sbin/nologin wimz-relay
install -d -m 0755 "$prefix/bin" "$prefix/share/wimz-relay/migrations" "$prefix/share/doc/wimz-relay"
install -m 0755 "$bin" "$prefix/bin/wimz-relay"
install -m 0644 migrations/*.sql "$prefix/share/wimz-relay/migrations/"
install -m 0644 README.md docs/*.md docs/openapi.json "$prefix/share/doc/wimz-relay/"
install -d -m 0750 -o wimz-relay -g wimz-relay /var/lib/wimz-relay /var/lib/wimz-relay/spool
install -d -m 0750 /etc/wimz-relay
if [ ! -f /etc/wimz-relay/wimz-relay.env ]; then
    install -m 0600 systemd/wimz-relay.env.example /etc/wimz-relay/wimz-relay.env
    sed -i "s|^WIMZ_MIGRATIONS_DIR=.*|WIMZ_MIGRATIONS_DIR=$prefix/share/wimz-relay/migrations|" /etc/wimz-relay/wimz-relay.env
    sed -i "s|^WIMZ_ADMIN_TOKEN=.*|WIMZ_ADMIN_TOKEN=wimz_admin_$(head -c 32 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 40)|" /etc/wimz-relay/wimz-relay.env
fi
sed "s|/usr/local/bin/wimz-relay|$prefix/bin/wimz-relay|g" systemd/wimz-relay.service > /etc/systemd/system/wimz-relay.service
sed "s|/usr/local/bin/wimz-relay|$prefix/bin/wimz-relay|g" systemd/wimz-relay@.service > /etc/systemd/system/wimz-relay@.service

if [ -n "$admin_url" ]; then
    say "creating the database role and database (password is written to the env file)"
    password=$(head -c 32 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 32)
    psql "$admin_url" -v ON_ERROR_STOP=1 -q <<SQL
DO \$\$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'wimz_relay') THEN CREATE ROLE wimz_relay LOGIN; END IF;
END \$\$;
ALTER ROLE wimz_relay PASSWORD '$password';
SQL
    psql "$admin_url" -qtAc "SELECT 1 FROM pg_database WHERE datname = 'wimz'" | grep -q 1 \
        || psql "$admin_url" -qc "CREATE DATABASE wimz OWNER wimz_relay"
    host=$(psql "$admin_url" -qtAc "SELECT coalesce(inet_server_addr()::text, 'localhost')")
    sed -i "s|^WIMZ_DATABASE_URL=.*|WIMZ_DATABASE_URL=postgresql://wimz_relay:$password@$host/wimz|" /etc/wimz-relay/wimz-relay.env
fi

systemctl daemon-reload 2>/dev/null || say "systemd is not running here: unit installed, not started"
if [ "$start" -eq 1 ] && systemctl is-system-running >/dev/null 2>&1; then
    systemctl enable --now wimz-relay
    say "started: systemctl status wimz-relay; journalctl -u wimz-relay -f"
else
    say "installed; edit /etc/wimz-relay/wimz-relay.env, then: systemctl enable --now wimz-relay"
fi
