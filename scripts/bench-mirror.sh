#!/usr/bin/env bash
# What the token mirror (every active token's digest and record, held by every node so that a
# handshake never waits for the database) costs in memory: the relay's RSS once ready on an empty
# database, then again with DEVICES devices provisioned (a robot and an app token each), idle,
# no sockets. Prints the difference per token.
#   scripts/bench-mirror.sh [DEVICES]      (default 50,000: 100,000 tokens)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

devices=${1:-50000}
ensure_packages
build release --product wimz-relay
build release --product wimz-bench
bin=$(swift build -c release --show-bin-path)
bench_workspace mirror 0

# ready_rss: starts the relay, waits for /readyz (the mirror is loaded), prints its RSS in KiB.
ready_rss() {
    local port=$(( 20000 + RANDOM % 20000 )) rss
    "$bin/wimz-relay" serve --listen "127.0.0.1:$port" --log-level warn --spool-dir "$work/spool" >> "$work/relay.log" 2>&1 &
    relay_pid=$!
    for _ in $(seq 600); do curl -sf -o /dev/null "http://127.0.0.1:$port/readyz" && break; sleep 0.1; done
    curl -sf -o /dev/null "http://127.0.0.1:$port/readyz" || die "the relay did not become ready"
    sleep 2
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$relay_pid/status")
    kill -TERM "$relay_pid"; wait "$relay_pid" 2>/dev/null || true
    relay_pid=
    echo "$rss"
}

empty=$(ready_rss)
say "provisioning $devices devices ($((2 * devices)) tokens)"
"$bin/wimz-bench" provision --database-url "$url" --devices "$devices" --out "$work/tokens.csv" >/dev/null
tokens=$(psql "$url" -qtAc "SELECT count(*) FROM tokens WHERE revoked_at IS NULL")
full=$(ready_rss)
echo "relay RSS when ready: ${empty} KiB with no tokens, ${full} KiB with ${tokens} tokens"
awk -v e="$empty" -v f="$full" -v n="$tokens" 'BEGIN {printf "token mirror: %.0f bytes per token (RSS difference / tokens)\n", (f - e) * 1024 / n}'
