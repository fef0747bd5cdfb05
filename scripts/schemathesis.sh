#!/usr/bin/env bash
# schemathesis (PyPI) against docs/openapi.json and the live admin API: a relay on a private
# PostgreSQL with an admin token, every operation generated and fuzzed (examples, coverage,
# fuzzing and stateful phases); fails on any 5xx, any response that does not match the
# document, and any other check schemathesis runs by default.
#   scripts/schemathesis.sh [extra 'st run' arguments, e.g. --max-examples 200]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_packages

# WIMZ_RELAY_BIN: a relay already built (the test command's); else the test build's, built now.
relay=${WIMZ_RELAY_BIN:-}
if [ -z "$relay" ]; then
    config=${WIMZ_BUILD_CONFIG:-debug}
    build "$config" --product wimz-relay
    relay="$(bin_path "$config")/wimz-relay"
fi

scratch schemathesis

say "starting a private PostgreSQL and the relay"
export WIMZ_ADMIN_TOKEN="wimz_admin_$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')"
# schemathesis sends thousands of requests with wrong credentials from one address on purpose;
# the failure limit (429 past 20 failures, tested in AuthTests) would answer most of them.
scratch_relay "$relay" --auth-failure-burst 1000000 --log-level warn

# WIMZ_SCHEMATHESIS_VENV: a virtualenv that has it (the test command installs it while it builds).
venv=${WIMZ_SCHEMATHESIS_VENV:-$work/venv}
if [ ! -x "$venv/bin/st" ]; then
    say "installing schemathesis (PyPI) in $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check schemathesis >&2
fi

say "schemathesis against http://127.0.0.1:$port"
(cd "$work" && "$venv/bin/st" run "$OLDPWD/docs/openapi.json" --url "http://127.0.0.1:$port" \
    --header "Authorization: Bearer $WIMZ_ADMIN_TOKEN" --workers 1 "$@")
