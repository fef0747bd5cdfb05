#!/usr/bin/env bash
# Fuzzes the relay's parsers with libFuzzer (+ AddressSanitizer): the strict request parser,
# the envelope scanner, the JSON writer round trip, configuration parsing and token handling
# (the invariants are Sources/RelayFuzzChecks). Each target runs for SECONDS (default 60) from
# the seed corpus in Tests/Fuzz/corpus/<target>; what breaks an invariant is written to
# Tests/Fuzz/crashers/<target>-crash-<sha1>, where the test suite keeps checking it.
#   scripts/fuzz.sh [SECONDS] [TARGET…]      targets: request envelope json config token robotleg appframe base64
#   WIMZ_FUZZ_RUNS=N scripts/fuzz.sh [TARGET…]   N inputs a target with a fixed seed instead of a time
#                                                (the test suite's run; from a clean clone, the same inputs each time)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
if ! command -v swiftc >/dev/null 2>&1; then export PATH="/opt/swift/usr/bin:$PATH"; fi

if [ -n "${WIMZ_FUZZ_RUNS:-}" ]; then
    budget=(-runs="$WIMZ_FUZZ_RUNS" -seed=1)
else
    budget=(-max_total_time="${1:-60}")
    shift || true
fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(request envelope json config token robotleg appframe base64)

out=.build-fuzz
mkdir -p "$out" Tests/Fuzz/crashers
say "building the fuzzer (swiftc -sanitize=fuzzer,address)"
# WimzProtocol is a module of its own (RelayCore imports it): built first, as a static library.
# RelayCore's sources are found in its feature folders (Hub/, Wire/, …).
flags=(-O -g -sanitize=fuzzer,address -parse-as-library)
mkdir -p "$out/modules"
{ swiftc "${flags[@]}" -module-name WimzProtocol -emit-module -emit-module-path "$out/modules/WimzProtocol.swiftmodule" \
      -emit-library -static -o "$out/libWimzProtocol.a" clients/swift/Sources/WimzProtocol/*.swift \
  && swiftc "${flags[@]}" -module-name RelayFuzz -I "$out/modules" -L "$out" -lWimzProtocol \
      $(find Sources/RelayCore -name '*.swift' | sort) Sources/RelayFuzzChecks/*.swift Tests/Fuzz/Harness.swift \
      -o "$out/relay-fuzz"; } \
    > "$out/build.log" 2>&1 || { grep -E "error" "$out/build.log" >&2; die "fuzzer build failed (see $out/build.log)"; }

status=0
for target in "${targets[@]}"; do
    corpus="$out/corpus/$target"
    mkdir -p "$corpus"
    say "fuzzing $target (${budget[*]})"
    WIMZ_FUZZ_TARGET=$target "$out/relay-fuzz" "${budget[@]}" -max_len=16384 -timeout=10 \
        -print_final_stats=1 -artifact_prefix="Tests/Fuzz/crashers/$target-" "$corpus" "Tests/Fuzz/corpus/$target" \
        > "$out/$target.log" 2>&1 || status=$?
    grep -E "^stat::(number_of_executed_units|peak_rss_mb)|^#[0-9]+ +DONE" "$out/$target.log" | tr '\n' ' '
    echo
    if grep -q "ERROR: libFuzzer\|SUMMARY: AddressSanitizer\|Fatal error" "$out/$target.log"; then
        echo "$target: FOUND A FAILURE (see $out/$target.log and Tests/Fuzz/crashers/)"
    fi
done
exit $status
