#!/usr/bin/env bash
# Builds the robot library's packages from this checkout: dist/wimz_robot-<VERSION>-py3-none-any.whl
# and dist/wimz_robot-<VERSION>.tar.gz (PyPA's `build`, in a throwaway virtualenv; the version is
# the repository's VERSION, copied into the package by scripts/generate.sh). Prints their paths.
#   scripts/package-robot.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

install_missing python3 python3-venv
version=$(tr -d '[:space:]' < VERSION)
venv=$(mktemp -d /tmp/wimz-robot-build.XXXXXX)
trap 'rm -rf "$venv"' EXIT
python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check build >&2
mkdir -p dist
rm -f "dist/wimz_robot-$version-py3-none-any.whl" "dist/wimz_robot-$version.tar.gz"
"$venv/bin/python" -m build --outdir "$PWD/dist" clients/python >&2
# The build leaves these in the source tree.
rm -rf clients/python/build clients/python/*.egg-info
for f in "dist/wimz_robot-$version-py3-none-any.whl" "dist/wimz_robot-$version.tar.gz"; do
    [ -f "$f" ] || die "$f was not built (does clients/python/wimz_robot/_version.py say $version? scripts/generate.sh)"
    echo "$f"
done
