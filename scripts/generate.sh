#!/usr/bin/env bash
# Rewrites the files made from the code: from serve's table of settings
# (Sources/RelayCore/ServeOptions.swift) systemd/wimz-relay.env.example and the README's table
# between its options markers; from WimzProtocol the robot library's protocol-constants.json.
# ServeOptionsTests and WimzProtocolTests fail while they differ.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build --product wimz-relay >/dev/null
relay=$(swift build --show-bin-path)/wimz-relay
"$relay" options --format env > systemd/wimz-relay.env.example
"$relay" protocol-constants | python3 -m json.tool --sort-keys > clients/python/wimz_robot/protocol-constants.json
python3 - "$relay" <<'PY'
import subprocess, sys
table = subprocess.run([sys.argv[1], "options", "--format", "markdown"], check=True, capture_output=True, text=True).stdout
readme = open("README.md").read()
begin, end = "<!-- options:begin (scripts/generate.sh) -->\n", "<!-- options:end -->"
head, rest = readme.split(begin, 1)
_, tail = rest.split(end, 1)
open("README.md", "w").write(head + begin + table + end + tail)
PY
