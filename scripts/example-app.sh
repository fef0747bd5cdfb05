#!/usr/bin/env bash
# The terminal app (Sources/wimz-app-demo, on WimzRelayClient) watching the demo device of a
# running scripts/run.sh: live mission progress bar, robot state, TURN expiry.
# Extra arguments go to wimz-app-demo (e.g. --command treat, --plain, --exit-after 30).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

load_demo_env
if ! command -v swift >/dev/null 2>&1; then export PATH="/opt/swift/usr/bin:$PATH"; fi
config=${WIMZ_BUILD_CONFIG:-release}
build "$config" --product wimz-app-demo
WIMZ_APP_TOKEN="${WIMZ_APP_TOKEN:-$DEMO_APP_TOKEN}" exec "$(bin_path "$config")/wimz-app-demo" \
    --url "http://${WIMZ_LISTEN:-127.0.0.1:8080}" --device demo-robot "$@"
