#!/usr/bin/env bash
# Live again on a cellular link (docs/performance.md "Cellular links"): the relay (release) and
# its database in the cloud namespace of the link emulator linkem.py (the bench yardstick:
# ../shared/bench/linkem, or WIMZ_LINKEM), the robot library at home streaming an event every
# 250 ms, wimz-app-demo (release, the library's defaults) on the phone; per profile, how long
# after a 20 s outage and after an address change the phone is live again, events lost,
# duplicated or reordered, 4008 closes, and bytes on the phone's link. Needs root.
#   scripts/bench-cellular.sh [--profiles LTE,3G,Edge,VeryBad] [--repeats 2] [--outage 20] [--idle 60]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
[ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, TUN devices)"
linkem=${WIMZ_LINKEM:-../shared/bench/linkem/linkem.py}
[ -f "$linkem" ] || die "no link emulator at $linkem (WIMZ_LINKEM)"
ensure_packages
build release --product wimz-app-demo
export WIMZ_APP_DEMO_BIN WIMZ_LINKEM
WIMZ_APP_DEMO_BIN="$(bin_path release)/wimz-app-demo"
WIMZ_LINKEM=$(realpath "$linkem")
python_bench bench-cellular scripts/bench_cellular.py websockets "cryptography>=47" -- "$@"
