#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ and runs each for a bounded time or number of inputs.
#
#   fuzz/run.sh [SECONDS] [TARGET...]          each target for SECONDS (default 30)
#   fuzz/run.sh --runs N [TARGET...]           each target for N inputs (make fuzz-long: 10^6)
#
# Targets (default: all): frame, setup-code, json5, clip, wake-wav, control.
# Each target's seed corpus (fuzz/corpus/TARGET/) is copied to a temporary directory, so a run
# never modifies the repository. Inputs that once crashed a target live in
# fuzz/regressions/TARGET/ and are replayed before it fuzzes. Binaries, full libFuzzer logs and
# crash artifacts go to .build/fuzz/. Exits non-zero when a target crashes (or a build fails);
# one summary line per target, then a total. Targets run FUZZ_JOBS (default: the core count) at a time.
set -euo pipefail

usage() { echo "usage: fuzz/run.sh [SECONDS | --runs N] [TARGET...]   (targets: frame setup-code json5 clip wake-wav control)" >&2; exit 2; }
seconds=30
runs=""
if [[ "${1:-}" == "--runs" ]]; then
    runs="${2:-}"; shift 2 || usage
    [[ "$runs" =~ ^[0-9]+$ ]] && (( runs >= 1 )) || usage
elif [[ "${1:-}" =~ ^[0-9]+$ ]]; then
    seconds="$1"; shift
    (( seconds >= 1 )) || usage
fi
all=(frame setup-code json5 clip wake-wav control)
targets=("$@")
(( ${#targets[@]} )) || targets=("${all[@]}")
for t in "${targets[@]}"; do [[ " ${all[*]} " == *" $t "* ]] || usage; done

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
out=.build/fuzz
mkdir -p "$out/artifacts"

# lld avoids a page of gold warnings about ASan symbols.
linker=()
if command -v ld.lld >/dev/null 2>&1 || [[ -x "$(dirname "$(command -v swiftc)")/ld.lld" ]]; then
    linker=(-use-ld=lld)
fi
# Each target compiles the library sources it fuzzes into its own module, so it sees the code
# the app runs (internal declarations included) with no change to any public API.
protocol_sources=(Sources/GatewayProtocol/*.swift)
# Audio's files import ClawvoiceCore for the PCM values; its C-free audio part compiles in with
# them, into a module of that name, so those imports name the module itself.
audio_sources=($(find Sources/Audio Sources/ClawvoiceCore/Audio -name '*.swift' | sort))
audio_flags=(-I Sources/CPulse -I Sources/COgg -I Sources/CSndFile -I Sources/COpus -I Sources/COpusEnc -I Sources/COpusFile
             -I Sources/CMpg123 -I Sources/CEspeak -I Sources/CSpeexDSP)
for f in $(pkg-config --cflags-only-I opus libmpg123); do audio_flags+=(-Xcc "$f"); done
audio_libs=(-lpulse -logg -lsndfile -lopus -lopusenc -lopusfile -lmpg123 -lespeak-ng -lspeexdsp)

# Package.swift's Swift settings, so the fuzzed files compile here as they do in the package.
features=(-enable-upcoming-feature ExistentialAny -enable-upcoming-feature MemberImportVisibility
          -enable-upcoming-feature InternalImportsByDefault)

sources_of() {
    case "$1" in
        frame) echo "${protocol_sources[*]} fuzz/FrameFuzz.swift" ;;
        setup-code) echo "${protocol_sources[*]} fuzz/SetupCodeFuzz.swift" ;;
        json5) echo "${protocol_sources[*]} Sources/NodeRuntime/JSON5.swift fuzz/JSON5Fuzz.swift" ;;
        control) echo "${protocol_sources[*]} Sources/NodeRuntime/ControlProtocol.swift fuzz/ControlLineFuzz.swift" ;;
        clip) echo "${audio_sources[*]} fuzz/ClipFuzz.swift" ;;
        wake-wav) echo "${audio_sources[*]} fuzz/WakeWAVFuzz.swift" ;;
    esac
}

build() {
    local t="$1" bin="$out/$1-fuzz"
    local srcs; read -r -a srcs <<<"$(sources_of "$t")"
    # Rebuild only when a source is newer than the binary.
    if [[ -x "$bin" ]] && [[ -z "$(find "${srcs[@]}" fuzz/run.sh -newer "$bin" 2>/dev/null | head -n 1)" ]]; then return 0; fi
    echo "fuzz: building $bin" >&2
    case "$t" in
        clip|wake-wav)
            swiftc -sanitize=fuzzer,address -parse-as-library -module-name ClawvoiceCore -suppress-warnings "${features[@]}" \
                "${audio_flags[@]}" "${linker[@]}" "${srcs[@]}" "${audio_libs[@]}" -o "$bin" ;;
        *)
            # Named GatewayProtocol so that `import GatewayProtocol` in NodeRuntime files compiled
            # in (JSON5, ControlProtocol) refers to this module itself.
            swiftc -sanitize=fuzzer,address -parse-as-library -module-name GatewayProtocol -suppress-warnings "${features[@]}" \
                -I Sources/CSSL "${linker[@]}" "${srcs[@]}" -lssl -lcrypto -o "$bin" ;;
    esac
}

work="$(mktemp -d "${TMPDIR:-/tmp}/clawvoice-fuzz.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# One target: build it, replay its kept regressions, fuzz it. Its summary line goes to
# $work/T.summary, its exit status to $work/T.status, its runs to $work/T.runs.
run_target() {
    local t="$1" bin="$out/$1-fuzz" log="$out/$1-last-run.log"
    if ! build "$t"; then
        echo "fuzz: $t: the build failed" >"$work/$t.summary"; echo 1 >"$work/$t.status"; return
    fi
    # Replay the inputs that crashed this target once.
    if compgen -G "fuzz/regressions/$t/*" >/dev/null; then
        if ! SWIFT_BACKTRACE=enable=no "$bin" fuzz/regressions/"$t"/* >"$out/$t-regressions.log" 2>&1; then
            tail -n 40 "$out/$t-regressions.log" >&2
            echo "fuzz: $t: a kept regression input crashes again (log: $out/$t-regressions.log)" >"$work/$t.summary"
            echo 1 >"$work/$t.status"; return
        fi
    fi
    mkdir -p "$work/$t"
    cp fuzz/corpus/"$t"/* "$work/$t/"
    local limit=(-max_total_time="$seconds") what="for $seconds s"
    if [[ -n "$runs" ]]; then limit=(-runs="$runs"); what="$runs inputs"; fi
    echo "fuzz: $t: running $what (log: $log)" >&2
    local status=0
    # The Swift backtracer trips AddressSanitizer after a fatalError; the libFuzzer report is enough.
    SWIFT_BACKTRACE=enable=no "$bin" "$work/$t" "${limit[@]}" -max_len=65536 -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
        -artifact_prefix="$root/$out/artifacts/$t-" >"$log" 2>&1 || status=$?
    if (( status != 0 )); then
        tail -n 60 "$log" >&2
        local artifact
        artifact="$(grep -o "Test unit written to .*" "$log" | tail -n 1 | sed 's/Test unit written to //')"
        echo "fuzz: $t: CRASH (exit $status)${artifact:+; reproduce with $bin $artifact}" >"$work/$t.summary"
        echo 1 >"$work/$t.status"; return
    fi
    local n secs cov
    n="$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)"
    secs="$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\2/p' "$log" | tail -n 1)"
    cov="$(grep -oE 'cov: [0-9]+' "$log" | tail -n 1 | grep -oE '[0-9]+')"
    echo "fuzz: $t: ${n:-?} runs in ${secs:-$seconds} s, coverage ${cov:-?} edges, no crash" >"$work/$t.summary"
    echo "${n:-0}" >"$work/$t.runs"
    echo 0 >"$work/$t.status"
}

# Targets run FUZZ_JOBS at a time (default: one per core); each fuzzer is one process on one core.
jobs="${FUZZ_JOBS:-$(nproc)}"
for t in "${targets[@]}"; do
    while (( $(jobs -rp | wc -l) >= jobs )); do wait -n || true; done
    run_target "$t" &
done
wait
failed=0
total_runs=0
for t in "${targets[@]}"; do
    cat "$work/$t.summary" 2>/dev/null || echo "fuzz: $t: no result"
    [[ "$(cat "$work/$t.status" 2>/dev/null)" == 0 ]] || failed=1
    total_runs=$(( total_runs + $(cat "$work/$t.runs" 2>/dev/null || echo 0) ))
done
if (( failed )); then
    echo "fuzz: FAILED"
    exit 1
fi
echo "fuzz: ${#targets[@]} targets, $total_runs runs, no crash"
