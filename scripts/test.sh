#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: installs what is missing, builds once,
# starts a throwaway PostgreSQL cluster (and lets the tests start coturn), runs every test.
#   scripts/test.sh [extra swift test arguments, e.g. --filter RelayStoreTests]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

ensure_packages

say "building (debug, with tests)"
build debug --build-tests

work=$(mktemp -d /tmp/wimz-test.XXXXXX)
chmod 755 "$work"
cleanup() { pg_stop "$work/pg" immediate; rm -rf "$work"; }
trap cleanup EXIT

say "starting a private PostgreSQL in $work/pg"
WIMZ_PG_FSYNC=off
export WIMZ_PG_FSYNC
export WIMZ_TEST_DATABASE_URL; WIMZ_TEST_DATABASE_URL=$(pg_start "$work/pg")
export WIMZ_TEST_PG_DIR="$work/pg" WIMZ_TEST_PG_BINDIR; WIMZ_TEST_PG_BINDIR=$(pg_bindir)
export WIMZ_TEST_WORKDIR="$work"

say "running tests"
swift test --skip-build "$@"
