#!/usr/bin/env bash
# Builds the libFuzzer target for frame decoding (fuzz/FrameFuzz.swift) and runs it for a bounded time.
#
#   fuzz/run.sh [SECONDS]      default 30
#
# The seed corpus (fuzz/corpus/) is copied to a temporary directory, so a run never modifies
# the repository. The binary, the full libFuzzer log and any crash artifact go to .build/fuzz/.
# Exits non-zero when the target crashes (or the build fails); the last line is a one-line summary.
set -euo pipefail

seconds="${1:-30}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || (( seconds < 1 )); then
    echo "usage: fuzz/run.sh [SECONDS]   (a positive whole number of seconds; default 30)" >&2
    exit 2
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out=.build/fuzz
mkdir -p "$out/artifacts"

# GatewayProtocol is compiled into the fuzz module itself, so its `internal import CSSL` only needs
# the module map under Sources/CSSL. lld avoids a page of gold warnings about ASan symbols.
linker=()
if command -v ld.lld >/dev/null 2>&1 || [[ -x "$(dirname "$(command -v swiftc)")/ld.lld" ]]; then
    linker=(-use-ld=lld)
fi
echo "fuzz: building $out/frame-fuzz" >&2
swiftc -sanitize=fuzzer,address -parse-as-library -module-name FrameFuzz \
    -I Sources/CSSL "${linker[@]}" \
    Sources/GatewayProtocol/*.swift fuzz/FrameFuzz.swift \
    -lssl -lcrypto -o "$out/frame-fuzz"

work="$(mktemp -d "${TMPDIR:-/tmp}/clawvoice-fuzz.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus"
cp fuzz/corpus/* "$work/corpus/"
log="$out/last-run.log"

echo "fuzz: running for $seconds s (log: $log)" >&2
set +e
"$out/frame-fuzz" "$work/corpus" \
    -max_total_time="$seconds" -max_len=65536 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$root/$out/artifacts/" >"$log" 2>&1
status=$?
set -e

if (( status != 0 )); then
    tail -n 60 "$log" >&2
    artifact="$(grep -o "Test unit written to .*" "$log" | tail -n 1 | sed 's/Test unit written to //')"
    echo "fuzz: CRASH (exit $status)${artifact:+; reproduce with $out/frame-fuzz $artifact}"
    exit 1
fi

runs="$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\1/p' "$log" | tail -n 1)"
secs="$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\2/p' "$log" | tail -n 1)"
if [[ -z "$runs" ]]; then
    runs="$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)"
    secs="$seconds"
fi
echo "fuzz: ${runs:-?} runs in ${secs:-?} s, no crash"
