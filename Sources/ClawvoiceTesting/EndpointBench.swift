// EndpointBench: the audio and the arithmetic behind `clawvoice-bench --vad` and `--endpoint`
// (and the test that checks the default silence window): sentences from espeak-ng (a training
// engine) and flite awb/rms (held out: the voice detector never heard them), BenchNoise.swift's
// noise (not the training script's generators), frame labels from the clean speech, and
// the Endpointer driven frame by frame with the audio position as its clock. No I/O beyond
// running espeak-ng and the flite program.

public import Audio
import AudioFrontEnd
public import ClawvoiceCore
import Foundation
import Talk
public import WakeWord

/// A speaker for bench sentences.
public enum BenchVoice: Sendable, Equatable, CustomStringConvertible {
    /// espeak-ng (a training engine of the voice detector).
    case espeak(voice: String, rateWpm: Int, pitch: Int)
    /// flite's awb or rms (held out: never used to train or tune the detector).
    case flite(String)

    public var description: String {
        switch self {
        case .espeak(let v, let r, _): "espeak-ng \(v) \(r) wpm"
        case .flite(let v): "flite \(v)"
        }
    }

    public var heldOut: Bool { if case .flite = self { return true }; return false }

    /// 16 kHz mono speech of `text`.
    public func say(_ text: String) throws -> [Int16] {
        switch self {
        case .espeak(let voice, let rate, let pitch):
            let raw = try SpeechSynthesizer.synthesize(text, settings: VoiceSettings(voice: voice, rateWpm: rate, pitch: pitch))
            return try Resampler.convert(raw.mono(), toRateHz: 16_000).samples
        case .flite(let voice):
            let out = FileManager.default.temporaryDirectory.appendingPathComponent("clawvoice-flite-\(UUID().uuidString).wav").path
            defer { try? FileManager.default.removeItem(atPath: out) }
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/flite")
            p.arguments = ["-voice", voice, "-t", text, "-o", out]
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            do { try p.run() } catch { throw BenchError("flite is missing (apt-get install flite): \(error)") }
            p.waitUntilExit()
            guard p.terminationStatus == 0, let data = FileManager.default.contents(atPath: out) else {
                throw BenchError("flite -voice \(voice) failed with status \(p.terminationStatus)")
            }
            let pcm = try WAVFile.decode([UInt8](data))
            return try Resampler.convert(pcm.mono(), toRateHz: 16_000).samples
        }
    }

    /// flite's awb and rms say "x," and "x." alike, sample for sample: a clause said on its own
    /// carries no sign of whether the turn goes on. So a held-out sentence is also said whole, in
    /// one utterance (flite's own phrasing at each comma), and cut at the pauses flite put at its
    /// commas (`-psdur` gives every segment's end; a comma's pause is an inner `pau`), so the
    /// caller can stretch each to its drawn length. nil when flite did not pause once per comma.
    public func sayWhole(_ clauses: [String]) throws -> [[Int16]]? {
        guard case .flite(let voice) = self else { return nil }
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("clawvoice-flite-\(UUID().uuidString).wav").path
        defer { try? FileManager.default.removeItem(atPath: out) }
        let p = Process()
        let pipe = Pipe()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/flite")
        p.arguments = ["-voice", voice, "-psdur", "-t", clauses.joined(separator: " "), "-o", out]
        p.standardOutput = pipe
        p.standardError = FileHandle.nullDevice
        do { try p.run() } catch { throw BenchError("flite is missing (apt-get install flite): \(error)") }
        let text = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        guard p.terminationStatus == 0, let data = FileManager.default.contents(atPath: out) else {
            throw BenchError("flite -voice \(voice) failed with status \(p.terminationStatus)")
        }
        let pcm = try WAVFile.decode([UInt8](data))
        let x = try Resampler.convert(pcm.mono(), toRateHz: 16_000).samples
        // "pau:0.204 t:0.28 …": each segment's end in seconds; a pause starts where the one before ended.
        var segments: [(name: String, start: Double, end: Double)] = []
        for tok in text.split(whereSeparator: { $0 == " " || $0 == "\n" }) {
            let f = tok.split(separator: ":")
            guard f.count == 2, let end = Double(f[1]) else { continue }
            segments.append((String(f[0]), segments.last?.end ?? 0, end))
        }
        guard segments.count > 2, segments.first?.name == "pau", segments.last?.name == "pau" else { return nil }
        let inner = segments.dropFirst().dropLast().filter { $0.name == "pau" }
        guard inner.count == clauses.count - 1 else { return nil }
        // From the end of flite's leading pause to the start of its trailing one, cut at each inner pause.
        var parts: [[Int16]] = []
        var from = min(Int(segments[0].end * 16_000), x.count)
        for s in inner + [segments[segments.count - 1]] {
            let a = min(max(Int(s.start * 16_000), from), x.count)
            parts.append(Array(x[from..<a]))
            from = min(Int(s.end * 16_000), x.count)
        }
        return parts
    }
}

public struct BenchError: Error, CustomStringConvertible {
    public var description: String
    public init(_ d: String) { description = d }
}

/// One bench clip: the mixed audio, the clean speech's frame labels and where the last word ends.
public struct BenchClip: Sendable {
    public var samples: [Int16]
    /// Per 20 ms frame: speech in the clean track.
    public var labels: [Bool]
    /// End of the last speech frame, in ms from the clip's start (nil: no speech).
    public var lastWordEndMs: Double?
    public var noise: BenchNoise?
    public var snrDb: Double?
    public var voice: String
    public init(samples: [Int16], labels: [Bool], lastWordEndMs: Double?, noise: BenchNoise?, snrDb: Double?, voice: String) {
        self.samples = samples
        self.labels = labels
        self.lastWordEndMs = lastWordEndMs
        self.noise = noise
        self.snrDb = snrDb
        self.voice = voice
    }
}

public enum EndpointBench {
    public static let frameSamples = 320

    /// The voice detector's training labels (voice_train.py `labels`): RMS within 35 dB of the
    /// loudest frame and above −60 dBFS, gaps up to 60 ms filled.
    public static func labels(_ clean: [Double]) -> [Bool] {
        let n = clean.count / frameSamples
        var rms = [Double](repeating: 0, count: n)
        for j in 0..<n {
            var s = 0.0
            for k in 0..<frameSamples { s += clean[j * frameSamples + k] * clean[j * frameSamples + k] }
            rms[j] = sqrt(s / Double(frameSamples) + 1e-9)
        }
        let top = rms.max() ?? 0
        var on = rms.map { $0 > top * pow(10, -35 / 20) && $0 > 32768 * pow(10, -60 / 20) }
        let idx = on.indices.filter { on[$0] }
        for (a, b) in zip(idx, idx.dropFirst()) where b - a > 1 && b - a <= 4 { for k in a..<b { on[k] = true } }
        return on
    }

    /// Speech parts laid end to end with silences (`gapsMs[i]` after part i), `leadMs` before
    /// and `tailMs` after; noise over all of it at `snrDb` (over the speech's active part);
    /// the loudest sample at `peakDbfs`; a −75 dBFS hiss so nothing is digital silence.
    public static func clip(parts: [[Int16]], gapsMs: [Double], leadMs: Double, tailMs: Double,
                            noise: BenchNoise?, snrDb: Double?, peakDbfs: Double, voice: String, rng: inout SplitMix64) -> BenchClip {
        var clean = [Double](repeating: 0, count: Int(leadMs * 16))
        for (i, p) in parts.enumerated() {
            clean += p.map(Double.init)
            clean += [Double](repeating: 0, count: Int((i < gapsMs.count ? gapsMs[i] : 0) * 16))
        }
        clean += [Double](repeating: 0, count: Int(tailMs * 16))
        let lab = labels(clean)
        var mixed = clean
        if let noise, let snrDb {
            let peak = clean.map(abs).max() ?? 0
            let active = clean.filter { abs($0) > 1e-3 * peak }
            let ps = active.isEmpty ? 1 : active.reduce(0) { $0 + $1 * $1 } / Double(active.count)
            let n = noise.samples(clean.count, rng: &rng)
            let g = sqrt(ps / pow(10, snrDb / 10))
            for i in mixed.indices { mixed[i] += g * n[i] }
        }
        let peak = max(mixed.map(abs).max() ?? 0, 1e-9)
        let scale = 32767 * pow(10, peakDbfs / 20) / peak
        var hiss = SplitMix64(seed: rng.next())
        let hissPeak: Double = 32768 * pow(10.0, -75.0 / 20) * 3.0.squareRoot()
        var out = [Int16](repeating: 0, count: mixed.count)
        for i in mixed.indices {
            let u = Double(hiss.next() >> 11) / Double(1 << 53)
            let h: Double = (2 * u - 1) * hissPeak
            out[i] = Int16(clamping: Int((mixed[i] * scale + h).rounded()))
        }
        let last = lab.lastIndex(of: true).map { Double($0 + 1) * 20 }
        return BenchClip(samples: out, labels: lab, lastWordEndMs: last, noise: noise, snrDb: snrDb, voice: voice)
    }

    /// The voice detector's probability for every 20 ms frame of the clip, from a fresh stream.
    public static func probabilities(_ clip: BenchClip, detector: VoiceDetector) -> [Double] {
        detector.reset()
        return stride(from: 0, to: clip.samples.count - frameSamples + 1, by: frameSamples).map {
            detector.probability(Array(clip.samples[$0..<$0 + frameSamples]))
        }
    }

    /// Per frame: speech by the level rule (the Endpointer's, calibrating from the clip's start).
    public static func levelSpeech(_ clip: BenchClip) -> [Bool] {
        var e = Endpointer(silenceTimeoutMs: 1_000_000, maxCaptureMs: 0)
        return frames(clip).map { f in _ = e.feed(f); return e.lastFrameSpeech }
    }

    /// Per frame: webrtc's VAD (libwebrtc-audio-processing 0.3, no echo canceller, with its noise
    /// suppressor as the front end runs it): speech when either 10 ms half is voice.
    public static func webrtcSpeech(_ clip: BenchClip) throws -> [Bool] {
        let fe = try AudioFrontEnd(options: AudioFrontEndOptions(echoCancel: false, noiseSuppress: true, gainControl: false, voiceDetect: true))
        return try frames(clip).map { f in try fe.near(f.samples, delayMs: 0).voice }
    }

    static func frames(_ clip: BenchClip) -> [PCMBuffer] {
        stride(from: 0, to: clip.samples.count - frameSamples + 1, by: frameSamples).map {
            PCMBuffer(format: .voice, samples: Array(clip.samples[$0..<$0 + frameSamples]))
        }
    }

    /// When the endpointer decides the utterance is over, in ms of audio (nil: not within the
    /// clip). `voice`: per-frame probabilities (nil: the level rule).
    public static func decisionMs(_ clip: BenchClip, windowMs: Int, voice: [Double]?, threshold: Double, hold: Int = Endpointer.defaultVoiceHoldFrames,
                                  turn: TurnModel? = nil) -> Double? {
        var e = Endpointer(silenceTimeoutMs: windowMs, maxCaptureMs: 0, voiceThreshold: voice == nil ? nil : threshold)
        e.voiceHoldFrames = hold
        e.turnModel = turn
        for (j, f) in frames(clip).enumerated() {
            if case .endOfUtterance = e.feed(f, voice: voice.map { $0[min(j, $0.count - 1)] }) { return Double(j + 1) * 20 }
        }
        return nil
    }

    /// Multi-clause sentences: clauses, each said on its own and joined with a pause.
    public static let clauses: [String] = [
        "turn on the kitchen lights", "and set a timer for ten minutes", "when you get a moment",
        "remind me to call my sister", "after the meeting tomorrow", "what is the weather like",
        "in Paris this weekend", "play something relaxing", "but not too loud", "add milk and eggs",
        "to the shopping list", "if the store is still open", "tell me a short story", "about a dragon and a cat",
        "send a message to Alex", "saying that I will be late", "how long does it take", "to drive to the airport",
        "close the garage door", "and lock the front door too", "read me the news", "from this morning",
        "well, let me think", "schedule a call with the team", "for Thursday afternoon", "and invite Maria",
        "what time is it", "in Tokyo right now", "switch off the heating", "because nobody is home",
    ]

    /// `count` sentences of two or three clauses, with the pause after each clause but the
    /// last (150–600 ms: the within-turn pauses of conversational speech), from `seed`.
    public static func sentences(_ count: Int, seed: UInt64) -> [(clauses: [String], pausesMs: [Double])] {
        var rng = SplitMix64(seed: seed)
        return (0..<count).map { _ in
            let k = 2 + Int(rng.next() % 2)
            let cs = (0..<k).map { _ in clauses[Int(rng.next() % UInt64(clauses.count))] }
            let ps = (0..<(k - 1)).map { _ in 150 + 450 * Double(rng.next() >> 11) / Double(1 << 53) }
            return (cs.enumerated().map { $0.offset < k - 1 ? $0.element + "," : $0.element + "." }, ps)
        }
    }

    /// The bench's speakers: espeak-ng voices at several rates, and the held-out flite voices.
    public static let voices: [BenchVoice] = [
        .espeak(voice: "en-us", rateWpm: 175, pitch: 50), .espeak(voice: "en", rateWpm: 150, pitch: 40),
        .espeak(voice: "en-gb-x-rp", rateWpm: 200, pitch: 60), .espeak(voice: "en-us", rateWpm: 130, pitch: 70),
        .flite("awb"), .flite("rms"),
    ]

    /// The speech of a clause without the engine's own leading and trailing silence (10 ms
    /// frames within 40 dB of its loudest), so that a pause is the one drawn and no longer.
    public static func trimmed(_ x: [Int16]) -> [Int16] {
        let n = x.count / 160
        guard n > 0 else { return x }
        let rms: [Double] = (0..<n).map { (j: Int) -> Double in
            var sum = 0.0
            for i in (j * 160)..<(j * 160 + 160) { sum += Double(x[i]) * Double(x[i]) }
            return (sum / 160).squareRoot()
        }
        let top = rms.max() ?? 0
        guard let a = rms.firstIndex(where: { $0 > top / 100 }), let b = rms.lastIndex(where: { $0 > top / 100 }) else { return x }
        return Array(x[(a * 160)..<min(x.count, (b + 1) * 160)])
    }

    /// One endpoint trial per sentence: speaker, noise and SNR cycle through their lists. `whole`:
    /// only the held-out voices' sentences, each said whole (`BenchVoice.sayWhole`) with its comma
    /// pauses stretched to the drawn lengths (the few flite does not pause at are left out).
    public static func endpointClips(sentences count: Int, seed: UInt64, voices: [BenchVoice] = voices,
                                     conditions: [(BenchNoise?, Double?)], whole: Bool = false) throws -> [BenchClip] {
        var rng = SplitMix64(seed: seed &+ 1)
        return try sentences(count, seed: seed).enumerated().compactMap { i, s in
            let v = voices[i % voices.count]
            let (noise, snr) = conditions[(i / voices.count) % conditions.count]
            let parts: [[Int16]]
            if whole {
                guard v.heldOut, let w = try v.sayWhole(s.clauses) else { return nil }
                parts = w.map(trimmed)
            } else {
                parts = try s.clauses.map { trimmed(try v.say($0)) }
            }
            return clip(parts: parts, gapsMs: s.pausesMs, leadMs: 800, tailMs: 3000, noise: noise, snrDb: snr,
                        peakDbfs: -3 - 17 * Double(rng.next() >> 11) / Double(1 << 53), voice: v.description, rng: &rng)
        }
    }

    public struct WindowResult: Sendable {
        public var windowMs: Int
        public var trials = 0
        /// Decided before the last word ended.
        public var earlyCuts = 0
        /// Not decided within the clip's 3 s of tail: noise held the capture open.
        public var heldOpen = 0
        /// Last word → decision, of the trials decided after the last word.
        public var latenciesMs: [Double] = []
        public var earlyCutShare: Double { trials == 0 ? 0 : Double(earlyCuts) / Double(trials) }
        public var heldOpenShare: Double { trials == 0 ? 0 : Double(heldOpen) / Double(trials) }
        public func latencyPercentile(_ p: Double) -> Double {
            let s = latenciesMs.sorted()
            return s.isEmpty ? .nan : s[min(s.count - 1, Int(Double(s.count) * p))]
        }
    }

    /// The end-of-turn features of every frame in a pause after speech (frame index, features),
    /// as the Endpointer computes them with `turn` set: what models/training/turn_train.py learns from.
    public static func turnFeatures(_ samples: [Int16], voice: [Double], threshold: Double) -> [(frame: Int, features: [Double])] {
        var e = Endpointer(silenceTimeoutMs: 1_000_000, maxCaptureMs: 0, voiceThreshold: threshold)
        var t = TurnDetector()
        var out: [(Int, [Double])] = []
        for j in 0..<(samples.count / frameSamples) {
            let f = PCMBuffer(format: .voice, samples: Array(samples[j * frameSamples..<(j + 1) * frameSamples]))
            _ = e.feed(f, voice: voice[min(j, voice.count - 1)])
            if let x = t.feed(f.samples, levelDbfs: e.lastLevelDbfs, speech: e.lastFrameSpeech), e.speechHeard { out.append((j, x)) }
        }
        return out
    }

    /// Early cuts, held-open captures and latencies at each window (with `turn`: the end-of-turn
    /// model under that window as its ceiling).
    public static func evaluate(_ clips: [BenchClip], voice: [[Double]]?, threshold: Double, windowsMs: [Int],
                                hold: Int = Endpointer.defaultVoiceHoldFrames, turn: TurnModel? = nil) -> [WindowResult] {
        windowsMs.map { w in
            var r = WindowResult(windowMs: w)
            for (i, c) in clips.enumerated() {
                guard let last = c.lastWordEndMs else { continue }
                r.trials += 1
                guard let d = decisionMs(c, windowMs: w, voice: voice?[i], threshold: threshold, hold: hold, turn: turn) else { r.heldOpen += 1; continue }
                if d < last { r.earlyCuts += 1 } else { r.latenciesMs.append(d - last) }
            }
            return r
        }
    }

    /// The default-window rule of issue 14: the shortest window with at most 2 % early cuts.
    public static func shortestSafeWindow(_ results: [WindowResult], maxEarlyCutShare: Double = 0.02) -> Int? {
        results.filter { $0.earlyCutShare <= maxEarlyCutShare }.map(\.windowMs).min()
    }
}
