#!/usr/bin/env bash
# A bounded soak: churning app sockets, robots sending events and answering commands, TURN
# credential requests, for MINUTES (default 10), with the relay's RSS and open descriptors
# sampled every 10 s. Fails when either keeps growing after the warm-up.
#   scripts/soak.sh [MINUTES]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_packages
minutes=${1:-10}

build release --product wimz-relay
build release --product wimz-bench
bin=$(swift build -c release --show-bin-path)

scratch soak

WIMZ_PG_FSYNC=off
export WIMZ_PG_FSYNC
url=$(pg_start "$work/pg")
export WIMZ_DATABASE_URL="$url" WIMZ_MIGRATIONS_DIR="$PWD/migrations"
"$bin/wimz-relay" migrate >/dev/null
"$bin/wimz-bench" provision --database-url "$url" --devices 50 --out "$work/tokens.csv"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$bin/wimz-relay" serve --listen "127.0.0.1:$port" --log-level warn --spool-dir "$work/spool" --turn-request-rate 1000 \
    --turn-urls "turn:127.0.0.1:3478?transport=udp" --turn-secret "soak-secret-0123456789abcdef" > "$work/relay.log" 2>&1 &
relay_pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.1; done

python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --disable-pip-version-check websockets >&2
say "soaking for $minutes minutes (relay pid $relay_pid)"
"$work/venv/bin/python" scripts/soak.py --port "$port" --tokens "$work/tokens.csv" --pid "$relay_pid" --minutes "$minutes"
