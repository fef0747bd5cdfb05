#!/usr/bin/env bash
# How long the relay's writes fail while PostgreSQL fails over (pg_auto_failover on loopback, the
# primary killed five times); docs/performance.md ("A million robots") has the figures.
#   scripts/bench-failover.sh [--rounds 5]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
python_bench bench-failover scripts/bench_failover.py websockets -- "$@"
