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
python_bench bench-household scripts/bench_household.py websockets -- "$@"
