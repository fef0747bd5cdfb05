#!/usr/bin/env bash
# Rewrites the files made from the code: from VERSION the relay's RelayVersion.swift, the robot
# library's _version.py and the OpenAPI document's info.version; from CHANGELOG.md's newest
# release the README's SwiftPM line
# (CLITests fails while they differ); from
# serve's table of settings (Sources/RelayCore/Config/ServeOptions.swift) systemd/wimz-relay.env.example and docs/configuration.md's table
# between its options markers; from WimzProtocol the robot library's protocol-constants.json;
# from what a relay started on a throwaway PostgreSQL exports, docs/metrics.md's table.
# ServeOptionsTests and WimzProtocolTests fail while they differ.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_swift
version=$(tr -d '[:space:]' < VERSION)
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "VERSION is not MAJOR.MINOR.PATCH: $version" >&2; exit 1; }
sed -i -E "s/(static let current = )\"[^\"]*\"/\1\"$version\"/" Sources/RelayCore/Support/RelayVersion.swift
printf '"""The version of the robot library: the repository VERSION, copied by scripts/generate.sh."""\n\n__version__ = "%s"\n' \
    "$version" > clients/python/wimz_robot/_version.py
# The README's SwiftPM line names the newest release (CHANGELOG.md's newest dated heading): a
# release's tag is what SwiftPM resolves, and VERSION may name one not yet made. The app libraries'
# own repository (scripts/publish-client.sh) starts at 1.2.0, so never an older one (CLITests).
released=$(sed -n -E 's/^## ([0-9]+\.[0-9]+\.[0-9]+) — [0-9]{4}-[0-9]{2}-[0-9]{2}$/\1/p' CHANGELOG.md | head -n 1)
released=$(printf '%s\n' "$released" 1.2.0 | sort -V | tail -n 1)
sed -i -E "s|(\.package\(url: \"https://github.com/wimzai/wimz-relay-client.git\", from: )\"[^\"]*\"|\1\"$released\"|" README.md
sed -i -E "0,/\"version\": \"[^\"]*\"/s//\"version\": \"$version\"/" docs/openapi.json
build debug --product wimz-relay
relay=$(bin_path debug)/wimz-relay
"$relay" options --format env > systemd/wimz-relay.env.example
"$relay" protocol-constants | python3 -m json.tool --sort-keys > clients/python/wimz_robot/protocol-constants.json
python3 - "$relay" <<'PY'
import subprocess, sys
table = subprocess.run([sys.argv[1], "options", "--format", "markdown"], check=True, capture_output=True, text=True).stdout
readme = open("docs/configuration.md").read()
begin, end = "<!-- options:begin (scripts/generate.sh) -->\n", "<!-- options:end -->"
head, rest = readme.split(begin, 1)
_, tail = rest.split(end, 1)
open("docs/configuration.md", "w").write(head + begin + table + end + tail)
PY

# docs/metrics.md's table: every metric a relay exports from its start, with the help text the
# code that counts writes (scripts/metrics_reference.py), read from a relay started here on a
# throwaway PostgreSQL once the retention thread's first table sizes are in.
scratch generate
scratch_relay "$relay" --log-level warn
for _ in $(seq 600); do
    curl -sf "http://127.0.0.1:$port/metrics" > "$work/metrics" 2>/dev/null && grep -q '^wimz_table_bytes{' "$work/metrics" && break
    sleep 0.1
done
grep -q '^wimz_table_bytes{' "$work/metrics" || die "the relay exported no table sizes within 60 s (see $work/relay.log)"
python3 - "$work/metrics" <<'PY'
import sys
sys.path.insert(0, "scripts")
from metrics_reference import replaced
document = open("docs/metrics.md").read()
open("docs/metrics.md", "w").write(replaced(document, open(sys.argv[1]).read()))
PY
