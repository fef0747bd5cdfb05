#!/usr/bin/env bash
# A local cluster in one command: builds the relay, starts a private PostgreSQL (under
# .local/cluster, or WIMZ_STATE_DIR/cluster) unless WIMZ_ADMIN_DATABASE_URL names a server,
# then N relay nodes on loopback behind a real HAProxy on 127.0.0.1:8080 (WIMZ_CLUSTER_PORT),
# a fresh database and a demo device. It prints the tokens and the `wimz-relay cluster
# status` command to watch, and takes commands (status, kill/stop/start NODE, add, quit).
#   scripts/cluster.sh [nodes, default 3]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

ensure_packages
relay=$(build_relay)

started_pg=""
cleanup() { if [ -n "$started_pg" ]; then say "stopping the private PostgreSQL"; pg_stop "$started_pg"; fi; }
trap cleanup EXIT

admin_url=${WIMZ_ADMIN_DATABASE_URL:-}
if [ -z "$admin_url" ]; then
    pg="$(state_dir)/cluster/pg"
    say "starting the private PostgreSQL in $pg"
    pg_running "$pg" || started_pg="$pg"
    admin_url=$(pg_start "$pg")
fi
python3 scripts/cluster/wimz_cluster.py --admin-url "$admin_url" --nodes "${1:-3}" \
    --port "${WIMZ_CLUSTER_PORT:-8080}" --relay-bin "$relay" --migrations "$PWD/migrations"
