#!/usr/bin/env bash
# The sealed household's costs (docs/performance.md "Session 32: the sealed household"): per 1 KB
# frame in the app library (wimz-bench sealed-cost, release) and the robot library (seal + sign,
# verify + open), and an epoch change in a household of 20 through one release relay.
#   scripts/bench-sealed.sh [--frames 2000] [--members 20] [--changes 10]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_packages
build release --product wimz-bench
"$(swift build -c release --show-bin-path)/wimz-bench" sealed-cost
python_bench bench-sealed scripts/bench_sealed.py websockets "cryptography>=47" -- "$@"
