#!/usr/bin/env bash
# Builds the Debian package of the relay from this checkout: dist/wimz-relay_<version>_<arch>.deb,
# the version VERSION on the release's tag, VERSION~dev.N+gHASH between releases (package_version
# in scripts/lib.sh)
# (dpkg-deb; no toolchain beyond the build's own). The binary is the release build with the Swift
# runtime linked in, so a server needs no Swift; `Depends:` is computed by dpkg-shlibdeps from
# the binary's own libraries. What goes where, and why: docs/packaging.md.
#   scripts/package.sh          # installs the build's Debian packages when missing; prints the .deb's path
#   WIMZ_PACKAGE_SCRATCH=DIR scripts/package.sh   # the release build in that build folder (the test
#                                                 # command's: its packages resolved and checked out once)
# Also writes dist/wimz-relay_<version>_<arch>.debug (the binary's debug symbols, for backtraces).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

ensure_build_packages
release=$(tr -d '[:space:]' < VERSION)
version=$(package_version)
arch=$(dpkg --print-architecture)
mkdir -p dist
deb="dist/wimz-relay_${version}_${arch}.deb"

say "building the release binary (Swift runtime linked in)"
# -z now: every symbol bound at start, so the GOT can be read-only (Debian's hardening, bindnow).
# The package's version stamped in (CBuildStamp): `--version`, /healthz and the logs say which build it is.
scratch=(--scratch-path "${WIMZ_PACKAGE_SCRATCH:-.build}")
build release "${scratch[@]}" --product wimz-relay --static-swift-stdlib -Xlinker -z -Xlinker now -Xcc "-DWIMZ_PACKAGE_VERSION=\"$version\""
bin="$(swift build -c release "${scratch[@]}" --show-bin-path)/wimz-relay"
[ "$("$bin" --version)" = "$version" ] || die "the binary says $("$bin" --version), the package is $version"
grep -q "static let current = \"$release\"" Sources/RelayCore/Support/RelayVersion.swift ||
    die "RelayVersion.swift does not say $release (VERSION): run scripts/generate.sh"
if ldd "$bin" | grep -Ei 'swift|foundation|dispatch|BlocksRuntime|icu'; then
    die "the binary still links a Swift runtime library (above)"
fi

stage=$(mktemp -d /tmp/wimz-package.XXXXXX)
trap 'rm -rf "$stage"' EXIT
root="$stage/root"
doc="$root/usr/share/doc/wimz-relay"
install -d -m 0755 "$root/DEBIAN" "$root/usr/bin" "$root/usr/share/wimz-relay/migrations" "$doc" \
    "$root/usr/share/man/man8" "$root/usr/sbin" "$root/lib/systemd/system" "$root/etc/wimz-relay" "$root/usr/share/lintian/overrides"

# The binary, stripped as dh_strip strips an executable; its symbols kept beside the package.
install -m 0755 "$bin" "$root/usr/bin/wimz-relay"
objcopy --only-keep-debug "$bin" "dist/wimz-relay_${version}_${arch}.debug"
strip --remove-section=.comment --remove-section=.note "$root/usr/bin/wimz-relay"

install -m 0644 migrations/*.sql "$root/usr/share/wimz-relay/migrations/"
install -m 0644 systemd/wimz-relay.service systemd/wimz-relay@.service systemd/wimz-relay-backup.service \
    systemd/wimz-relay-backup.timer "$root/lib/systemd/system/"
install -D -m 0755 deploy/backup/wimz-relay-backup "$root/usr/lib/wimz-relay/wimz-relay-backup"
install -D -m 0755 deploy/certbot/wimz-relay-deploy-hook "$root/usr/lib/wimz-relay/wimz-relay-deploy-hook"
install -D -m 0755 deploy/wimz-relay-setup "$root/usr/sbin/wimz-relay-setup"
install -m 0644 systemd/wimz-relay.env.example "$root/etc/wimz-relay/wimz-relay.env"
install -m 0644 README.md CHANGELOG.md docs/*.md docs/openapi.json "$doc/"
install -m 0644 systemd/wimz-relay.env.example "$doc/wimz-relay.env.example"
install -d -m 0755 "$doc/deploy"
cp -r deploy/coturn deploy/haproxy deploy/prometheus deploy/grafana "$doc/deploy/"
find "$doc/deploy" -type d -exec chmod 0755 {} + && find "$doc/deploy" -type f -exec chmod 0644 {} +
install -m 0644 deploy/debian/lintian-overrides "$root/usr/share/lintian/overrides/wimz-relay"

# The copyright file: the machine-readable header, then LICENSE as it is in the repository.
{
    cat deploy/debian/copyright
    sed -e 's/^[[:space:]]*$/./' -e 's/^/ /' LICENSE
} > "$doc/copyright"
chmod 0644 "$doc/copyright"

# Reproducible dates: the last commit's (the VERSION file's time outside a git checkout).
epoch=$(git log -1 --format=%ct 2>/dev/null || stat -c %Y VERSION)
export SOURCE_DATE_EPOCH=$epoch
# A native package's changelog (Debian's format) that points at the project's own.
printf 'wimz-relay (%s) bookworm; urgency=medium\n\n  * What changed: /usr/share/doc/wimz-relay/CHANGELOG.md.\n\n -- %s  %s\n' \
    "$version" "$(sed -n 's/^Maintainer: //p' deploy/debian/control)" "$(LC_ALL=C date -u -R -d "@$epoch")" \
    | gzip -9n > "$doc/changelog.gz"
python3 scripts/manpage.py "$root/usr/bin/wimz-relay" "$version" "$epoch" | gzip -9n > "$root/usr/share/man/man8/wimz-relay.8.gz"
sed "s/^\.TH \(.*\) \"\" \"wimz-relay\"/.TH \1 \"$(LC_ALL=C date -u -d "@$epoch" +%Y-%m-%d)\" \"wimz-relay $version\"/" deploy/wimz-relay-setup.8 \
    | gzip -9n > "$root/usr/share/man/man8/wimz-relay-setup.8.gz"
chmod 0644 "$doc/changelog.gz" "$root/usr/share/man/man8/wimz-relay.8.gz" "$root/usr/share/man/man8/wimz-relay-setup.8.gz"

# Depends: the binary's libraries as dpkg-shlibdeps resolves them to packages and versions, plus
# what the binary loads without linking it (libwebsockets' libev event-loop plugin, dlopen'ed),
# what the maintainer scripts run (adduser), the units' ExecReload (/bin/kill, procps) and the
# certbot deploy hook (openssl: the certificate's names, the placeholder).
mkdir -p "$stage/shlibs/debian"
printf 'Source: wimz-relay\n\nPackage: wimz-relay\nArchitecture: any\n' > "$stage/shlibs/debian/control"
shlibs=$(cd "$stage/shlibs" && dpkg-shlibdeps -O "$root/usr/bin/wimz-relay" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[ -n "$shlibs" ] || die "dpkg-shlibdeps found no dependencies"
plugin=$(dpkg-query -S '*/libwebsockets-evlib_ev.so' 2>/dev/null | head -n 1 | cut -d: -f1)
[ -n "$plugin" ] || die "libwebsockets' libev plugin is not installed (package libwebsockets-evlib-ev)"

sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@DEPENDS@/$shlibs, $plugin, adduser, procps, openssl/" \
    -e "s/@SIZE@/$(du -sk --exclude=DEBIAN "$root" | cut -f1)/" deploy/debian/control > "$root/DEBIAN/control"
install -m 0644 deploy/debian/conffiles "$root/DEBIAN/conffiles"
install -m 0755 deploy/debian/postinst deploy/debian/prerm deploy/debian/postrm "$root/DEBIAN/"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum > DEBIAN/md5sums)
chmod 0644 "$root/DEBIAN/md5sums"
find "$root" -newermt "@$epoch" -exec touch --no-dereference --date="@$epoch" {} +

dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >&2
say "built $deb ($(du -h "$deb" | cut -f1))"
echo "$deb"
