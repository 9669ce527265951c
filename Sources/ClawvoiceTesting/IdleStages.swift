// IdleStages: what each stage of the talk loop costs on an idle microphone, for
// `clawvoice-bench --idle` (issue 25). Every stage runs over the same idle frames (silence from
// a null sink's monitor: digital zeros), alone, in this thread, and its thread CPU time is the
// figure; the loop's own per-frame work is what the real daemon costs beyond their sum.
// Pure compute: no audio server (the bench measures capture and the daemon from the outside).

import Audio
import AudioFrontEnd
import ClawvoiceCore
import Foundation
import Talk
import WakeWord

public enum IdleStages {
    public struct Stage: Sendable, Codable {
        public var name: String
        /// Share of one core while the microphone delivers idle frames in real time.
        public var coreShare: Double
        public var detail: String
    }

    /// Thread CPU seconds (this thread only: other helpers' load does not count).
    public static func threadCPUSeconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// `seconds` of 20 ms frames of `samples` (zeros: the null sink's silence).
    static func frames(seconds: Double, level: Int16 = 0) -> [PCMBuffer] {
        var rng = SplitMix64(seed: 25)
        return (0..<Int(seconds * 50)).map { _ in
            PCMBuffer(format: .voice, samples: (0..<320).map { _ in level == 0 ? 0 : Int16(truncatingIfNeeded: Int(rng.next() % UInt64(2 * Int(level) + 1)) - Int(level)) })
        }
    }

    static func cost(_ audioSeconds: Double, _ body: () -> Void) -> Double {
        let t0 = threadCPUSeconds()
        body()
        return (threadCPUSeconds() - t0) / audioSeconds
    }

    /// Each stage's share of a core over `seconds` of idle audio, as the daemon runs them with
    /// its default config (echo cancelling on a loudspeaker, wake on, stop word loaded).
    /// `optimized`: the idle path (skips what has nothing to do); false: every stage as before.
    public static func measure(seconds: Double = 30, modelsDirectory: String) throws -> [Stage] {
        let fs = frames(seconds: seconds)
        var out: [Stage] = []
        let reference = EchoReference()
        // Full cleaner (webrtc AEC + NS + VAD, linear canceller) against a silent reference.
        let full = try CaptureCleaner(reference: reference, delayMs: 60)
        full.idleSkip = false
        var t = ContinuousClock.now
        out.append(Stage(name: "echo canceller + noise suppressor (every frame)", coreShare: cost(seconds) {
            for f in fs { t = t.advanced(by: .milliseconds(20)); _ = full.clean(f, at: t) }
        }, detail: "webrtc AEC+NS+VAD and the linear canceller on each frame, speaker silent"))
        let idle = try CaptureCleaner(reference: reference, delayMs: 60)
        t = ContinuousClock.now
        out.append(Stage(name: "echo canceller + noise suppressor (speaker silent path)", coreShare: cost(seconds) {
            for f in fs { t = t.advanced(by: .milliseconds(20)); _ = idle.clean(f, at: t) }
        }, detail: "what CaptureCleaner runs while the reference is silent: the noise suppressor only"))
        let ns = try AudioFrontEnd(options: AudioFrontEndOptions(echoCancel: false, noiseSuppress: true, gainControl: false, voiceDetect: false))
        out.append(Stage(name: "noise suppressor alone", coreShare: cost(seconds) {
            for f in fs { _ = try? ns.near(f.samples, delayMs: 0) }
        }, detail: "webrtc NS, no canceller"))
        let model = try VoiceDetectorModel.load(directory: modelsDirectory)
        let vd = VoiceDetector(model: model)
        out.append(Stage(name: "voice detector", coreShare: cost(seconds) {
            for f in fs { _ = vd.probability(f.samples) }
        }, detail: "models/voice.json on every frame (the daemon now runs it only while capturing)"))
        var wc = WakeConfig(modelsDirectory: modelsDirectory)
        wc.enabled = true
        let wake = WakeListener(config: wc, triggers: WakeModelCatalog.defaultPhrases)
        out.append(Stage(name: "wake front end + heads", coreShare: cost(seconds) {
            for f in fs { _ = wake.feed(f) }
        }, detail: "mel + embedding nets and \(wake.detector?.phrases.count ?? 0) heads (\(wake.detector?.phrases.joined(separator: ", ") ?? "none"))"))
        let (stop, _) = StopWordListener.load(directory: modelsDirectory)
        if let stop {
            out.append(Stage(name: "stop word (if it listened)", coreShare: cost(seconds) {
                for f in fs { _ = stop.feed(f) }
            }, detail: "the stop head over idle frames; the daemon feeds it only while the node speaks"))
        }
        return out
    }
}
