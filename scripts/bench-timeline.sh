#!/usr/bin/env bash
# The household's timeline (issue 73 §6): forwarding with timeline events in the mix, entries
# written a second and transactions per 100, pages at 1M and 20M entries, a week's catch-up, and
# a day's partition dropped while traffic flows; docs/performance.md has the figures.
#   scripts/bench-timeline.sh [--small 1000000] [--large 20000000] [--rate 1000] [--seconds 10]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
python_bench bench-timeline scripts/bench_timeline.py "psycopg[binary]" websockets -- "$@"
