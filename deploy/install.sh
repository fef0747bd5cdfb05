#!/usr/bin/env bash
# Installs (or upgrades to) the wimz-relay Debian package on this server, and nothing else:
#   sudo deploy/install.sh [PACKAGE.deb] [--database-admin-url URL] [--restart] [--start]
# PACKAGE.deb: a package built elsewhere (scripts/package.sh); without one, it is built here
# first (which needs the Swift toolchain and the build's -dev packages on this machine: better
# built once on a build host and copied to every node). apt-get installs it with its
# dependencies; the package's maintainer scripts create the service user and enable nothing.
#   --database-admin-url URL  also create the database role wimz_relay and the database wimz
#                             (a PostgreSQL superuser's conninfo) and write the URL into the env file
#   --restart                 on an upgrade, restart the running instances one at a time
#                             (WIMZ_RESTART_ON_UPGRADE=yes for the package's postinst)
#   --start                   enable and start wimz-relay.service after installing
# No other package is installed, stopped or disabled. docs/operations.md has the whole procedure.
set -euo pipefail
cd "$(dirname "$0")/.."

# Its own say/die, not scripts/lib.sh's: with a .deb given, this file alone may be copied to a node.
say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

deb=
admin_url=
restart=no
start=0
while [ $# -gt 0 ]; do
    case "$1" in
        --database-admin-url) admin_url=$2; shift 2 ;;
        --restart) restart=yes; shift ;;
        --start) start=1; shift ;;
        --prefix|--no-start) die "$1 is gone: the package installs into /usr and starts nothing unless --start" ;;
        -*) die "unknown option $1 (see the header of this script)" ;;
        *) deb=$1; shift ;;
    esac
done
[ "$(id -u)" -eq 0 ] || die "run as root (it installs a package)"

if [ -z "$deb" ]; then
    say "building the package (scripts/package.sh)"
    deb=$(scripts/package.sh)
fi
[ -f "$deb" ] || die "no such package: $deb"
case "$deb" in /*) ;; *) deb="$PWD/$deb" ;; esac

say "installing $(basename "$deb")"
# apt-get resolves the package's Depends from the configured archive; the path must look like one.
# An edited env file is kept without a question when the new package ships a changed one (dpkg
# leaves that one beside it as wimz-relay.env.dpkg-dist, to compare).
DEBIAN_FRONTEND=noninteractive WIMZ_RESTART_ON_UPGRADE=$restart apt-get install -y -q \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "$deb"

env_file=/etc/wimz-relay/wimz-relay.env
if [ -n "$admin_url" ]; then
    say "creating the database role and database (the password is written to $env_file)"
    command -v psql >/dev/null || die "psql is missing (package postgresql-client)"
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
    sed -i "s|^WIMZ_DATABASE_URL=.*|WIMZ_DATABASE_URL=postgresql://wimz_relay:$password@$host/wimz|" "$env_file"
fi

if [ "$start" -eq 1 ]; then
    systemctl enable --now wimz-relay
    say "started: systemctl status wimz-relay; journalctl -u wimz-relay -f"
else
    say "installed $(wimz-relay --version); edit $env_file, then: systemctl enable --now wimz-relay"
fi
