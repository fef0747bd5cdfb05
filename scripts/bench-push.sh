#!/usr/bin/env bash
# Push figures (issue 24 §8): pushes/s one node sustains against the test kit's APNs stand-in, the
# relay's CPU per push, event → APNs request p50/p99, memory per registration.
#   scripts/bench-push.sh [--rates 250,500,1000] [--seconds 10] [--devices 50] [--registrations 20000]
#                         [--live-devices 100] [--live-seconds 60] [--sections rate,memory,live]
# Live Activities (issue 52 §6): robot event → APNs request p50/p99 with a mission on every device,
# requests per activity per minute.
# (Fan-out with registrations: WIMZ_INSTRUCTIONS_PUSH=1000 scripts/bench-instructions.sh.)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
python_bench bench-push scripts/bench_push.py websockets h2 cryptography -- "$@"
