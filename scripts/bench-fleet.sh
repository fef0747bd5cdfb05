#!/usr/bin/env bash
# What a relay process costs as the fleet grows: for each fleet size (devices with a robot and two
# app tokens each, written in SQL), the time from exec to /readyz 200 and the RSS once ready, idle,
# no sockets; then the same once the phones have registered (two push registrations and a Live
# Activity start token a device). A process holds the tokens and registrations its clients need,
# not the fleet's, so both should stay where they are with an empty database (docs/performance.md,
# "A million robots").
#   scripts/bench-fleet.sh [DEVICES...]      (default: 0 100000 1000000)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

sizes=("$@")
[ $# -gt 0 ] || sizes=(0 100000 1000000)
ensure_packages
build release --product wimz-relay
build release --product wimz-bench
bin=$(swift build -c release --show-bin-path)
bench_workspace fleet 0

# ready: starts the relay; prints milliseconds from exec to /readyz 200, and its RSS (KiB) 2 s later.
ready() {
    local port=$(( 20000 + RANDOM % 20000 )) started now rss
    started=$(date +%s%N)
    "$bin/wimz-relay" serve --listen "127.0.0.1:$port" --log-level warn --spool-dir "$work/spool" >> "$work/relay.log" 2>&1 &
    relay_pid=$!
    for _ in $(seq 3000); do curl -sf -o /dev/null "http://127.0.0.1:$port/readyz" && break; sleep 0.01; done
    now=$(date +%s%N)
    curl -sf -o /dev/null "http://127.0.0.1:$port/readyz" || die "the relay did not become ready"
    sleep 2
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$relay_pid/status")
    kill -TERM "$relay_pid"; wait "$relay_pid" 2>/dev/null || true
    relay_pid=
    echo "$(( (now - started) / 1000000 )) $rss"
}

printf '%10s %10s %14s %12s %12s\n' devices tokens registrations ready_ms rss_mib
for devices in "${sizes[@]}"; do
    say "provisioning $devices devices"
    provision_fleet "$devices"
    tokens=$(psql "$WIMZ_DATABASE_URL" -qtAc "SELECT count(*) FROM tokens")
    for phones in without with; do
        if [ "$phones" = with ]; then
            say "provisioning their phones' registrations"
            provision_registrations "$devices"
        fi
        registrations=$(psql "$WIMZ_DATABASE_URL" -qtAc \
            "SELECT (SELECT count(*) FROM push_registrations) + (SELECT count(*) FROM live_activity_start_tokens)")
        for round in 1 2; do
            read -r ms rss <<< "$(ready)"
            printf '%10s %10s %14s %12s %12.1f\n' "$devices" "$tokens" "$registrations" "$ms" "$(echo "$rss / 1024" | bc -l)"
        done
    done
done
