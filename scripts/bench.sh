#!/usr/bin/env bash
# Benchmark from a clean clone: installs what is missing, builds release, starts a private
# PostgreSQL, provisions devices, runs the relay pinned to CPU 0 and wimz-bench pinned to CPU 1,
# and prints the figures with the exact command lines.
#   scripts/bench.sh [wimz-bench run options, e.g. --devices 100 --window 64 --duration 10]
#   WIMZ_BENCH_SECTIONS=ws,turn,robothttp,recovery (the default: all four) picks what runs:
#     ws        the WebSocket phases (wimz-bench run)
#     turn      GET /api/turn/credentials under wrk
#     robothttp HTTP to the robot (wimz-bench robot-leg answers at once) against /healthz, alternating
#     recovery  the fan-out phase and a fixed-rate phase (WIMZ_RECOVERY_RATE, 50,000 msgs/s: the
#               relay's CPU per message) with v1 apps and with recovering apps (recover=1),
#               alternating (WIMZ_BENCH_ROUNDS rounds, default 3)
#   WIMZ_BENCH_RELAY_BIN=path runs that wimz-relay instead of this tree's (a build of another
#   commit, measured with this tree's load generator: before/after comparisons in one sitting)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

ensure_packages
say "building (release)"
build release --product wimz-relay
build release --product wimz-bench
bin=$(swift build -c release --show-bin-path)
relay_bin=${WIMZ_BENCH_RELAY_BIN:-$bin/wimz-relay}

work=$(mktemp -d /tmp/wimz-bench.XXXXXX)
chmod 755 "$work"
relay_pid=
loop_pid=
cleanup() {
    touch "$work/stop"
    [ -n "$relay_pid" ] && kill "$(relay_now)" 2>/dev/null
    [ -n "$loop_pid" ] && wait "$loop_pid" 2>/dev/null
    pg_stop "$work/pg" immediate
    rm -rf "$work"
}
trap cleanup EXIT

url=$(pg_start "$work/pg")
cpus=$(nproc)
pin_relay=(); pin_load=()
if [ "$cpus" -ge 2 ] && command -v taskset >/dev/null; then
    pin_relay=(taskset -c 0); pin_load=(taskset -c 1)
    # The database shares the load's core: in production it is another machine, and the
    # relay's core should measure the relay (its audit writer thread included).
    postmaster=$(head -1 "$work/pg/data/postmaster.pid")
    for p in $postmaster $(pgrep -P "$postmaster"); do taskset -p -c 1 "$p" >/dev/null; done
fi
export WIMZ_DATABASE_URL="$url" WIMZ_MIGRATIONS_DIR="$PWD/migrations"
"$relay_bin" migrate >/dev/null
# 2,000 devices: 4,000 distinct tokens for the cold/warm handshake rounds, and room for 30,000
# idle app sockets at 15 per device.
devices=2000
say "provisioning $devices devices"
"$bin/wimz-bench" provision --database-url "$url" --devices "$devices" --out "$work/tokens.csv"

port=$(( 20000 + RANDOM % 20000 ))
# Limits lifted so the phases measure the relay, not its per-socket/per-token rate limiters.
relay_cmd=("${pin_relay[@]}" "$relay_bin" serve --listen "127.0.0.1:$port" --log-level warn --spool-dir "$work/spool"
           --app-rate-limit 1000000 --app-rate-burst 1000000 --turn-request-rate 1000000
           --robot-http-rate 1000000 --robot-http-burst 1000000 --robot-http-max-pending 10000
           --turn-urls "turn:127.0.0.1:3478?transport=udp" --turn-secret "bench-secret-0123456789abcdef")
# The storm phase SIGTERMs the relay: it is started again at once, as systemd would.
relay_now() { pgrep -f -- "wimz-relay serve --listen 127.0.0.1:$port" | head -1; }
(while [ ! -f "$work/stop" ]; do "${relay_cmd[@]}" >> "$work/relay.log" 2>&1; done) &
loop_pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.1; done
relay_pid=$(relay_now)

sections=",${WIMZ_BENCH_SECTIONS:-ws,turn,robothttp,recovery},"
bench_cmd=("${pin_load[@]}" "$bin/wimz-bench" run --port "$port" --tokens "$work/tokens.csv" --relay-pid "$relay_pid" "$@")
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr), lws $(dpkg-query -W -f='${Version}' libwebsockets17 2>/dev/null)"
echo "relay:   ${relay_cmd[*]}"
[[ $sections == *,ws,* ]] && echo "load:    ${bench_cmd[*]}"
if [[ $sections == *,ws,* ]] && [ ${#pin_relay[@]} -gt 0 ]; then
    # The VM's own noise with both cores busy, as in the load phases: time the cores did not
    # run at all, which delays every message in flight (no relay gets its p99 below this).
    "${pin_relay[@]}" "$bin/wimz-bench" stalls --label "cpu 0 (relay)" &
    "${pin_load[@]}" "$bin/wimz-bench" stalls --label "cpu 1 (load) "
    wait $!
fi
if [[ $sections == *,ws,* ]]; then
    "${bench_cmd[@]}"
    # The TURN phase after the relay has settled from the storm's mass disconnect (one audit
    # event per socket).
    sleep 5
fi

# wrk's figures on one line: requests/s, p50, p99, non-2xx, and the relay's CPU time per request
# (user + system, from /proc: steadier than requests/s on a VM whose speed drifts).
wrk_line() {
    local label=$1 before after out
    shift
    before=$(cpu_ticks "$(relay_now)"); out=$("$@"); after=$(cpu_ticks "$(relay_now)")
    awk -v label="$label" -v ticks=$((after - before)) -v hz="$(getconf CLK_TCK)" '/requests in/ {n=$1} /Requests\/sec/ {rps=$2} /^ +50%/ {p50=$2} /^ +99%/ {p99=$2} /Non-2xx/ {bad=$NF} END {printf "%-16s %s req/s  p50 %s  p99 %s  non-2xx %s  relay CPU %.0f us/request\n", label, rps, p50, p99, (bad == "" ? 0 : bad), (n ? ticks * 1e6 / hz / n : 0)}' <<< "$out"
}

# GET /api/turn/credentials (one request per connection: the relay closes after each answer).
token=$(sed -n 2p "$work/tokens.csv" | cut -d, -f3)
device=$(sed -n 2p "$work/tokens.csv" | cut -d, -f1)
[[ $sections == *,turn,* ]] && for connections in 32 64; do
    wrk_cmd=("${pin_load[@]}" wrk -t1 "-c$connections" -d10s --latency -H "Authorization: Bearer $token" "http://127.0.0.1:$port/api/turn/credentials")
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.1; done
    echo "turn:    ${wrk_cmd[*]/$token/<app token>}"
    wrk_line "turn credentials" "${wrk_cmd[@]}"
done

# HTTP to the robot: a small GET through the relay to a robot leg that answers at once (wimz-bench
# robot-leg, on the load's core), against GET /healthz, alternating in the same sitting. Both are
# one request per connection (the relay closes after each answer), so both include a TCP handshake.
if [[ $sections == *,robothttp,* ]]; then
    leg_cmd=("${pin_load[@]}" "$bin/wimz-bench" robot-leg --port "$port" --tokens "$work/tokens.csv" --devices 1)
    echo "leg:     ${leg_cmd[*]}"
    "${leg_cmd[@]}" > "$work/leg.log" 2>&1 &
    leg_pid=$!
    for _ in $(seq 50); do
        curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $token" \
            "http://127.0.0.1:$port/api/devices/$device/robot/ping" | grep -q 200 && break
        sleep 0.1
    done
    for round in 1 2 3; do
        for target in healthz robot; do
            path=/healthz; [ "$target" = robot ] && path="/api/devices/$device/robot/ping"
            wrk_cmd=("${pin_load[@]}" wrk -t1 -c32 -d10s --latency -H "Authorization: Bearer $token" "http://127.0.0.1:$port$path")
            [ "$round" = 1 ] && echo "$target:  ${wrk_cmd[*]/$token/<app token>}"
            wrk_line "$target (round $round)" "${wrk_cmd[@]}"
        done
    done
    kill "$leg_pid" 2>/dev/null; wait "$leg_pid" 2>/dev/null || true
fi

# Missed-event recovery's cost: the same fan-out phase with each device's app connected plain
# and with recover=1 (every event numbered and kept in the device's history), alternating. The
# two modes use devices of their own (0–99 and 1000–1099), so the plain devices never keep a
# history.
if [[ $sections == *,recovery,* ]]; then
    for round in $(seq "${WIMZ_BENCH_ROUNDS:-3}"); do
        for mode in v1 recover; do
            # Saturated fan-out (msgs/s), and the same load at a fixed rate (the relay's CPU share
            # per message is the steadier figure on a noisy machine).
            phases=fanout,latency
            flags=(--phases "$phases" --rate "${WIMZ_RECOVERY_RATE:-50000}" --first-device 0)
            [ "$mode" = recover ] && flags=(--phases "$phases" --rate "${WIMZ_RECOVERY_RATE:-50000}" --first-device 1000 --recover)
            run_cmd=("${bench_cmd[@]}" "${flags[@]}")
            [ "$round" = 1 ] && echo "$mode:  ${run_cmd[*]}"
            "${run_cmd[@]}" | awk -v label="$mode (round $round)" '/^(fanout|rate)/ {print label ": " $0}'
        done
    done
    echo "relay rss after the recovery rounds: $(awk '/VmRSS/ {print $2 " kB"}' "/proc/$(relay_now)/status")"
fi
