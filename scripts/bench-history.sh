#!/usr/bin/env bash
# The missed-event history against its memory budget (WIMZ_RECOVERY_MEMORY): a relay with
# WIMZ_BENCH_HISTORY_DEVICES devices (default 9,500: a robot and a recovering app each, 19,000
# sockets — the machine's 20,000 descriptors per process), events flowing for 10 s, its RSS
# before (sockets not yet connected) and after, against /metrics' history bytes. Three runs, a
# fresh relay each: v1 apps (no history: the baseline of the same sockets and traffic), recovering
# apps with the budget (WIMZ_BENCH_HISTORY_BUDGET, default 64 MiB), recovering apps without one
# (8 GiB). Prints the figures docs/performance.md records.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
devices=${WIMZ_BENCH_HISTORY_DEVICES:-9500}
budget=${WIMZ_BENCH_HISTORY_BUDGET:-67108864}

say "building (release)"
build release --product wimz-relay
build release --product wimz-bench
bin=$(swift build -c release --show-bin-path)
bench_workspace bench-history "$devices"
ulimit -n 20000

rss() { awk '/VmRSS/ {print $2}' "/proc/$relay_pid/status"; }
metric() { curl -s "http://127.0.0.1:$port/metrics" | awk -v m="$1" '$1 == m {printf "%d", $2}'; }
for run in "v1 $budget" "recover $budget" "recover 8589934592"; do
    read -r mode limit <<< "$run"
    flags=(--phases fanout --duration 10)
    [ "$mode" = recover ] && flags+=(--recover)
    port=$(( 20000 + RANDOM % 20000 ))
    # Messages kept an hour: the budget, not the age limit, bounds what is held.
    "$bin/wimz-relay" serve --listen "127.0.0.1:$port" --log-level warn --spool-dir "$work/spool" \
        --app-rate-limit 1000000 --app-rate-burst 1000000 --max-apps-per-device 16 \
        --recovery-seconds 3600 --recovery-memory "$limit" >> "$work/relay.log" 2>&1 &
    relay_pid=$!
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.1; done
    before=$(rss)
    "$bin/wimz-bench" run --port "$port" --tokens "$work/tokens.csv" --relay-pid "$relay_pid" --devices "$devices" \
        "${flags[@]}" | grep '^fanout' || true
    sleep 2  # the last queues drain
    after=$(rss)
    held=$(metric wimz_history_bytes)
    evicted=$(metric wimz_history_evictions_total)
    printf '%s apps, budget %d MiB: relay rss %d MiB before, %d MiB after; history %d MiB held (%d devices), %d messages evicted\n' \
        "$mode" $((limit >> 20)) $((before >> 10)) $((after >> 10)) $((held >> 20)) "$devices" "${evicted:-0}"
    kill "$relay_pid"; wait "$relay_pid" 2>/dev/null || true
    relay_pid=
done
