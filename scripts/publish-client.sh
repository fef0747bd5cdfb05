#!/usr/bin/env bash
# The app libraries' package (clients/swift) as a repository of its own: SwiftPM resolves a package
# at a repository's root, and this repository's root is the daemon's. Splits clients/swift out of
# HEAD with its history (git subtree) into the bare repository DIR as its branch main and, on a
# release's tagged commit, tags the split with the release too. Publishing it is then one push:
#   git -C DIR push --follow-tags https://github.com/wimzai/wimz-relay-client.git main
# Usage: scripts/publish-client.sh [--to DIR]   (default dist/wimz-relay-client.git)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
target=dist/wimz-relay-client.git
while [ $# -gt 0 ]; do
    case "$1" in
        --to) target=${2:?--to needs a directory}; shift 2 ;;
        *) die "unknown argument: $1 (usage: scripts/publish-client.sh [--to DIR])" ;;
    esac
done
[ -d "$target" ] || git init -q --bare -b main "$target"
split=$(git subtree split -q --prefix=clients/swift HEAD)
git push -q --force "$target" "$split:refs/heads/main"
version=$(tr -d '[:space:]' < VERSION)
if [ "$(git rev-parse -q --verify "refs/tags/$version^{commit}" || true)" = "$(git rev-parse HEAD)" ]; then
    git push -q --force "$target" "$split:refs/tags/$version"
    say "$target: main and $version at $split"
else
    say "$target: main at $split ($version is not tagged at HEAD: no release tag)"
fi
