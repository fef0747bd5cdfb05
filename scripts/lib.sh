# Shared helpers for scripts/run.sh, scripts/test.sh and scripts/bench.sh. Sourced, not run.
# shellcheck shell=bash

# The relay's malloc setting, as the systemd units set it (see systemd/wimz-relay.service):
# every script that starts a relay (run, test, benchmarks) runs it the way it is deployed.
export GLIBC_TUNABLES=${GLIBC_TUNABLES:-glibc.malloc.tcache_count=4096}

# Debian packages that building the relay and its Debian package needs (scripts/package.sh).
WIMZ_BUILD_PACKAGES=(pkg-config libwebsockets-dev libpq-dev libssl-dev dpkg-dev python3)
# What the run and test commands add: the event-loop plugin, the real components the tests and the
# demo start, and the package test's tools (debootstrap, lintian). Never installed on a server:
# deploy/install.sh installs the package, whose Depends name its own runtime libraries.
WIMZ_APT_PACKAGES=("${WIMZ_BUILD_PACKAGES[@]}" libwebsockets-evlib-ev postgresql coturn wrk openssl
                   python3-venv curl iproute2 haproxy prometheus debootstrap lintian certbot pebble
                   postgresql-15-auto-failover pg-auto-failover-cli)

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# install_missing PACKAGE…: installs whichever is missing (one apt-get call, nothing when all are there).
install_missing() {
    local missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        say "installing ${missing[*]}"
        as_root apt-get update -q >&2
        # coturn's package starts a system-wide daemon we don't use; keep it from starting.
        as_root env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get install -y -q "${missing[@]}" >&2
    fi
}

# ensure_swift: the Swift toolchain on PATH (or at /opt/swift).
ensure_swift() {
    if ! command -v swift >/dev/null 2>&1; then
        [ -x /opt/swift/usr/bin/swift ] || die "Swift 6 toolchain not found (expected on PATH or at /opt/swift)"
        export PATH="/opt/swift/usr/bin:$PATH"
    fi
}

# ensure_packages: what the run and test commands need (WIMZ_APT_PACKAGES). Only for a
# development or CI machine. The host's own coturn, HAProxy and Prometheus are left as they are:
# the demo and the tests start their own, on ports and folders of their own.
ensure_packages() {
    install_missing "${WIMZ_APT_PACKAGES[@]}"
    ensure_swift
}

# The host's own coturn, HAProxy and Prometheus, told apart from the ones the tests start by who
# runs them or the configuration they read (Debian's units: coturn and Prometheus as their own
# users, HAProxy on /etc/haproxy/haproxy.cfg). host_service_pids NAME prints their process ids.
HOST_SERVICES=(coturn haproxy prometheus)
host_service_pids() {
    case "$1" in
        coturn) pgrep -u turnserver -x turnserver ;;
        haproxy) pgrep -f -- '-f /etc/haproxy/haproxy.cfg' ;;
        prometheus) pgrep -u prometheus -x prometheus ;;
    esac | sort | tr '\n' ' '
    return 0
}

# host_services_start DIR: starts, as Debian's units run them, each of the host's services that
# is not running (CI's check that the test command leaves a server's services alone), noting in
# DIR which it started; prints each one's process ids.
host_services_start() {
    local dir=$1 name
    mkdir -p "$dir"
    for name in "${HOST_SERVICES[@]}"; do
        if [ -z "$(host_service_pids "$name")" ]; then
            case "$name" in
                coturn) runuser -u turnserver -- sh -c 'exec turnserver -c /etc/turnserver.conf --pidfile= >/dev/null 2>&1 &' ;;
                haproxy) haproxy -Ws -f /etc/haproxy/haproxy.cfg -p "$dir/haproxy.pid" -D >/dev/null 2>&1 ;;
                prometheus) runuser -u prometheus -- sh -c 'cd /var/lib/prometheus && exec prometheus --config.file=/etc/prometheus/prometheus.yml >/dev/null 2>&1 &' ;;
            esac
            echo "$name" >> "$dir/started"
        fi
    done
    sleep 2
    for name in "${HOST_SERVICES[@]}"; do
        host_service_pids "$name" > "$dir/$name.pids"
        [ -s "$dir/$name.pids" ] && [ "$(cat "$dir/$name.pids")" != " " ] || die "the host's $name did not start"
        say "the host's $name runs as $(cat "$dir/$name.pids")"
    done
}

# host_services_check DIR: fails unless each service found by host_services_start still runs as
# the same processes; then stops the ones it started.
host_services_check() {
    local dir=$1 name status=0
    for name in "${HOST_SERVICES[@]}"; do
        if [ "$(host_service_pids "$name")" != "$(cat "$dir/$name.pids")" ]; then
            printf 'error: the host'"'"'s %s ran as %s before the tests and as %s after\n' \
                "$name" "$(cat "$dir/$name.pids")" "$(host_service_pids "$name")" >&2
            status=1
        else
            say "the host's $name still runs as $(cat "$dir/$name.pids")"
        fi
    done
    if [ -f "$dir/started" ]; then
        while read -r name; do
            # shellcheck disable=SC2046
            kill $(host_service_pids "$name") 2>/dev/null || true
        done < "$dir/started"
    fi
    return "$status"
}

# ensure_build_packages: what building the package needs (WIMZ_BUILD_PACKAGES); touches no service.
ensure_build_packages() {
    install_missing "${WIMZ_BUILD_PACKAGES[@]}"
    ensure_swift
}

# bench_kit TOOL: the benchmark kit's TOOL folder (../shared/bench/TOOL beside the checkout: the
# C load generator and reference relays, kept outside this repository), or a clear error.
bench_kit() {
    local folder="../shared/bench/$1"
    [ -d "$folder" ] || die "this benchmark needs the benchmark kit's $1 in $folder (docs/testing.md, Benchmarks)"
    echo "$folder"
}

# package_version [python]: the Debian package's (or the wheel's) version of this checkout. VERSION names the release being
# made (CHANGELOG.md's newest heading); the commit tagged with it builds exactly VERSION, every other
# commit VERSION~dev.N+gHASH (N: the commits up to it), which apt orders after the development
# builds before it and before the release itself. After a release, the next commit raises VERSION.
package_version() {
    local version head
    version=$(tr -d '[:space:]' < VERSION)
    head=$(git rev-parse -q --verify HEAD 2>/dev/null) || { echo "$version"; return 0; }
    if [ "$(git rev-parse -q --verify "refs/tags/$version^{commit}" 2>/dev/null)" = "$head" ]; then
        echo "$version"
    elif [ "${1:-}" = python ]; then  # PEP 440's words for the same: pip orders them as apt does
        echo "$version.dev$(git rev-list --count HEAD)+g$(git rev-parse --short=10 HEAD)"
    else
        echo "$version~dev.$(git rev-list --count HEAD)+g$(git rev-parse --short=10 HEAD)"
    fi
}

# build CONFIG [swift build args…]: builds quietly (drops the per-file progress lines).
# A debug build is the test build: with WIMZ_SANITIZER's sanitizer (address unless it says
# thread, or none for a plain build in .build) in a build folder of its own, so the run, example
# and schemathesis scripts reuse what scripts/test.sh built (WIMZ_BUILD_CONFIG=debug).
build() {
    local config=$1; shift
    local options=()
    mapfile -t options < <(config_options "$config")
    # Also dropped: gold's warning for each of the AddressSanitizer runtime's local symbols, at every link.
    swift build -c "$config" "${options[@]}" "$@" 2>&1 |
        sed -E -e '/^\[[0-9]+\/[0-9]+\] (Compiling|Emitting|Wrapping|Write|Linking)/d' \
            -e "/ld.gold: warning: Cannot export local symbol '__asan_/d" >&2
}

# config_options CONFIG: swift build's options for that build, one a line (debug: the test build's
# sanitizer and folder; none for another).
config_options() {
    [ "$1" = debug ] || return 0
    case "${WIMZ_SANITIZER:-address}" in
        none) ;;
        address|thread) printf '%s\n' "--sanitize=${WIMZ_SANITIZER:-address}" --scratch-path "$(scratch_path)" ;;
    esac
}

# scratch_path: the test build's folder.
scratch_path() {
    case "${WIMZ_SANITIZER:-address}" in none) echo .build ;; *) echo ".build-${WIMZ_SANITIZER:-address}" ;; esac
}

# bin_path CONFIG: where that build's executables are.
bin_path() {
    local options=()
    mapfile -t options < <(config_options "$1")
    swift build -c "$1" "${options[@]}" --show-bin-path
}

# build_relay [CONFIG]: builds wimz-relay (default WIMZ_BUILD_CONFIG, else release) and prints
# the binary's path.
build_relay() {
    local config=${1:-${WIMZ_BUILD_CONFIG:-release}}
    say "building ($config)"
    build "$config" --product wimz-relay
    echo "$(bin_path "$config")/wimz-relay"
}

pg_bindir() {
    local d
    d=$(pg_config --bindir 2>/dev/null)
    # `return 0`, not `return`: in an EXIT trap after `exit 1` a bare return gives 1 (bash takes
    # the status from before the trap), and under `set -e` that ended the cleanup before
    # pg_stop, leaving a failed test run's PostgreSQL running.
    if [ -x "$d/initdb" ]; then echo "$d"; return 0; fi
    for d in /usr/lib/postgresql/*/bin; do [ -x "$d/initdb" ] && { echo "$d"; return 0; }; done
    die "PostgreSQL server binaries not found (package postgresql)"
}

# PostgreSQL refuses to run as root: run as the 'postgres' user when we are root.
pg_as_owner() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

# pg_shared_buffers: the private cluster's buffer pool, a quarter of the machine's memory (the
# starting point PostgreSQL's manual gives for a database server) from 128 MB to 8 GB, or
# WIMZ_PG_SHARED_BUFFERS. PostgreSQL's own default of 128 MB holds a few percent of a
# million-device fleet's tokens: a restarted node's lookups then read most index pages from the
# kernel (docs/performance.md, "Session 35"). The pool is taken from the kernel as it fills.
pg_shared_buffers() {
    if [ -n "${WIMZ_PG_SHARED_BUFFERS:-}" ]; then echo "$WIMZ_PG_SHARED_BUFFERS"; return; fi
    awk '/^MemTotal:/ {mb = int($2 / 1024 / 4); if (mb < 128) mb = 128; if (mb > 8192) mb = 8192; print mb "MB"}' /proc/meminfo
}

# pg_start DIR: creates (first time) and starts a private cluster in DIR, listening only on a
# Unix socket in DIR. Prints the libpq conninfo of its 'postgres' database.
pg_start() {
    local dir=$1 bin
    bin=$(pg_bindir)
    mkdir -p "$dir"
    [ "$(id -u)" -eq 0 ] && chown postgres:postgres "$dir"
    chmod 700 "$dir"
    if [ ! -f "$dir/data/PG_VERSION" ]; then
        pg_as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth=trust --no-sync -E UTF8 >"$dir/initdb.log" 2>&1 \
            || { cat "$dir/initdb.log" >&2; die "initdb failed"; }
    fi
    if ! pg_as_owner "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
        pg_as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 \
            -o "-c listen_addresses='' -c unix_socket_directories='$dir' -c max_connections=300 -c fsync=${WIMZ_PG_FSYNC:-on} -c shared_buffers=$(pg_shared_buffers)" \
            start >/dev/null || { tail -20 "$dir/postgres.log" >&2; die "PostgreSQL did not start"; }
    fi
    echo "host=$dir port=5432 user=postgres dbname=postgres"
}

# pg_stop DIR [mode]: stops the cluster in DIR (fast shutdown by default).
pg_stop() {
    local dir=$1 mode=${2:-fast} bin
    bin=$(pg_bindir)
    [ -f "$dir/data/PG_VERSION" ] && pg_as_owner "$bin/pg_ctl" -D "$dir/data" -m "$mode" -w stop >/dev/null 2>&1
    return 0
}

# scratch NAME: a throwaway directory in $work (reachable by the 'postgres' user) that is removed
# on exit, after stopping the relay in $relay_pid and the private cluster in $work/pg.
scratch() {
    work=$(mktemp -d "/tmp/wimz-$1.XXXXXX")
    chmod 755 "$work"
    relay_pid=""
    trap scratch_cleanup EXIT
}
# scratch_relay RELAY [serve args…]: in scratch's folder a private PostgreSQL (fsync off),
# migrated, and RELAY serving it on a free loopback port ($port, $relay_pid; its log
# $work/relay.log), waited for until /readyz answers (10 s at most). Exports WIMZ_DATABASE_URL,
# WIMZ_MIGRATIONS_DIR and WIMZ_SPOOL_DIR.
scratch_relay() {
    local relay=$1; shift
    export WIMZ_PG_FSYNC=off
    WIMZ_DATABASE_URL=$(pg_start "$work/pg")
    export WIMZ_DATABASE_URL WIMZ_MIGRATIONS_DIR="$PWD/migrations" WIMZ_SPOOL_DIR="$work/spool"
    "$relay" migrate >/dev/null
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$relay" serve --listen "127.0.0.1:$port" "$@" > "$work/relay.log" 2>&1 &
    relay_pid=$!
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.1; done
}
scratch_cleanup() {
    if [ -n "$relay_pid" ] && kill "$relay_pid" 2>/dev/null; then wait "$relay_pid" 2>/dev/null; fi
    pg_stop "$work/pg" immediate
    rm -rf "$work"
}

# pg_running DIR: true when the private cluster in DIR is up.
pg_running() {
    local dir=$1
    [ -f "$dir/data/PG_VERSION" ] && pg_as_owner "$(pg_bindir)/pg_ctl" -D "$dir/data" status >/dev/null 2>&1
}

# The state directory of scripts/run.sh and the examples: WIMZ_STATE_DIR or ./.local, or a
# /var/tmp one when we are root and the 'postgres' user cannot reach the checkout.
state_dir() {
    local state=${WIMZ_STATE_DIR:-$PWD/.local}
    mkdir -p "$state"
    if [ "$(id -u)" -eq 0 ] && ! runuser -u postgres -- test -x "$state"; then
        state="/var/tmp/wimz-relay-$(echo "$PWD" | sha256sum | cut -c1-12)"
        mkdir -p "$state"
        chmod 755 "$state"
    fi
    echo "$state"
}

# load_demo_env: for the examples, the state directory's demo tokens (sets $state too).
load_demo_env() {
    state=$(state_dir)
    [ -f "$state/demo.env" ] || die "no demo device yet: start scripts/run.sh first"
    # shellcheck disable=SC1091
    source "$state/demo.env"
}

# turn_start DIR PORT REALM CONNINFO: starts coturn on 127.0.0.1:PORT (UDP and TCP) in REST-secret
# mode, reading the secrets of REALM live from turn_secret in the database CONNINFO (the deploy
# recipe's shared-DB mode). Waits until it listens; prints its pid.
turn_start() {
    local dir=$1 port=$2 realm=$3 conninfo=$4 pid
    mkdir -p "$dir"
    if ss -Hlnu "sport = :$port" 2>/dev/null | grep -q . || ss -Hlnt "sport = :$port" 2>/dev/null | grep -q .; then
        die "port $port is in use: set WIMZ_TURN_PORT to a free one (or WIMZ_TURN_URLS to use your own TURN server)"
    fi
    : > "$dir/turnserver.log"
    # Loopback peers are allowed so the demo can relay between programs on this machine.
    turnserver -n --listening-ip=127.0.0.1 --relay-ip=127.0.0.1 --listening-port="$port" \
        --use-auth-secret --realm="$realm" --psql-userdb="$conninfo" \
        --no-tls --no-dtls --no-cli --allow-loopback-peers --fingerprint \
        --min-port=49152 --max-port=49352 --log-file="$dir/turnserver.log" --simple-log \
        --pidfile="$dir/turnserver.pid" >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 100); do
        ss -Hlnu "sport = :$port" 2>/dev/null | grep -q . && { echo "$pid"; return 0; }
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill "$pid" 2>/dev/null
    tail -20 "$dir/turnserver.log" >&2
    die "coturn did not start (log: $dir/turnserver.log)"
}

# cpu_ticks PID: the user + system CPU of process PID (all its threads) so far, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# postgres_ticks: the same for every PostgreSQL process (a benchmark's private server is the only
# one running), with the backends that already exited (reaped into their parent's count).
postgres_ticks() {
    local p t=0
    for p in $(pgrep -u postgres); do t=$((t + $(awk '{print $14 + $15 + $16 + $17}' "/proc/$p/stat" 2>/dev/null || echo 0))); done
    echo "$t"
}

# bench_workspace NAME DEVICES: for a benchmark script (with $bin, the release binaries): a
# scratch folder $work, a private PostgreSQL in it ($url, exported with the migrations as the
# relay reads them), the schema migrated and DEVICES devices provisioned into $work/tokens.csv.
# On exit the relay in $relay_pid (when set), the database and the folder go.
bench_workspace() {
    work=$(mktemp -d "/tmp/wimz-$1.XXXXXX")
    chmod 755 "$work"  # the postgres user reaches its data folder inside
    relay_pid=
    trap bench_cleanup EXIT
    url=$(pg_start "$work/pg")
    export WIMZ_DATABASE_URL="$url" WIMZ_MIGRATIONS_DIR="$PWD/migrations"
    "$bin/wimz-relay" migrate >/dev/null
    say "provisioning $2 devices"
    "$bin/wimz-bench" provision --database-url "$url" --devices "$2" --out "$work/tokens.csv" >/dev/null
}

# provision_fleet N: a database of its own in the workspace's server with exactly N devices and 3N
# tokens (a robot `wimz_r_fleetrobotI`, an app `wimz_a_fleetappI`, a second app), written in SQL;
# WIMZ_DATABASE_URL names it from then on. Needs `$bin` and `$url` (bench_workspace).
provision_fleet() {
    local db="fleet_$1"
    psql "$url" -qtAc "CREATE DATABASE $db" >/dev/null
    export WIMZ_DATABASE_URL="${url/dbname=postgres/dbname=$db}"
    "$bin/wimz-relay" migrate >/dev/null
    [ "$1" -gt 0 ] || return 0
    psql "$WIMZ_DATABASE_URL" -qtAc "
        INSERT INTO devices (id) SELECT 'fleet' || g FROM generate_series(1, $1) g;
        INSERT INTO tokens (device_id, role, digest)
        SELECT 'fleet' || g, k.role, sha256(convert_to(k.prefix || g, 'UTF8'))
        FROM generate_series(1, $1) g,
             (VALUES ('robot', 'wimz_r_fleetrobot'), ('app', 'wimz_a_fleetapp'), ('app', 'wimz_a_fleetspare')) AS k(role, prefix)" >/dev/null
    psql "$WIMZ_DATABASE_URL" -qtAc "VACUUM ANALYZE devices" -c "VACUUM ANALYZE tokens" >/dev/null
}

# provision_registrations N: what the phones of provision_fleet's N devices hand over, written in
# SQL: two push registrations and a Live Activity start token for each device's app token (without
# the tables' triggers: no notification or audit row for each of millions).
provision_registrations() {
    [ "$1" -gt 0 ] || return 0
    psql "$WIMZ_DATABASE_URL" -qtAc "
        SET session_replication_role = replica;
        INSERT INTO push_registrations (device_id, token, environment, app_token_id, events)
        SELECT t.device_id, md5(t.id || '-' || n) || md5(n || '-' || t.id), 'production', t.id, '{bark_detected,robot_offline}'
        FROM tokens t, generate_series(1, 2) n
        WHERE t.role = 'app' AND t.digest = sha256(convert_to('wimz_a_fleetapp' || substr(t.device_id, 6), 'UTF8'));
        INSERT INTO live_activity_start_tokens (device_id, app_token_id, token, environment)
        SELECT device_id, app_token_id, min(token), 'production' FROM push_registrations GROUP BY device_id, app_token_id" >/dev/null
    psql "$WIMZ_DATABASE_URL" -qtAc "VACUUM ANALYZE push_registrations" -c "VACUUM ANALYZE live_activity_start_tokens" >/dev/null
}

bench_cleanup() {
    [ -n "${relay_pid:-}" ] && kill "$relay_pid" 2>/dev/null && wait "$relay_pid" 2>/dev/null
    pg_stop "$work/pg" immediate
    rm -rf "$work"
}

# python_bench NAME SCRIPT PACKAGE... -- ARGS: a Python benchmark from a clean clone: a release
# relay (WIMZ_RELAY_BIN), a private PostgreSQL without fsync (WIMZ_TEST_DATABASE_URL) and a venv
# with PACKAGEs from PyPI, all removed afterwards; then SCRIPT ARGS (the test kit's Database and
# RelayNode find them through those variables).
python_bench() {
    local name=$1 script=$2 packages=()
    shift 2
    while [ $# -gt 0 ] && [ "$1" != -- ]; do packages+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    ensure_packages
    WIMZ_RELAY_BIN=$(build_relay release)
    bench_dir=$(mktemp -d "/tmp/wimz-$name.XXXXXX")
    chmod 755 "$bench_dir"
    trap 'pg_stop "$bench_dir/pg" immediate; rm -rf "$bench_dir"' EXIT
    WIMZ_TEST_DATABASE_URL=$(WIMZ_PG_FSYNC=off pg_start "$bench_dir/pg")
    export WIMZ_TEST_DATABASE_URL WIMZ_RELAY_BIN WIMZ_MIGRATIONS_DIR="$PWD/migrations"
    say "installing ${packages[*]} (PyPI) in $bench_dir/venv"
    python3 -m venv "$bench_dir/venv"
    "$bench_dir/venv/bin/pip" install -q --disable-pip-version-check "${packages[@]}" >&2
    "$bench_dir/venv/bin/python" "$script" "$@"
}
