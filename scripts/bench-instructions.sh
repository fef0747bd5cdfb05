#!/usr/bin/env bash
# Instructions the relay spends handling sockets (everything under lws_service_fd_tsi: every
# socket event, our callbacks included) for one fixed workload, counted by valgrind's callgrind:
# exact and repeatable where msgs/s on a shared VM move by ±15 %. Compares builds:
#   scripts/bench-instructions.sh [OTHER_WIMZ_RELAY ...]
# runs this tree's release relay and each other binary given, alternating, twice each:
# 20 devices provisioned, 10 of them (robot + app) at 1,000 events/s for 10 s.
#   WIMZ_INSTRUCTIONS_PHASE=command scripts/bench-instructions.sh …   # the app → robot path
#     instead: 1,000 commands/s from the apps, each answered by its robot, for 10 s
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

ensure_packages
if ! command -v valgrind >/dev/null; then say "installing valgrind"; as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q valgrind >&2; fi
say "building (release)"
build release --product wimz-relay
build release --product wimz-bench
bin=$(swift build -c release --show-bin-path)

work=$(mktemp -d /tmp/wimz-instructions.XXXXXX)
chmod 755 "$work"
cleanup() { pg_stop "$work/pg" immediate; rm -rf "$work"; }
trap cleanup EXIT
url=$(pg_start "$work/pg")
export WIMZ_DATABASE_URL="$url" WIMZ_MIGRATIONS_DIR="$PWD/migrations"
"$bin/wimz-relay" migrate >/dev/null
"$bin/wimz-bench" provision --database-url "$url" --devices 20 --out "$work/tokens.csv" >/dev/null

# valgrind 3.19 cannot read the newest DWARF forms: count on copies without debug info.
relays=("$bin/wimz-relay" "$@")
for k in "${!relays[@]}"; do objcopy --strip-debug "${relays[$k]}" "$work/relay$k"; done
for round in 1 2; do
    for k in "${!relays[@]}"; do
        port=$(( 20000 + RANDOM % 20000 ))
        valgrind --tool=callgrind --toggle-collect=lws_service_fd_tsi --callgrind-out-file="$work/cg" \
            "$work/relay$k" serve --listen "127.0.0.1:$port" --log-level warn --spool-dir "$work/spool$k" \
            --app-rate-limit 1000000 --app-rate-burst 1000000 > "$work/relay.log" 2>&1 &
        pid=$!
        for _ in $(seq 300); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.2; done
        phase=${WIMZ_INSTRUCTIONS_PHASE:-latency}
        delivered=$("$bin/wimz-bench" run --port "$port" --tokens "$work/tokens.csv" --devices 10 --phases "$phase" \
                    --rate 1000 --command-rate 1000 --duration 10 | awk '/^(rate|command rate)/ {print $0}')
        kill -TERM "$pid"; wait "$pid" || true
        total=$(awk '/^summary:/ {print $2}' "$work/cg")
        printf '%s  %s instructions  (%s)\n' "${relays[$k]}" "$total" "$(echo "$delivered" | grep -o 'n=[0-9]*')"
    done
done
