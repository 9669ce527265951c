// The bench's command line: its usage text and the check of its arguments, so `--help` (or a
// typo) prints the usage instead of running minutes of measurements.

enum BenchUsage {
    static let text = """
    clawvoice-bench: speed figures for the audio pipeline, each beside a baseline measured in the
    same process. Audio runs on a private PulseAudio with null sinks; the gateway is the loopback one.

    Usage: clawvoice-bench [--json] [--rounds N]          every figure (Opus framing, push-to-talk and
                                                          playback latencies, speech, stop, wake, echo)
           clawvoice-bench --wake-only [--json]           the wake front end's share of a core
           clawvoice-bench --live-only [--rounds N]       push-to-talk, playback, stop and session
                                                          switch latencies alone
           clawvoice-bench --echo-only [--minutes N] [--recording FILE]   the echo canceller's figures
           clawvoice-bench --echo-check FILE...           EchoRoomTests' figures on kept recordings
           clawvoice-bench --vad | --endpoint | --tune [--sentences N]    the voice detector's and
                                                          endpointer's tables (no audio server)
           clawvoice-bench --idle [--seconds N] [--ptt-cycles N]   a real daemon's idle CPU and RSS
                                                          (and its RSS over push-to-talk turns)
           clawvoice-bench --ptt-only --ptt-cycles N      the push-to-talk turns alone
           clawvoice-bench --wake-over-reply [--tries N]  a real daemon on a loudspeaker: a trigger
                                                          said over its reply becomes one turn
           clawvoice-bench --own-words [--tries N]        the same daemon speaks replies that say
                                                          "computer" and "stop": it must neither
                                                          wake nor stop itself
           clawvoice-bench --calls [--rounds N] [--json]   a realtime call per path (WebRTC via the
                                                          aiortc peer, the gateway relay): reply
                                                          latency, the node's share, barge-in, CPU
           clawvoice-bench --turn-features LIST           end-of-turn features of the WAVs in LIST

    Options:
      --json            one JSON object per figure
      --rounds N        rounds per latency figure (default 5)
      --minutes N       minutes of echo for --echo-only (default 1)
      --recording FILE  replay the room recording kept in FILE, or record it there first
      --sentences N     sentences per table (defaults: --vad 40 per voice, --endpoint 300, --tune 160)
      --seconds N       the idle window for --idle (default 30)
      --ptt-cycles N    push-to-talk turns (default 1,000 in the whole run)
      --tries N         triggers over the reply for --wake-over-reply (default 9), replies for
                        --own-words (default 8)
      -h, --help        this text
    Build it with -c release for figures worth quoting: swift run -c release clawvoice-bench
    """

    static let flags: Set<String> = ["--json", "--wake-only", "--echo-only", "--vad", "--endpoint", "--tune", "--idle", "--ptt-only", "--live-only", "--calls", "--wake-over-reply", "--own-words"]
    /// Options followed by a value, and whether the value must be a number.
    static let valued: [String: Bool] = ["--rounds": true, "--minutes": true, "--sentences": true, "--recording": false,
                                                "--seconds": true, "--ptt-cycles": true, "--tries": true, "--turn-features": false]

    enum Verdict: Equatable {
        case run
        case help
        case usage(String)
    }

    static func check(_ args: [String]) -> Verdict {
        var i = 0
        while i < args.count {
            let a = args[i]
            if a == "-h" || a == "--help" { return .help }
            if a == "--echo-check" {
                return i + 1 < args.count ? .run : .usage("--echo-check needs at least one recording FILE")
            }
            if flags.contains(a) { i += 1; continue }
            if let numeric = valued[a] {
                guard i + 1 < args.count else { return .usage("\(a) needs a value") }
                if numeric && Double(args[i + 1]) == nil { return .usage("\(a) needs a number, got \(args[i + 1])") }
                i += 2
                continue
            }
            return .usage("unknown option \(a)")
        }
        return .run
    }
}
