#!/usr/bin/env bash
# The simulated robot (clients/python/examples/simulated_robot.py) on the demo device of a
# running scripts/run.sh: missions, events, command answers, TURN credentials.
# Installs the wimz-robot package in a virtualenv under the state directory on first use
# (WIMZ_PYTHON names an interpreter that already has it). Extra arguments go to the example.
#   scripts/example-robot.sh [--missions N] [--step-seconds S]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

load_demo_env
python=${WIMZ_PYTHON:-}
if [ -z "$python" ]; then
    python="$state/venv/bin/python"
    if [ ! -x "$python" ] || ! "$python" -c "import wimz_robot" 2>/dev/null; then
        say "installing clients/python in $state/venv"
        python3 -m venv "$state/venv"
        "$state/venv/bin/pip" install -q --disable-pip-version-check ./clients/python >&2
    fi
fi
exec "$python" clients/python/examples/simulated_robot.py --url "http://${WIMZ_LISTEN:-127.0.0.1:8080}" \
    --device demo-robot --token "$DEMO_ROBOT_TOKEN" "$@"
