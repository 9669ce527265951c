#!/usr/bin/env bash
# swift-test.sh: runs the Swift test suites for `make test`, in two rounds.
#
#   tests/swift-test.sh [--fuzz SECONDS] [--beside-round-1 COMMAND] [--with-round-1 COMMAND]
#                       [--round-2] [swift test flags...]
#
# Round 1 runs every test side by side, at most TEST_WIDTH (default 4) at a time: most of the
# suite waits on real time (audio playing through null sinks, daemons starting, sockets), not on
# the CPU, and each talk test case has a PulseAudio of its own (TalkAudio's trait), so they do
# not share a microphone. Round 2 runs the suites whose assertions are real-time figures that a
# busy CPU would turn into noise (echo cancellation converging, a speaker silenced within 50 ms, a
# clip's length heard at the speaker, playback lag, the uplink's speech length within 60 ms of what
# was played, realtime calls' media heard through aiortc peers: beside round 1 at load 9 a peer
# heard 120 ms of an 800 ms utterance), away from round 1: in three lanes, one test at a time in
# each, each lane with a PulseAudio of its own. Those tests mostly wait on audio playing in real
# time (`time bash tests/swift-test.sh --round-2`: 39-42 s of CPU in 85-94 s), so the lanes are balanced by
# length (75-85 s each) with the longest suites (the wake-over-reply tries, 60 s, and the echo on a
# real PulseAudio, 48 s) in different lanes.
# --fuzz SECONDS runs fuzz/run.sh (each target for SECONDS) beside round 1, one target at a time
# and niced: round 1 leaves most of a core idle once its first minute is over.
# --beside-round-1 COMMAND runs COMMAND after the fuzz targets, niced the same, still beside round 1
# (make test: the core's build and tests without C, ~45 s of compiling, most of it in round 1's
# quiet last half minute); its output goes to .build/beside-round-1.log and its failure fails the
# run. Round 2 waits for both: a compile even at nice 19 beside round 2 disturbed the echo room's
# real-time recording (its barge-in and wake counts failed).
# --with-round-1 COMMAND runs COMMAND, not niced, beside round 1 from its start (make test: the
# Python peer's checks, ~14 s that mostly wait on sockets); output in .build/with-round-1.log,
# its failure fails the run.
# --round-2 runs round 2 alone (after a change to one of its tests).
# Both rounds go to .build/swift-test.log; the last line is the summary `make test` prints.
set -uo pipefail
cd "$(dirname "$0")/.."

fuzz_seconds="" beside="" with1="" only2=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --fuzz) fuzz_seconds="${2:?--fuzz needs SECONDS}"; shift 2 ;;
        --beside-round-1) beside="${2:?--beside-round-1 needs a COMMAND}"; shift 2 ;;
        --with-round-1) with1="${2:?--with-round-1 needs a COMMAND}"; shift 2 ;;
        --round-2) only2=1; shift ;;
        *) break ;;
    esac
done

# Test ids look like TalkTests.TalkAudio/SpeechOutputTests/`a stop silences …`(); '.' stands for the backtick.
# Round 2's lanes, balanced by their lengths on this 2-core machine (75-85 s each when balanced;
# lane B has since taken Listen's stop test, a few seconds).
lanes=(
    'WakeOverReplyTests|StopWordTests/..stop. said over|PTTEndToEndTests/.once captures the spoken words'\
'|PTTEndToEndTests/.the uplink speaks the encoding'
    'EchoRoomTests|SpeechOutputTests/.every gateway clip format|SessionSwitchTests/.a session switch silences'\
'|Listen/.a message is spoken through tts.speak and asking again stops it'
    'WebRTCLoopbackTests/mediaFlowsBothWays|CallEndToEndTests|CallDaemonTests|EchoCancelTests|PulseAudioTests/Playback'\
'|SpeechOutputTests/.a stop silences|SessionSwitchTests/.talking over the reply'
)
names=(A B C)
quiet=$(IFS='|'; echo "${lanes[*]}")
width="${TEST_WIDTH:-4}"
log=.build/swift-test.log
: >"$log"

# The audio module's tests use this server (their own restart tests kill it); per run, never a fixed path.
export CLAWVOICE_PULSE_DIR="$(mktemp -d /tmp/cv-pulse.XXXXXX)"
eval "$(bash tests/audio/pulse-server.sh start)" || { echo "swift-test: the private PulseAudio did not start" >&2; exit 1; }
companion_pid="" with_pid=""
lane_dirs=()
cleanup() {
    [[ -n "$companion_pid" ]] && kill -- -"$companion_pid" 2>/dev/null
    [[ -n "$with_pid" ]] && kill -- -"$with_pid" 2>/dev/null
    bash tests/audio/pulse-server.sh stop >/dev/null 2>&1
    rm -rf "$CLAWVOICE_PULSE_DIR"
    for d in "${lane_dirs[@]}"; do    # round 2's servers, if it was interrupted
        CLAWVOICE_PULSE_DIR="$d" bash tests/audio/pulse-server.sh stop >/dev/null 2>&1
        rm -rf "$d"
    done
}
trap cleanup EXIT
echo "swift-test: private PulseAudio at $PULSE_SERVER"

# Round 1's companion: the fuzz targets, then the --beside-round-1 command, one after the other,
# niced, in a process group of its own (so an interrupted run stops all of it); it leaves each
# one's exit status in .build/companion.status.
companion() {
    renice -n 10 -p "$BASHPID" >/dev/null
    local fz=0 bs=0
    if [[ -n "$fuzz_seconds" ]]; then
        FUZZ_JOBS=1 bash fuzz/run.sh "$fuzz_seconds" >.build/fuzz/make-test.log 2>&1 || fz=$?
    fi
    if [[ -n "$beside" ]]; then
        bash -c "$beside" >.build/beside-round-1.log 2>&1 || bs=$?
    fi
    echo "$fz $bs" >.build/companion.status
}
if [[ -z "$only2" && ( -n "$fuzz_seconds" || -n "$beside" ) ]]; then
    mkdir -p .build/fuzz
    rm -f .build/companion.status
    set -m; companion & companion_pid=$!; set +m
    [[ -n "$fuzz_seconds" ]] && echo "swift-test: fuzzing beside round 1 (log: .build/fuzz/make-test.log)"
    [[ -n "$beside" ]] && echo "swift-test: then beside round 1: $beside (log: .build/beside-round-1.log)"
fi

with1ed=0
if [[ -z "$only2" && -n "$with1" ]]; then
    set -m; bash -c "$with1" >.build/with-round-1.log 2>&1 & with_pid=$!; set +m
    echo "swift-test: with round 1: $with1 (log: .build/with-round-1.log)"
fi

started=$SECONDS
first=0
if [[ -z "$only2" ]]; then
    echo "swift-test: round 1, up to $width tests at a time (all but round 2's)"
    SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="$width" \
        swift test --skip-build --parallel --skip "$quiet" "$@" 2>&1 | tee -a "$log"
    first=${PIPESTATUS[0]}
fi
round1=$((SECONDS - started))
if [[ -n "$with_pid" ]]; then
    wait "$with_pid" || with1ed=$?
    with_pid=""
    echo "swift-test: with round 1 (exit $with1ed): $(tail -n 1 .build/with-round-1.log)"
    if (( with1ed != 0 )); then tail -n 40 .build/with-round-1.log; fi
fi

fuzzed=0 besided=0
if [[ -n "$companion_pid" ]]; then
    wait "$companion_pid"
    companion_pid=""
    read -r fuzzed besided <.build/companion.status 2>/dev/null || { fuzzed=1; besided=1; }
    if [[ -n "$fuzz_seconds" ]]; then
        grep -E '^fuzz: [a-z0-9-]+: [0-9?]+ runs|CRASH|FAILED|no result|kept regression|build failed|^fuzz: [0-9]+ targets' .build/fuzz/make-test.log
        if (( fuzzed != 0 )); then tail -n 60 .build/fuzz/make-test.log; fi
    fi
    if [[ -n "$beside" ]]; then
        echo "swift-test: beside round 1 (exit $besided): $(tail -n 1 .build/beside-round-1.log)"
        if (( besided != 0 )); then tail -n 40 .build/beside-round-1.log; fi
    fi
    round1=$((SECONDS - started))
fi

# One lane of round 2: its own PulseAudio, one test at a time, its output kept apart and added to
# the log when all lanes are done (interleaved lines would not say which test they belong to).
# --ignore-lock: SwiftPM locks .build for every command, so a second `swift test` would wait for
# the first; with --skip-build no lane writes to .build.
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

echo "swift-test: round 2, ${#lanes[@]} lanes, one test at a time in each:"
for i in "${!lanes[@]}"; do echo "  lane ${names[$i]}: ${lanes[$i]//|/, }"; done
pids=()
for i in "${!lanes[@]}"; do
    lane_dirs+=("$(mktemp -d /tmp/cv-pulse.XXXXXX)")
done
for i in "${!lanes[@]}"; do
    lane "${names[$i]}" "${lane_dirs[$i]}" "${lanes[$i]}" "$@" & pids+=($!)
done
second=0 exits=()
for i in "${!pids[@]}"; do
    wait "${pids[$i]}"; status=$?
    exits+=("$status")
    (( status != 0 && second == 0 )) && second=$status
done
for i in "${!lanes[@]}"; do
    echo "swift-test: lane ${names[$i]}:" | tee -a "$log"
    tee -a "$log" <".build/swift-test-lane-${names[$i]}.log"
done
round2=$((SECONDS - started - round1))

passed=$(grep -oE 'Test run with [0-9]+ tests' "$log" | awk '{ n += $4 } END { print n + 0 }')
echo "swift-test: rounds took ${round1} s and ${round2} s"
if [[ $first -eq 0 && $second -eq 0 && $fuzzed -eq 0 && $besided -eq 0 && $with1ed -eq 0 ]]; then
    echo "swift-test: ${passed:-0} passed, 0 failed"
else
    echo "swift-test: FAILED (round 1 exit $first, round 2 lanes' exits ${exits[*]}, fuzzing exit $fuzzed, beside round 1 exit $besided, with round 1 exit $with1ed); the failing tests:"
    grep -E '^✘ Test .* failed' "$log" | sed 's/^/  /'
    exit 1
fi
