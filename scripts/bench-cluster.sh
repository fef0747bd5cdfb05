#!/usr/bin/env bash
# Cluster benchmark from a clean clone: builds release, starts a private PostgreSQL, then
# three relay nodes behind a real HAProxy and 1,000 robots (the wimz-robot library, in a
# virtualenv), and prints: presence writes per 1,000 connects, and the time until each
# device is whole again after its node returns (p50/p99, seen by a fresh app), and PostgreSQL's
# load per 1,000 devices (transactions, rows per table, server CPU) while the fleet connects,
# while every device's app registers a phone for push, and while a node dies and returns.
#   scripts/bench-cluster.sh [--devices N] [--concurrency N]
# The fan-out cost of the cluster bookkeeping is measured with scripts/bench.sh --phases fanout
# (docs/performance.md, "Session 4").
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

ensure_packages
relay=$(build_relay release)

work=$(mktemp -d /tmp/wimz-bench-cluster.XXXXXX)
chmod 755 "$work"
trap 'pg_stop "$work/pg" immediate; rm -rf "$work"' EXIT
WIMZ_PG_FSYNC=off
export WIMZ_PG_FSYNC
admin_url=$(pg_start "$work/pg")
say "installing the robot library (PyPI: websockets) in $work/venv"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --disable-pip-version-check ./clients/python >&2
echo "machine: $(nproc) cores, $(uname -sr); relay: $relay; HAProxy $(haproxy -v | head -1 | awk '{print $3}')"
"$work/venv/bin/python" scripts/cluster/bench.py --admin-url "$admin_url" --relay-bin "$relay" \
    --migrations "$PWD/migrations" "$@"
