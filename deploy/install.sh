#!/usr/bin/env bash
# Installs (or upgrades to) the wimz-relay Debian package on this server, and nothing else:
#   sudo deploy/install.sh [PACKAGE.deb] [--database] [--restart] [--start]
# PACKAGE.deb: a package built elsewhere (scripts/package.sh); without one, it is built here
# first (which needs the Swift toolchain and the build's -dev packages on this machine: better
# built once on a build host and copied to every node). apt-get installs it with its
# dependencies; the package's maintainer scripts create the service user and enable nothing.
#   --database                then run the package's `wimz-relay-setup database`: the roles and the
#                             database on this host's PostgreSQL, the URL in the env file (for a
#                             database elsewhere run wimz-relay-setup yourself: man wimz-relay-setup)
#   --restart                 on an upgrade, restart the running instances one at a time
#                             (WIMZ_RESTART_ON_UPGRADE=yes for the package's postinst)
#   --start                   enable and start wimz-relay.service after installing
# No other package is installed, stopped or disabled. docs/operations.md has the whole procedure.
set -euo pipefail
cd "$(dirname "$0")/.."

# Its own say/die, not scripts/lib.sh's: with a .deb given, this file alone may be copied to a node.
say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

deb=
database=0
restart=no
start=0
while [ $# -gt 0 ]; do
    case "$1" in
        --database) database=1; shift ;;
        --database-admin-url) die "--database-admin-url is gone: --database, or wimz-relay-setup database --admin-url (man wimz-relay-setup)" ;;
        --restart) restart=yes; shift ;;
        --start) start=1; shift ;;
        --prefix|--no-start) die "$1 is gone: the package installs into /usr and starts nothing unless --start" ;;
        -*) die "unknown option $1 (see the header of this script)" ;;
        *) deb=$1; shift ;;
    esac
done
[ "$(id -u)" -eq 0 ] || die "run as root (it installs a package)"

if [ -z "$deb" ]; then
    say "building the package (scripts/package.sh)"
    deb=$(scripts/package.sh)
fi
[ -f "$deb" ] || die "no such package: $deb"
case "$deb" in /*) ;; *) deb="$PWD/$deb" ;; esac

say "installing $(basename "$deb")"
# apt-get resolves the package's Depends from the configured archive; the path must look like one.
# An edited env file is kept without a question when the new package ships a changed one (dpkg
# leaves that one beside it as wimz-relay.env.dpkg-dist, to compare).
DEBIAN_FRONTEND=noninteractive WIMZ_RESTART_ON_UPGRADE=$restart apt-get install -y -q \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "$deb"

env_file=/etc/wimz-relay/wimz-relay.env
if [ "$database" -eq 1 ]; then
    wimz-relay-setup database
fi

if [ "$start" -eq 1 ]; then
    systemctl enable --now wimz-relay
    say "started: systemctl status wimz-relay; journalctl -u wimz-relay -f"
else
    say "installed $(wimz-relay --version); edit $env_file, then: systemctl enable --now wimz-relay"
fi
