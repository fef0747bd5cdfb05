#!/usr/bin/env bash
# The machine's floor for the latency phases: the same wimz-bench load against the minimal
# raw-epoll C relay of ../shared/bench (no auth, no pings, no database), pinned as scripts/bench.sh
# pins wimz-relay. What this relay cannot get under, no relay can on this machine.
#   scripts/bench-floor.sh [path/to/limit-relay.c] [wimz-bench run options]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

source_file=../shared/bench/limit-relay/limit-relay.c
if [ $# -gt 0 ] && [[ $1 == *.c ]]; then source_file=$1; shift; fi
[ -f "$source_file" ] || die "reference relay source not found: $source_file"
command -v gcc >/dev/null || die "building the reference relay needs gcc (apt-get install gcc)"
ensure_packages
build release --product wimz-bench
bin=$(swift build -c release --show-bin-path)

work=$(mktemp -d /tmp/wimz-floor.XXXXXX)
relay_pid=
trap '[ -n "$relay_pid" ] && kill "$relay_pid" 2>/dev/null; rm -rf "$work"' EXIT
gcc -O2 -o "$work/reference-relay" "$source_file"
# It takes any token: the same 2,000 device lines as scripts/bench.sh provisions.
{ echo "device_id,robot_token,app_token"; for i in $(seq 0 1999); do printf 'bench%05d,r%d,a%d\n' "$i" "$i" "$i"; done; } > "$work/tokens.csv"

ulimit -n "$(ulimit -Hn)"
port=$(( 20000 + RANDOM % 20000 ))
taskset -c 0 "$work/reference-relay" "$port" 2>/dev/null &
relay_pid=$!
sleep 0.5
bench_cmd=(taskset -c 1 "$bin/wimz-bench" run --port "$port" --tokens "$work/tokens.csv" --relay-pid "$relay_pid"
           --phases latency,idle,idlelatency "$@")
echo "reference: taskset -c 0 $(basename "$source_file" .c) $port"
echo "load:      ${bench_cmd[*]}"
"${bench_cmd[@]}"
