#!/usr/bin/env bash
# A storm of app handshakes with DEVICES devices (3 tokens each; their phones registered: two push
# registrations and a Live Activity start token each, unless WIMZ_BENCH_PHONES=0) in PostgreSQL: on a cold process
# (no token in memory: each read from the store, in batches) and the same storm on the same
# process warm; handshakes/s, p99, failures and database transactions per handshake for each, and
# the cold storm's rate and p99 as a multiple of the warm one's.
# Then RSS per socket of a fresh process holding SOCKETS sockets of devices it had not met
# (their tokens read and held). docs/performance.md ("A million robots") has the figures.
# The relay and the load generator share a network namespace of their own whose ephemeral ports
# are 1024-65535: with the default 32768-60999 one client address holding 16,000 sockets (and
# the last storm's 16,000 in TIME_WAIT) spends its core in connect()'s port search, and that,
# not the relay, set the rate (WIMZ_BENCH_NETNS=0 runs in the machine's own namespace).
#   scripts/bench-storm.sh [DEVICES] [SOCKETS] [ROUNDS]   (default 1,000,000, 16,000 and 3; each round
#                                                         a fresh process: cold, then warm)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

devices=${1:-1000000}
sockets=${2:-16000}
rounds=${3:-3}
ensure_packages
build release --product wimz-relay
build release --product wimz-bench
bin=$(swift build -c release --show-bin-path)
bench_workspace storm 0
cp -r "$(bench_kit wsload)" "$work/wsload"
make -s -C "$work/wsload" >/dev/null
say "provisioning $devices devices ($((3 * devices)) tokens)"
provision_fleet "$devices"
[ "${WIMZ_BENCH_PHONES:-1}" = 0 ] || provision_registrations "$devices"
seq 1 "$sockets" | awk '{print "fleet" $1 ",wimz_r_fleetrobot" $1 ",wimz_a_fleetapp" $1}' > "$work/tokens.csv"
postmaster=$(head -1 "$work/pg/data/postmaster.pid")
for p in $postmaster $(pgrep -P "$postmaster"); do taskset -p -c 1 "$p" >/dev/null; done
ulimit -n "$(ulimit -Hn)"

in_netns=()
if [ "${WIMZ_BENCH_NETNS:-1}" = 1 ]; then
    netns="wimz-storm-$$"
    ip netns add "$netns" || die "could not make a network namespace (root needed; WIMZ_BENCH_NETNS=0 runs without)"
    trap 'bench_cleanup; ip netns delete "$netns"' EXIT
    ip netns exec "$netns" ip link set lo up
    ip netns exec "$netns" sysctl -qw net.ipv4.ip_local_port_range="1024 65535"
    in_netns=(ip netns exec "$netns")
fi

port=$(( 20000 + RANDOM % 20000 ))
start_relay() {
    "${in_netns[@]}" taskset -c 0 "$bin/wimz-relay" serve --listen "127.0.0.1:$port" --log-level warn --spool-dir "$work/spool" \
        --auth-failure-burst 1000000 >> "$work/relay.log" 2>&1 &
    relay_pid=$!
    for _ in $(seq 300); do "${in_netns[@]}" curl -sf -o /dev/null "http://127.0.0.1:$port/readyz" && return 0; sleep 0.1; done
    die "the relay did not become ready"
}
stop_relay() { kill -TERM "$relay_pid"; wait "$relay_pid" 2>/dev/null || true; relay_pid=; }
transactions() { psql "$WIMZ_DATABASE_URL" -qtAc "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()"; }

printf '%-6s %5s %14s %10s %9s %24s\n' storm round handshakes_s p99_ms failed transactions_per_hs
: > "$work/ratios"
for round in $(seq 1 "$rounds"); do
    start_relay  # a fresh process: it holds no token
    for phase in cold warm; do
        # A checkpoint due now (provisioning wrote gigabytes, each storm writes its audit rows)
        # would land in whichever storm runs then: take it before either.
        psql "$WIMZ_DATABASE_URL" -qtAc CHECKPOINT >/dev/null
        sleep 2  # PostgreSQL publishes a backend's counts at most once a second
        before=$(transactions)
        json=$("${in_netns[@]}" taskset -c 1 "$work/wsload/wsload" --mode connect --tokens "$work/tokens.csv" --port "$port" \
            --conns "$sockets" --concurrency 256 --json | tail -1)
        sleep 2
        after=$(transactions)
        echo "$json" | python3 -c '
import json, sys
h = json.load(sys.stdin)["handshake"]
phase, round, spent, sockets = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rate, p99, failed = h["per_s"], h["p99_us"] / 1000, h["failed"]
print(f"{phase:<6} {round:>5} {rate:14.0f} {p99:10.1f} {failed:9d} {spent / sockets:24.3f}")' "$phase" "$round" "$((after - before))" "$sockets" |
            tee "$work/$phase.row"
    done
    stop_relay
    paste "$work/cold.row" "$work/warm.row" | awk '{print $3 / $9, $4 / $10}' >> "$work/ratios"
done
python3 - "$work/ratios" <<'PY'
import statistics, sys
rows = [tuple(map(float, line.split())) for line in open(sys.argv[1]) if line.strip()]
rates, p99s = [r for r, _ in rows], [p for _, p in rows]
print(f"cold/warm over {len(rows)} rounds: {statistics.median(rates):.2f}x the rate (median; {min(rates):.2f} to "
      f"{max(rates):.2f}), p99 {statistics.median(p99s):.2f}x (median)")
PY

start_relay
json=$("${in_netns[@]}" taskset -c 1 "$work/wsload/wsload" --mode hold --tokens "$work/tokens.csv" --port "$port" --conns "$sockets" \
    --duration 5 --server-pid "$relay_pid" --json | tail -1)
echo "$json" | python3 -c '
import json, sys
r = json.load(sys.stdin)
opened, per_socket = r["hold"]["opened"], r["rss_bytes_per_conn"] / 1024
print(f"hold: {opened} sockets of devices this process had not met: {per_socket:.2f} KiB of RSS per socket")'
stop_relay
