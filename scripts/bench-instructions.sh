#!/usr/bin/env bash
# Instructions the relay spends handling sockets (everything under lws_service_fd_tsi: every
# socket event, our callbacks included) for one fixed workload, counted by valgrind's callgrind:
# exact and repeatable where msgs/s on a shared VM move by ±15 %. Compares builds:
#   scripts/bench-instructions.sh [OTHER_WIMZ_RELAY ...]
# runs this tree's release relay and each other binary given, alternating, twice each:
# 20 devices provisioned, 10 of them (robot + app) at 1,000 events/s for 10 s.
#   scripts/bench-instructions.sh lws-relay:-b     # against the C reference relay
#     an argument lws-relay[:FLAGS] is ../shared/bench/lws-relay (built here by its Makefile, in
#     the scratch folder) run with FLAGS (-b: batched writes); it ignores tokens and has no
#     /readyz, so it is waited for by any HTTP answer
#   WIMZ_INSTRUCTIONS_PHASE=command scripts/bench-instructions.sh …   # the app → robot path
#     instead: 1,000 commands/s from the apps, each answered by its robot, for 10 s
#   WIMZ_INSTRUCTIONS_PHASE=saturated scripts/bench-instructions.sh lws-relay:-b   # saturated
#     fan-out instead: ../shared/bench/wsload, 100 devices × 1 app, 200-byte events, window 64,
#     10 s; prints instructions per message received (the figure behind a throughput ratio)
#   WIMZ_INSTRUCTIONS_PHASE=handshakes scripts/bench-instructions.sh lws-relay   # handshakes
#     instead: wsload --mode connect, 2,000 app sockets (64 in flight), then all closed; prints
#     instructions per connection (its handshake and its close); WIMZ_INSTRUCTIONS_WARM=1: the
#     same clients once before, unmeasured (their tokens and devices held: warm handshakes)
#   WIMZ_INSTRUCTIONS_PHASE=robothttp scripts/bench-instructions.sh OTHER_WIMZ_RELAY   # HTTP to
#     the robot instead: wrk, 8 connections for 10 s, GET /api/devices/ID/robot/ping answered by
#     wimz-bench robot-leg at once; prints instructions per request (its TCP handshake included)
#   WIMZ_INSTRUCTIONS_EVENT=bark_detected …   # the latency phase's events named so, several
#     comma-separated taken in turn (default mission_progress, a run's progress, "watching": the
#     timeline does not keep it; bark_detected is kept: each event also a timeline entry, written
#     on the database worker, outside what is counted)
#   WIMZ_INSTRUCTIONS_ROUNDS=1 …   # rounds (default 2)
#   WIMZ_CALLGRIND_EXTRA=--dump-instr=yes …   # more callgrind options (per-instruction counts)
#   WIMZ_INSTRUCTIONS_KEEP=/tmp/cg scripts/bench-instructions.sh …   # keeps relay K's callgrind
#     output as /tmp/cg.K (callgrind_annotate reads it)
#   WIMZ_INSTRUCTIONS_PUSH=1000 scripts/bench-instructions.sh   # this relay (APNs key configured)
#     alternately without and with 1,000 push registrations (50 per device, phones never
#     connected) on the devices under load: what registrations cost the forwarding path
#   WIMZ_INSTRUCTIONS_LIVE=1 scripts/bench-instructions.sh   # this relay (APNs key configured)
#     alternately without and with a Live Activity on every app token of the devices under load:
#     what following their mission runs costs the forwarding path (the workload's events are
#     mission_progress; the apps are connected, so nothing is sent)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

ensure_packages
if ! command -v valgrind >/dev/null; then say "installing valgrind"; as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q valgrind >&2; fi
say "building (release)"
build release --product wimz-relay
build release --product wimz-bench
bin=$(swift build -c release --show-bin-path)

phase=${WIMZ_INSTRUCTIONS_PHASE:-latency}
devices=20
[ "$phase" = saturated ] && devices=100
[ "$phase" = handshakes ] && devices=2000
bench_workspace instructions "$devices"
if [ "$phase" = saturated ] || [ "$phase" = handshakes ]; then
    cp -r "$(bench_kit wsload)" "$work/wsload"
    make -s -C "$work/wsload" >/dev/null
fi

# valgrind 3.19 cannot read the newest DWARF forms: count on copies without debug info.
relays=("$bin/wimz-relay" "$@")
reference=$(cd .. && pwd)/shared/bench/lws-relay
for relay in "${relays[@]}"; do
    [[ $relay == lws-relay* ]] || continue
    cp -r "$reference" "$work/lws-relay-src"
    make -s -C "$work/lws-relay-src" >/dev/null
    break
done
push_args=()
if [ -n "${WIMZ_INSTRUCTIONS_PUSH:-}${WIMZ_INSTRUCTIONS_LIVE:-}" ]; then
    relays=("$bin/wimz-relay" "$bin/wimz-relay")
    openssl ecparam -name prime256v1 -genkey -noout 2>/dev/null | openssl pkcs8 -topk8 -nocrypt -out "$work/apns.p8"
    push_args=(--apns-key-file "$work/apns.p8" --apns-key-id BENCHKEY01 --apns-team-id BENCHTEAM1 --apns-topic bench
               --apns-url https://127.0.0.1:9 --apns-sandbox-url https://127.0.0.1:9)
fi
# registrations K: none for the first relay of a pair, WIMZ_INSTRUCTIONS_PUSH (or a Live Activity
# per app token, WIMZ_INSTRUCTIONS_LIVE) for the second.
registrations() {
    if [ -n "${WIMZ_INSTRUCTIONS_LIVE:-}" ]; then
        psql -q "$url" -c "DELETE FROM live_activities" >/dev/null
        [ "$1" -eq 1 ] || return 0
        psql -q "$url" -c "INSERT INTO live_activities (device_id, app_token_id, activity_id, token, environment)
            SELECT t.device_id, t.id, 'bench', md5(t.id::text) || md5(t.device_id), 'production'
            FROM tokens t WHERE t.role = 'app'" >/dev/null
        return 0
    fi
    [ -n "${WIMZ_INSTRUCTIONS_PUSH:-}" ] || return 0
    psql -q "$url" -c "DELETE FROM push_registrations" >/dev/null
    [ "$1" -eq 1 ] || return 0
    local per=$(( (WIMZ_INSTRUCTIONS_PUSH + 19) / 20 ))
    psql -q "$url" -c "INSERT INTO push_registrations (device_id, token, environment, app_token_id, events)
        SELECT t.device_id, md5(t.id::text || '-' || g) || md5(g::text), 'production', t.id,
               '{bark_detected,dog_detected,treat_dispensed,mission_completed,robot_offline}'
        FROM tokens t, generate_series(1, $per) g WHERE t.role = 'app'" >/dev/null
}
for k in "${!relays[@]}"; do
    source_binary=${relays[$k]}
    [[ $source_binary == lws-relay* ]] && source_binary="$work/lws-relay-src/lws-relay"
    objcopy --strip-debug "$source_binary" "$work/relay$k"
done
# The command line of relay K on PORT.
relay_command() {
    local k=$1 port=$2
    if [[ ${relays[$k]} == lws-relay* ]]; then
        local flags=${relays[$k]#lws-relay}
        flags=${flags#:}
        # shellcheck disable=SC2086
        echo "$work/relay$k" "$port" $flags
    else
        echo "$work/relay$k" serve --listen "127.0.0.1:$port" --log-level warn --spool-dir "$work/spool$k" \
            --app-rate-limit 1000000 --app-rate-burst 1000000 --robot-http-rate 1000000 --robot-http-burst 1000000 \
            --robot-http-max-pending 10000 "${push_args[@]}"
    fi
}
for round in $(seq "${WIMZ_INSTRUCTIONS_ROUNDS:-2}"); do
    for k in "${!relays[@]}"; do
        registrations "$k"
        port=$(( 20000 + RANDOM % 20000 ))
        # shellcheck disable=SC2046
        valgrind --tool=callgrind --toggle-collect=lws_service_fd_tsi ${WIMZ_CALLGRIND_EXTRA:-} --callgrind-out-file="$work/cg" \
            $(relay_command "$k" "$port") > "$work/relay.log" 2>&1 &
        pid=$!
        probe=(curl -sf -o /dev/null "http://127.0.0.1:$port/readyz")
        [[ ${relays[$k]} == lws-relay* ]] && probe=(curl -s -o /dev/null "http://127.0.0.1:$port/")
        for _ in $(seq 300); do "${probe[@]}" && break; sleep 0.2; done
        # Count the workload only: not the start, nor the readiness probes (each a connection
        # that lws closes, which costs it a scan of its descriptor table).
        callgrind_control -z "$pid" >/dev/null
        if [ "$phase" = robothttp ]; then
            "$bin/wimz-bench" robot-leg --port "$port" --tokens "$work/tokens.csv" --devices 1 > "$work/leg.log" 2>&1 &
            leg=$!
            device=$(sed -n 2p "$work/tokens.csv" | cut -d, -f1); token=$(sed -n 2p "$work/tokens.csv" | cut -d, -f3)
            ping=(-H "Authorization: Bearer $token" "http://127.0.0.1:$port/api/devices/$device/robot/ping")
            for _ in $(seq 300); do [ "$(curl -s -o /dev/null -w '%{http_code}' "${ping[@]}")" = 200 ] && break; sleep 0.2; done
            callgrind_control -z "$pid" >/dev/null
            served=$(wrk -t1 -c8 -d10s "${ping[@]}" | awk '/requests in/ {n=$1} /Non-2xx/ {bad=$NF} END {print (bad ? "non-2xx " bad : n)}')
            kill "$leg"; wait "$leg" 2>/dev/null || true
            delivered="n=$served"
        elif [ "$phase" = saturated ]; then
            received=$("$work/wsload/wsload" --mode fanout --tokens "$work/tokens.csv" --port "$port" --devices 100 --apps 1 \
                       --window 64 --duration 10 --setup-timeout 60 --json | tail -1 | python3 -c 'import json, sys; print(json.load(sys.stdin)["received"])')
            delivered="n=$received"
        elif [ "$phase" = handshakes ]; then
            if [ -n "${WIMZ_INSTRUCTIONS_WARM:-}" ]; then
                "$work/wsload/wsload" --mode connect --tokens "$work/tokens.csv" --port "$port" --conns 2000 --concurrency 64 \
                    --duration 120 --setup-timeout 120 --json >/dev/null
                # Every socket of that pass closed (slow under valgrind) before counting starts.
                for _ in $(seq 600); do
                    curl -s "http://127.0.0.1:$port/metrics" | grep -q '^wimz_sockets{role="app"} 0$' && break
                    sleep 0.2
                done
                callgrind_control -z "$pid" >/dev/null
            fi
            opened=$("$work/wsload/wsload" --mode connect --tokens "$work/tokens.csv" --port "$port" --conns 2000 --concurrency 64 \
                     --duration 120 --setup-timeout 120 --json | tail -1 | python3 -c 'import json, sys; print(json.load(sys.stdin)["handshake"]["ok"])')
            delivered="n=$opened"
        else
            delivered=$("$bin/wimz-bench" run --port "$port" --tokens "$work/tokens.csv" --devices 10 --phases "$phase" \
                        --event "${WIMZ_INSTRUCTIONS_EVENT:-mission_progress}" \
                        --rate 1000 --command-rate 1000 --duration 10 | awk '/^(rate|command rate)/ {print $0}')
        fi
        kill -TERM "$pid"; wait "$pid" || true
        total=$(awk '/^summary:/ {print $2}' "$work/cg")
        [ "$phase" = saturated ] && delivered="$delivered, $(( total / ${delivered#n=} )) per message"
        [ "$phase" = handshakes ] && delivered="$delivered, $(( total / ${delivered#n=} )) per connection"
        [ "$phase" = robothttp ] && delivered="$delivered, $(( total / ${delivered#n=} )) per request"
        [ -n "${WIMZ_INSTRUCTIONS_KEEP:-}" ] && cp "$work/cg" "${WIMZ_INSTRUCTIONS_KEEP}.$k"
        label=${relays[$k]}
        [ -n "${WIMZ_INSTRUCTIONS_PUSH:-}" ] && label="$([ "$k" -eq 1 ] && echo "with $WIMZ_INSTRUCTIONS_PUSH" || echo without) registrations"
        [ -n "${WIMZ_INSTRUCTIONS_LIVE:-}" ] && label="$([ "$k" -eq 1 ] && echo with || echo without) Live Activities"
        printf '%s  %s instructions  (%s)\n' "$label" "$total" "$(echo "$delivered" | grep -oE 'n=[0-9]*(, [0-9]+ per (message|connection|request))?')"
    done
done
