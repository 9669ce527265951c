// Issue 14's figures on a real PulseAudio (the talk tests' own): the assistant's speech played
// once through the speaker sink and its monitor recorded in real time by the node's capture
// (real playback and capture timing), the room (40 ms, −9 dB, coloured) applied to it by
// EchoRoom's mixer; the recording then replayed offline through the capture's echo canceller,
// TalkMachine's barge-in rule and the wake detector. The bench runs the same on 10 minutes
// (`clawvoice-bench --echo-only`).

import Audio
import ClawvoiceCore
import ClawvoiceTesting
import Foundation
import Talk
import Testing
import WakeWord

extension TalkAudio {
@Suite struct EchoRoomTests {
    /// One recording serves every check below (45 s of real time).
    actor Cache {
        static let shared = Cache()
        private var task: Task<RoomRecording, any Error>?
        func recording() async throws -> RoomRecording {
            if let task { return try await task.value }
            let t = Task {
                try await TalkPulse.ensure()
                // A run disturbed by the machine's load (the stream took over 400 ms to start, or the
                // capture lost audio) measures the load, not the canceller: record again, up to three times.
                var rec = try await RoomRecording.record(far: try RoomSpeech.assistant(seconds: 45), server: TalkPulse.server)
                for _ in 0..<2 where rec.disturbed {
                    rec = try await RoomRecording.record(far: try RoomSpeech.assistant(seconds: 45), server: TalkPulse.server)
                }
                // CLAWVOICE_ECHO_RECORDING=FILE keeps it for `clawvoice-bench --echo-check FILE`.
                if let file = ProcessInfo.processInfo.environment["CLAWVOICE_ECHO_RECORDING"] {
                    try JSONEncoder().encode(rec).write(to: URL(fileURLWithPath: file))
                }
                return rec
            }
            task = t
            return try await t.value
        }
    }

    @Test func `the echo on a real PulseAudio is cancelled by more than 25 dB with PulseAudio's timing`() async throws {
        let rec = try await Cache.shared.recording()
        let timed = rec.erle(cleaned: try rec.cleaned(timed: true))
        let handed = rec.erle(cleaned: try rec.cleaned(timed: false))
        print(String(format: "echo room: ERLE %.1f dB with PulseAudio's timing (playback latency %.0f ms, capture %.0f ms, lost %.0f ms), %.1f dB with the clip's hand-over time",
                     timed, rec.playbackLatencyMs, rec.captureLatencyMs, rec.lostMs, handed))
        #expect(timed >= 25, "ERLE \(timed) dB")
        #expect(rec.playbackLatencyMs > 0, "playback latency \(rec.playbackLatencyMs) ms")
        // The hand-over timing is printed, not compared: on a quiet machine the clip is heard soon
        // after it is handed over and both align (a fresh-clone run read 47 dB timed, 70 dB handed,
        // the suppressor leaving digital silence); the timing info is what holds under load
        // (5-26 dB handed against 27-88 dB timed in loaded runs; the bench's 10 min: 33.0 against 44.9).
    }

    @Test func `45 s of the assistant speaking alone through the room never barges in`() async throws {
        let rec = try await Cache.shared.recording()
        let out = try rec.cleaned()
        #expect(rec.bargeIns(cleaned: out) == 0, "false barge-ins over \(rec.frames / 50) s of the assistant's own echo")
        // The control: the same echo, not cancelled, barges in.
        #expect(rec.bargeIns(cleaned: rec.mic) >= 1, "the raw echo reaches the microphone")
    }

    @Test func `wake words are heard over the assistant's echo on the detectors' path`() async throws {
        let rec = try await Cache.shared.recording()
        let dir = WakeModelCatalog.defaultDirectory()
        let models = try WakeModelCatalog(directory: dir).load(["computer"]).models
        let detector = WakeDetector(models: try #require(models.first.map { [$0] }, "no computer model in \(dir)"))
        // Held-out users (flite awb and rms) say "computer" over the assistant, 12 dB above the
        // echo's level and at its level; the same clips with the speaker silent are the reference.
        var counts: [Double: (clips: Int, silent: Int, speaking: Int, webrtc: Int)] = [:]
        for extra in [12.0, 0.0] {
            // From 8 s on: the linear canceller has had 5 s of the assistant to converge (a node's
            // canceller lives as long as its capture stream; only its very first reply is this fresh).
            let c = try rec.wakeOverEcho(detector: detector, trigger: "computer", extraDb: extra, firstAt: 128_000)
            counts[extra] = c
            print("echo room: \"computer\" \(Int(extra)) dB above the echo, \(c.clips) clips: heard \(c.speaking) times over the assistant on the detectors' path, \(c.webrtc) on webrtc's, \(c.silent) with the speaker silent")
        }
        let loud = try #require(counts[12]), level = try #require(counts[0])
        #expect(loud.silent >= loud.clips / 2, "the clips are heard with the speaker silent (\(loud.silent) of \(loud.clips))")
        // Issue 14's goal: 80 % of the silent-speaker detections, 12 dB above the echo and at its
        // own level, where webrtc's suppressor takes the user with the echo (the bench: 0.10 of
        // the silent count on webrtc's path, 10 min); the detectors' path hears more than it.
        // Before the reference cursor was fixed this fell short in 2 of 5 fresh-clone runs (4 and 0
        // of 6), and on three of five kept recordings of a test server whose timing readings
        // wander (3-4 of 6 at the echo's level): the cursor moved the reference when the speaker
        // had not, and the linear filter had to learn the room again after each move
        // (ReferenceCursorTests has the patterns; `clawvoice-bench --echo-check` on eleven kept
        // recordings now: 6-8 of 6 at +12 dB and at the echo's level on every one).
        #expect(5 * loud.speaking >= 4 * loud.silent, "over the echo \(loud.speaking), silent \(loud.silent)")
        #expect(5 * level.speaking >= 4 * level.silent, "at the echo's level \(level.speaking), silent \(level.silent)")
        #expect(level.speaking > level.webrtc, "detectors' path \(level.speaking), webrtc's \(level.webrtc)")
    }

    @Test func `a user talking over the assistant barges in within 300 ms, median`() async throws {
        let rec = try await Cache.shared.recording()
        let echoDb = Endpointer.dbfs(rms: PCMBuffer(format: .voice, samples: rec.mic).rms)
        let (near, starts, lengths) = try RoomSpeech.wakeClips(trigger: "computer", samples: rec.mic.count, dbfs: echoDb + 12)
        let latencies = rec.bargeInLatencies(cleaned: try rec.cleaned(near: near), near: near, starts: starts, lengths: lengths)
        let heard = latencies.compactMap { $0 }.sorted()
        print("echo room: barge-in after \(heard) ms over \(latencies.count) commands begun while the speaker played")
        #expect(latencies.count >= 2, "commands begun over the speaker: \(latencies.count)")
        #expect(heard.count == latencies.count, "every one barged in: \(latencies)")
        // The median, as the bench reports it (one slow start in a few, 380 ms in the 2 min run, is
        // the user's first syllable under the bar, not the rule).
        #expect(heard.isEmpty ? false : heard[heard.count / 2] <= 300, "median barge-in of \(heard) ms")
    }
}
}
