#!/usr/bin/env bash
# Retention at 10 million rows (issue 43 §2): the pruner's batch sizes, a relay's prune round
# with the audit writer's inserts and forwarding measured before and during it, and monthly
# partitions (conversion, dropping a month) for comparison; docs/performance.md has the figures.
#   scripts/bench-retention.sh [--rows 10000000] [--days 400] [--retain 365] [--wait 15]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
python_bench bench-retention scripts/bench_retention.py "psycopg[binary]" websockets -- "$@"
