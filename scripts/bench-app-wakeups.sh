#!/usr/bin/env bash
# How often a healthy, quiet example app wakes (docs/performance.md "Session 39: the example app's
# wake-ups"): wimz-app-demo (release) watching an online robot through one release relay, its
# threads' voluntary context switches a minute, in the foreground and in the background.
#   scripts/bench-app-wakeups.sh [--settle 10] [--window 60]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_packages
build release --product wimz-app-demo
export WIMZ_APP_DEMO_BIN
WIMZ_APP_DEMO_BIN="$(bin_path release)/wimz-app-demo"
python_bench bench-app-wakeups scripts/bench_app_wakeups.py websockets "cryptography>=47" -- "$@"
