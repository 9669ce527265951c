#!/usr/bin/env bash
# swift-test.sh: runs the Swift test suites for `make test`, in two rounds.
#
#   tests/swift-test.sh [--fuzz SECONDS] [swift test flags...]
#
# Round 1 runs every test side by side, at most TEST_WIDTH (default 4) at a time: most of the
# suite waits on real time (audio playing through null sinks, daemons starting, sockets), not on
# the CPU, and each talk test case has a PulseAudio of its own (TalkAudio's trait), so they do
# not share a microphone. Round 2 runs the suites whose assertions are real-time figures that a
# busy CPU would turn into noise (echo cancellation converging, a speaker silenced within 50 ms, a
# clip's length heard at the speaker, playback lag, the uplink's speech length within 60 ms of what
# was played, realtime calls' media heard through aiortc peers: beside round 1 at load 9 a peer
# heard 120 ms of an 800 ms utterance), on a quiet machine: in two lanes, one test at a time in
# each, so each has a core of this 2-core machine; each lane has a PulseAudio of its own. The lanes
# are split so that their longest suites (the wake-over-reply tries, 60 s, and the echo on a real
# PulseAudio, 48 s) run side by side.
# --fuzz SECONDS runs fuzz/run.sh (each target for SECONDS) beside round 1, one target at a time
# and niced: round 1 leaves most of a core idle, and round 2 must not share the machine with it.
# Both rounds go to .build/swift-test.log; the last line is the summary `make test` prints.
set -uo pipefail
cd "$(dirname "$0")/.."

fuzz_seconds=""
if [[ "${1:-}" == "--fuzz" ]]; then fuzz_seconds="${2:?--fuzz needs SECONDS}"; shift 2; fi

# Test ids look like TalkTests.TalkAudio/SpeechOutputTests/`a stop silences …`(); '.' stands for the backtick.
laneA='WakeOverReplyTests|StopWordTests/..stop. said over|WebRTCLoopbackTests/mediaFlowsBothWays|CallEndToEndTests|CallDaemonTests'\
'|SpeechOutputTests/.every gateway clip format'
laneB='EchoCancelTests|EchoRoomTests|SessionSwitchTests/.a session switch silences|SessionSwitchTests/.talking over the reply'\
'|SpeechOutputTests/.a stop silences|PulseAudioTests/Playback'\
'|PTTEndToEndTests/.once captures the spoken words|PTTEndToEndTests/.the uplink speaks the encoding'
quiet="$laneA|$laneB"
width="${TEST_WIDTH:-4}"
log=.build/swift-test.log
: >"$log"

# The audio module's tests use this server (their own restart tests kill it); per run, never a fixed path.
export CLAWVOICE_PULSE_DIR="$(mktemp -d /tmp/cv-pulse.XXXXXX)"
eval "$(bash tests/audio/pulse-server.sh start)" || { echo "swift-test: the private PulseAudio did not start" >&2; exit 1; }
fuzz_pid=""
lane_dirs=()
cleanup() {
    [[ -n "$fuzz_pid" ]] && kill "$fuzz_pid" 2>/dev/null
    bash tests/audio/pulse-server.sh stop >/dev/null 2>&1
    rm -rf "$CLAWVOICE_PULSE_DIR"
    for d in "${lane_dirs[@]}"; do    # round 2's servers, if it was interrupted
        CLAWVOICE_PULSE_DIR="$d" bash tests/audio/pulse-server.sh stop >/dev/null 2>&1
        rm -rf "$d"
    done
}
trap cleanup EXIT
echo "swift-test: private PulseAudio at $PULSE_SERVER"

if [[ -n "$fuzz_seconds" ]]; then
    mkdir -p .build/fuzz
    FUZZ_JOBS=1 nice -n 10 bash fuzz/run.sh "$fuzz_seconds" >.build/fuzz/make-test.log 2>&1 &
    fuzz_pid=$!
    echo "swift-test: fuzzing beside round 1 (log: .build/fuzz/make-test.log)"
fi

started=$SECONDS
echo "swift-test: round 1, up to $width tests at a time (all but round 2's)"
SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="$width" \
    swift test --skip-build --parallel --skip "$quiet" "$@" 2>&1 | tee -a "$log"
first=${PIPESTATUS[0]}
round1=$((SECONDS - started))

fuzzed=0
if [[ -n "$fuzz_pid" ]]; then
    wait "$fuzz_pid" || fuzzed=$?
    fuzz_pid=""
    grep -E '^fuzz: [a-z0-9-]+: [0-9?]+ runs|CRASH|FAILED|no result|kept regression|build failed|^fuzz: [0-9]+ targets' .build/fuzz/make-test.log
    if (( fuzzed != 0 )); then tail -n 60 .build/fuzz/make-test.log; fi
    round1=$((SECONDS - started))
fi

# One lane of round 2: its own PulseAudio, one test at a time, its output kept apart and added to
# the log when both lanes are done (interleaved lines would not say which test they belong to).
# --ignore-lock: SwiftPM locks .build for every command, so a second `swift test` would wait for
# the first; with --skip-build neither lane writes to .build.
lane() {
    local name=$1 dir=$2 filter=$3; shift 3
    (
        export CLAWVOICE_PULSE_DIR="$dir"
        eval "$(bash tests/audio/pulse-server.sh start)" || { echo "swift-test: lane $name: its PulseAudio did not start"; exit 1; }
        swift test --skip-build --ignore-lock --no-parallel --filter "$filter" "$@" 2>&1
        status=$?
        bash tests/audio/pulse-server.sh stop >/dev/null 2>&1
        exit $status
    ) >".build/swift-test-lane-$name.log"
    local status=$?
    echo "swift-test: lane $name ended at $((SECONDS - started - round1)) s into round 2 (exit $status)"
    return $status
}

echo "swift-test: round 2, two lanes, one test at a time in each:"
echo "  lane A: ${laneA//|/, }"
echo "  lane B: ${laneB//|/, }"
lane_dirs=("$(mktemp -d /tmp/cv-pulse.XXXXXX)" "$(mktemp -d /tmp/cv-pulse.XXXXXX)")
lane A "${lane_dirs[0]}" "$laneA" "$@" & pidA=$!
lane B "${lane_dirs[1]}" "$laneB" "$@" & pidB=$!
wait $pidA; secondA=$?
wait $pidB; secondB=$?
for l in A B; do
    echo "swift-test: lane $l:" | tee -a "$log"
    tee -a "$log" <".build/swift-test-lane-$l.log"
done
second=$(( secondA != 0 ? secondA : secondB ))
round2=$((SECONDS - started - round1))

passed=$(grep -oE 'Test run with [0-9]+ tests' "$log" | awk '{ n += $4 } END { print n + 0 }')
echo "swift-test: rounds took ${round1} s and ${round2} s"
if [[ $first -eq 0 && $second -eq 0 && $fuzzed -eq 0 ]]; then
    echo "swift-test: ${passed:-0} passed, 0 failed"
else
    echo "swift-test: FAILED (round 1 exit $first, round 2 exits $secondA and $secondB, fuzzing exit $fuzzed); the failing tests:"
    grep -E '^✘ Test .* failed' "$log" | sed 's/^/  /'
    exit 1
fi
