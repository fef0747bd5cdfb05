#!/usr/bin/env bash
# Push figures (issue 24 §8): pushes/s one node sustains against the test kit's APNs stand-in, the
# relay's CPU per push, event → APNs request p50/p99, memory per registration.
#   scripts/bench-push.sh [--rates 250,500,1000] [--seconds 10] [--devices 50] [--registrations 20000]
# (Fan-out with registrations: WIMZ_INSTRUCTIONS_PUSH=1000 scripts/bench-instructions.sh.)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_packages
relay=$(build_relay release)

work=$(mktemp -d /tmp/wimz-bench-push.XXXXXX)
chmod 755 "$work"
cleanup() { pg_stop "$work/pg" immediate; rm -rf "$work"; }
trap cleanup EXIT
export WIMZ_TEST_DATABASE_URL; WIMZ_TEST_DATABASE_URL=$(WIMZ_PG_FSYNC=off pg_start "$work/pg")
export WIMZ_RELAY_BIN="$relay" WIMZ_MIGRATIONS_DIR="$PWD/migrations"
say "installing the stand-in's Python packages (PyPI) in $work/venv"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --disable-pip-version-check websockets h2 cryptography >&2
"$work/venv/bin/python" scripts/bench_push.py "$@"
