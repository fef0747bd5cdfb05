#!/usr/bin/env bash
# Removal figures (issue 42 §8): removal → the member's socket closed and removal → its session
# gone from coturn (coturn's own CLI), p50/p99 over 50 removals, one release node and a real
# coturn with its management CLI.
#   scripts/bench-household.sh [--removals 50] [--settle 1]
# (The access check on the forwarding path: scripts/bench-instructions.sh OTHER_WIMZ_RELAY, and
# WIMZ_INSTRUCTIONS_PHASE=command for commands; docs/performance.md.)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_packages
relay=$(build_relay release)

work=$(mktemp -d /tmp/wimz-bench-household.XXXXXX)
chmod 755 "$work"
cleanup() { pg_stop "$work/pg" immediate; rm -rf "$work"; }
trap cleanup EXIT
export WIMZ_TEST_DATABASE_URL; WIMZ_TEST_DATABASE_URL=$(WIMZ_PG_FSYNC=off pg_start "$work/pg")
export WIMZ_RELAY_BIN="$relay" WIMZ_MIGRATIONS_DIR="$PWD/migrations"
say "installing websockets (PyPI) in $work/venv"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --disable-pip-version-check websockets >&2
"$work/venv/bin/python" scripts/bench_household.py "$@"
