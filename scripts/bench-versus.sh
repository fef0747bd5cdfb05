#!/usr/bin/env bash
# This tree's relay against the C reference relay on the same libwebsockets, in one sitting:
# ../shared/bench/wsload drives ../shared/bench/lws-relay and wimz-relay alternately (each
# pinned to CPU 0, the load to CPU 1, a fresh relay per run), and the medians and their ratio
# are printed. Issue 25's yardsticks:
#   fanout   --mode fanout --devices 100 --apps 1 --window 64 (200-byte events) against
#            `lws-relay -b` (batched writes): msgs/s, target ≥ 0.8×
#   connect  --mode connect --conns 5000 --concurrency 256 against plain `lws-relay`:
#            handshakes/s, target ≥ 0.9× (each relay met the clients once before, unmeasured:
#            the tokens in memory; WIMZ_VERSUS_COLD=1 measures a process meeting them)
#   scripts/bench-versus.sh [fanout|connect …]     (default: both)
# Each run also prints the relay's CPU and PostgreSQL's (wimz-relay's audit and presence rows;
# it shares the load's core) per handshake or message, from /proc, and the end each round's own
# ratio with their median, and the geometric mean of the rounds' ratios with a 95 % bootstrap
# interval: on this VM one pair moves by ±25 % and a sitting's median by ±10 %, so the interval
# says what a sitting can tell (docs/performance.md, session 21).
#   WIMZ_VERSUS_ROUNDS=5 (rounds, each one run of each relay), WIMZ_VERSUS_SECONDS=10,
#   WIMZ_VERSUS_RELAY_ARGS="--max-descriptors 8192" (more serve flags for wimz-relay)
#   WIMZ_VERSUS_PAIRS=FILE  appends each round's ratio to FILE (one per line, "MODE:RELAY RATIO")
#     and prints the interval over every ratio of that mode and relay in it: sittings pooled
#   WIMZ_VERSUS_SELF=1  the instrument's own check: the C relay in both places of every round
#     (an unbiased bench reads 1.0 within its interval)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(fanout connect)
rounds=${WIMZ_VERSUS_ROUNDS:-5}
seconds=${WIMZ_VERSUS_SECONDS:-10}
command -v gcc >/dev/null && command -v pkg-config >/dev/null || die "the C tools need gcc and pkg-config"
ensure_packages
build release --product wimz-relay
build release --product wimz-bench
bin=$(swift build -c release --show-bin-path)

# 5,000 devices: one app token per connect-mode socket, 100 of them for the fan-out.
bench_workspace versus 5000
for tool in wsload lws-relay; do
    cp -r "$(bench_kit "$tool")" "$work/$tool"
    make -s -C "$work/$tool" >/dev/null
done
postmaster=$(head -1 "$work/pg/data/postmaster.pid")
for p in $postmaster $(pgrep -P "$postmaster"); do taskset -p -c 1 "$p" >/dev/null; done
ulimit -n "$(ulimit -Hn)"

# start_relay NAME PORT: NAME is wimz-relay, lws-relay or lws-relay-b; sets relay_pid.
start_relay() {
    local name=$1 port=$2 probe
    case $name in
        wimz-relay)
            taskset -c 0 "$bin/wimz-relay" serve --listen "127.0.0.1:$port" --log-level warn --spool-dir "$work/spool" \
                --app-rate-limit 1000000 --app-rate-burst 1000000 --auth-failure-burst 1000000 ${WIMZ_VERSUS_RELAY_ARGS:-} \
                >> "$work/relay.log" 2>&1 &
            probe="http://127.0.0.1:$port/readyz" ;;
        lws-relay) taskset -c 0 "$work/lws-relay/lws-relay" "$port" >> "$work/relay.log" 2>&1 & probe="http://127.0.0.1:$port/" ;;
        lws-relay-b) taskset -c 0 "$work/lws-relay/lws-relay" "$port" -b >> "$work/relay.log" 2>&1 & probe="http://127.0.0.1:$port/" ;;
    esac
    relay_pid=$!
    for _ in $(seq 200); do
        if [ "$name" = wimz-relay ]; then curl -sf -o /dev/null "$probe" && return 0
        else curl -s -o /dev/null "$probe" && return 0; fi
        sleep 0.05
    done
    die "$name did not start on $port"
}

stop_relay() {
    kill -TERM "$relay_pid" 2>/dev/null || true
    wait "$relay_pid" 2>/dev/null || true
    relay_pid=
}

# run_load MODE PORT: one wsload run; prints its figure (msgs/s or handshakes/s).
run_load() {
    local mode=$1 port=$2 args json
    case $mode in
        fanout) args=(--mode fanout --devices 100 --apps 1 --window 64 --duration "$seconds") ;;
        connect) args=(--mode connect --conns 5000 --concurrency 256 --duration "$seconds") ;;
    esac
    json=$(taskset -c 1 "$work/wsload/wsload" --tokens "$work/tokens.csv" --port "$port" --json "${args[@]}" | tail -1)
    python3 -c 'import json, sys
r = json.loads(sys.argv[1])
bad = r.get("lost", 0) or r.get("errors") or not r.get("ok", False)
figure = r["msgs_per_s"] if sys.argv[2] == "fanout" else r["handshake"]["per_s"]
print(f"{figure:.0f}" + (" (lost or errors: " + json.dumps({k: r.get(k) for k in ("ok", "lost", "errors")}) + ")" if bad else ""))' \
        "$json" "$mode"
}

median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

echo "machine: $(nproc) cores, $(uname -sr), lws $(dpkg-query -W -f='${Version}' libwebsockets17 2>/dev/null); relay on CPU 0, wsload on CPU 1"
for mode in "${modes[@]}"; do
    reference=lws-relay-b
    [ "$mode" = connect ] && reference=lws-relay
    measured=wimz-relay
    [ -n "${WIMZ_VERSUS_SELF:-}" ] && measured=$reference
    : > "$work/$mode.measured"; : > "$work/$mode.reference"
    for round in $(seq "$rounds"); do
        for slot in reference measured; do
            name=$reference
            [ "$slot" = measured ] && name=$measured
            port=$(( 20000 + RANDOM % 20000 ))
            start_relay "$name" "$port"
            if [ "$mode" = connect ] && [ "${WIMZ_VERSUS_COLD:-}" != 1 ]; then
                # A process holds the tokens its clients presented (session 27): the clients meet
                # it once, unmeasured, so the handshakes below compare with the token in memory,
                # as the mirror had every token before. WIMZ_VERSUS_COLD=1 measures the first meeting.
                taskset -c 1 "$work/wsload/wsload" --tokens "$work/tokens.csv" --port "$port" --mode connect --conns 5000 \
                    --concurrency 256 --close-immediately --duration "$seconds" >/dev/null 2>&1
                sleep 2  # their audit rows written
            fi
            relay_before=$(cpu_ticks "$relay_pid"); postgres_before=$(postgres_ticks)
            figure=$(run_load "$mode" "$port")
            relay_spent=$(( $(cpu_ticks "$relay_pid") - relay_before )); postgres_spent=$(( $(postgres_ticks) - postgres_before ))
            stop_relay
            units=5000; unit=handshake
            [ "$mode" = fanout ] && units=$(( ${figure%%[. ]*} * seconds )) && unit=message
            cpu=$(awk -v r="$relay_spent" -v p="$postgres_spent" -v n="$units" -v hz="$(getconf CLK_TCK)" -v u="$unit" \
                  'BEGIN {printf "relay CPU %.2f us, PostgreSQL %.2f us a %s", r * 1e6 / hz / n, p * 1e6 / hz / n, u}')
            echo "$mode round $round  $name  $figure  ($cpu)"
            file=$work/$mode.reference
            [ "$slot" = measured ] && file=$work/$mode.measured
            echo "${figure%% *}" >> "$file"
        done
    done
    ours=$(median < "$work/$mode.measured")
    theirs=$(median < "$work/$mode.reference")
    printf '%s: %s median %s, %s median %s, ratio %s\n' "$mode" "$measured" "$ours" "$reference" "$theirs" \
        "$(python3 -c 'import sys; print(f"{float(sys.argv[1]) / float(sys.argv[2]):.2f}")' "$ours" "$theirs")"
    # Each round's own ratio too: the VM's speed can change within a sitting, and a change
    # halfway puts one relay's fast rounds against the other's slow ones in the medians above.
    python3 - "$mode" "$work/$mode.measured" "$work/$mode.reference" "${WIMZ_VERSUS_PAIRS:-}" "$measured" <<'PY'
import math, random, statistics, sys
mode, ours, theirs, pooled, measured = sys.argv[1], open(sys.argv[2]).read().split(), open(sys.argv[3]).read().split(), sys.argv[4], sys.argv[5]
ratios = [float(a) / float(b) for a, b in zip(ours, theirs)]
print(f"{mode}: ratio of each round " + " ".join(f"{r:.2f}" for r in ratios) + f"; their median {statistics.median(ratios):.2f}")

def interval(values):
    # Geometric mean of the ratios and a 95 % bootstrap interval (10,000 resamples, fixed seed).
    logs = [math.log(v) for v in values]
    rng = random.Random(1)
    means = sorted(statistics.fmean(rng.choices(logs, k=len(logs))) for _ in range(10_000))
    return math.exp(statistics.fmean(logs)), math.exp(means[249]), math.exp(means[9_749])

print(f"{mode}: geometric mean of the rounds' ratios %.3f, 95 %% interval %.3f-%.3f ({len(ratios)} rounds)" % interval(ratios))
if pooled:
    with open(pooled, "a") as out:
        out.writelines(f"{mode}:{measured} {r:.4f}\n" for r in ratios)
    every = [float(v) for key, v in (line.split() for line in open(pooled) if line.strip()) if key == f"{mode}:{measured}"]
    print(f"{mode}: pooled in {pooled}: %.3f, 95 %% interval %.3f-%.3f ({len(every)} rounds)" % interval(every))
PY
done
