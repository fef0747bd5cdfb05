#!/usr/bin/env bash
# Builds the robot library's packages from this checkout: dist/wimz_robot-<version>-py3-none-any.whl
# and dist/wimz_robot-<version>.tar.gz (PyPA's `build`, in a throwaway virtualenv; the version is
# VERSION on the release's tag and VERSION.devN+gHASH between releases, package_version in
# scripts/lib.sh, which clients/python/setup.py asks). Prints their paths.
#   scripts/package-robot.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

install_missing python3 python3-venv
# The wheel says which build it is, as the Debian package does: VERSION on the release's tag,
# VERSION.devN+gHASH between releases (clients/python/setup.py asks package_version).
version=$(package_version python)
work=$(mktemp -d /tmp/wimz-robot-build.XXXXXX)
trap 'rm -rf "$work"' EXIT
venv="$work/venv"
python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check build >&2
mkdir -p dist
rm -f "dist/wimz_robot-$version-py3-none-any.whl" "dist/wimz_robot-$version.tar.gz"
# The sdist from the checkout (stamped with the version), the wheel from the sdist.
"$venv/bin/python" -m build --outdir "$PWD/dist" clients/python >&2
for f in "dist/wimz_robot-$version-py3-none-any.whl" "dist/wimz_robot-$version.tar.gz"; do
    [ -f "$f" ] || die "$f was not built"
    echo "$f"
done
