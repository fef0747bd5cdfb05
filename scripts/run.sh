#!/usr/bin/env bash
# Runs the relay from a fresh Debian 12 machine: installs what is missing, builds (release),
# and — when WIMZ_DATABASE_URL is not set — starts a private PostgreSQL cluster under
# .local/ (or WIMZ_STATE_DIR), migrates it, creates a demo device with a robot and an app
# token and prints them. Extra arguments go to 'wimz-relay serve'.
#   scripts/run.sh [serve flags…]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

ensure_packages

say "building (release)"
build release --product wimz-relay
relay="$(swift build -c release --show-bin-path)/wimz-relay"
export WIMZ_MIGRATIONS_DIR="$PWD/migrations"

if [ -z "${WIMZ_DATABASE_URL:-}" ]; then
    state=${WIMZ_STATE_DIR:-$PWD/.local}
    mkdir -p "$state"
    # The cluster runs as 'postgres' when we are root: it must be able to reach its directory.
    if [ "$(id -u)" -eq 0 ] && ! runuser -u postgres -- test -x "$state"; then
        state="/var/tmp/wimz-relay-$(echo "$PWD" | sha256sum | cut -c1-12)"
        mkdir -p "$state"
        chmod 755 "$state"
    fi
    say "starting the private PostgreSQL in $state/pg"
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
    cat >&2 <<MSG

Demo device 'demo-robot' (tokens kept in $demo):
  robot token: $DEMO_ROBOT_TOKEN
  app token:   $DEMO_APP_TOKEN
  admin token: $WIMZ_ADMIN_TOKEN

Try:
  curl -s http://$listen/readyz
  curl -s -H "Authorization: Bearer $DEMO_APP_TOKEN" http://$listen/api/devices/demo-robot/status
  wsload/websocat: ws://$listen/ws/app?device_id=demo-robot&token=$DEMO_APP_TOKEN
Database: $WIMZ_DATABASE_URL

MSG
fi

say "serving (Ctrl-C stops)"
exec "$relay" serve "$@"
