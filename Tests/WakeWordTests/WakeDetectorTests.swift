import Audio
import ClawvoiceCore
import ClawvoiceTesting
import Foundation
import Testing
@testable import WakeWord

@Suite struct WakeRefractoryTests {
    @Test func `the first wake is admitted and the next two seconds are quiet`() {
        var r = WakeRefractory()
        let admitted = [1000, 1030, 2999, 3000].map { r.admit(atMilliseconds: $0) }
        #expect(admitted == [true, false, false, true])
        #expect(r.lastMilliseconds == 3000)
    }

    @Test func `reset forgets the last wake`() {
        var r = WakeRefractory(periodMilliseconds: 500)
        let first = r.admit(atMilliseconds: 10)
        r.reset()
        let second = r.admit(atMilliseconds: 20)
        #expect(first && second)
    }
}

/// The tiny head of WakeModelTests over the shipped front end.
func tinyModel(phrase: String = "tiny", threshold: Double = 0.8, consecutiveSteps: Int? = nil) throws -> WakeModel {
    let fe = try WakeModelTests.frontEnd()
    var (m, data) = WakeModelTests.tinyManifest(sha: fe.manifest.weightsSHA256)
    m.phrase = phrase
    m.threshold = threshold
    m.consecutiveSteps = consecutiveSteps
    return try WakeModel(manifest: m, weights: data, frontEnd: fe, path: "\(phrase).json")
}

@Suite struct WakeDetectorTests {
    @Test func `sensitivity moves every threshold in logit space and 0.5 keeps the trained one`() throws {
        let d = WakeDetector(models: [try tinyModel()])
        #expect(abs(Double(d.thresholds[0]) - 0.8) < 1e-6)
        d.sensitivity = 1
        #expect(abs(Double(d.thresholds[0]) - 1 / (1 + exp(-(log(4.0) - 2)))) < 1e-6)
        d.sensitivity = 0
        #expect(abs(Double(d.thresholds[0]) - 1 / (1 + exp(-(log(4.0) + 2)))) < 1e-6)
        d.sensitivity = 7   // clamped to 1
        #expect(d.thresholds[0] < 0.8)
    }

    @Test func `steps are stamped with the audio position at the end of their 80 ms chunk`() throws {
        let d = WakeDetector(models: [try tinyModel()])
        var stamps: [Int] = []
        _ = d.process([Int16](repeating: 0, count: 4000)) { stamps.append($0.ms) }
        #expect(stamps == [80, 160, 240])
        #expect(d.positionMilliseconds == 240)
    }

    @Test func `models naming one front end share it`() throws {
        let a = try tinyModel(phrase: "a"), b = try tinyModel(phrase: "b")
        #expect(a.frontEnd === b.frontEnd)
        let d = WakeDetector(models: [a, b])
        var seen: [[Float]] = []
        _ = d.process([Int16](repeating: 500, count: 2560)) { seen.append($0.scores) }
        #expect(seen.count == 2 && seen.allSatisfy { $0[0] == $0[1] })
    }
}

/// File level: espeak-ng speech with the trigger inside a longer sentence, through a WAV, into
/// the detector with all shipped models. (Default voice en-us, 175 wpm.)
@Suite(.serialized) struct WakeFileDetectionTests {
    static func detector() throws -> WakeDetector {
        let (models, missing) = try WakeModelCatalog(directory: Fixtures.modelsDirectory).load(WakeModelCatalog.defaultPhrases)
        try #require(!models.isEmpty, "no trained models: \(missing)")
        return WakeDetector(models: models)
    }

    static func silence(_ seconds: Double) -> [Int16] { [Int16](repeating: 0, count: Int(seconds * 16_000)) }

    /// Pieces joined with gaps; returns the audio (through a WAV) and where each trigger ended.
    static func compose(_ pieces: [(text: String, trigger: Bool)], gap: Double = 0.25) throws -> ([Int16], [Int]) {
        var audio = silence(0.5)
        var ends: [Int] = []
        for p in pieces {
            let clip = try Fixtures.speak(p.text)
            if p.trigger { ends.append((audio.count + Fixtures.speechEnd(clip)) * 1000 / 16_000) }
            audio += clip + silence(gap)
        }
        audio += silence(1)
        // Add a little noise so nothing sits at the log floor, then round-trip through a WAV.
        var rng = SplitMix64(seed: 3)
        audio = audio.map { Int16(clamping: Int32($0) + Int32(rng.next() % 61) - 30) }
        let wav = WAVFile.encode(PCMBuffer(format: .voice, samples: audio))
        return (try WAVFile.decode(wav).samples, ends)
    }

    @Test(arguments: ["openclaw", "claude", "computer"])
    func `a trigger inside a sentence is detected at the right time`(trigger: String) throws {
        try #require(Fixtures.model(trigger) != nil, "no model for \(trigger) under \(Fixtures.modelsDirectory)")
        let (audio, ends) = try Self.compose([("Please ask", false), (trigger, true), ("to turn on the kitchen lights.", false)])
        let detector = try Self.detector()
        let found = detector.process(audio) + detector.finish()
        #expect(found.count == 1, "\(found)")
        #expect(found.first?.phrase == trigger)
        if let d = found.first { #expect(abs(d.ms - ends[0]) <= 500, "detected at \(d.ms) ms, trigger ended at \(ends[0]) ms") }
    }

    /// The stream starts after silence, as in training: a trigger in the file's first
    /// milliseconds is heard (the old detector ignored the first half second).
    @Test(arguments: ["openclaw", "claude", "computer"])
    func `a trigger at 0 ms of a file is detected`(trigger: String) throws {
        try #require(Fixtures.model(trigger) != nil, "no model for \(trigger)")
        let clip = try Fixtures.speak(trigger)
        var rng = SplitMix64(seed: 9)
        let audio = (clip + [Int16](repeating: 0, count: 24_000)).map { Int16(clamping: Int32($0) + Int32(rng.next() % 61) - 30) }
        let detector = try Self.detector()
        let found = detector.process(audio) + detector.finish()
        // Every shipped head hears it. claude did not from recipe v3 to v20 (v20 at 0.85: 0.67, 0.88,
        // then 0.76); the joined head of stop 54 at 0.72 gives 0.59, 0.86, then 0.73 (`espeak-ng -v
        // en-us claude` through `clawvoice wake detect --scores`), so it is held to it like the others.
        #expect(found.map(\.phrase) == [trigger], "\(found)")
    }

    @Test func `sentences without a trigger wake nothing`() throws {
        let (audio, _) = try Self.compose([
            ("The weather is mild today, and we walked to the market before lunch.", false),
            ("Could you open the window? The kitchen is warm.", false),
            ("Later in the evening the neighbours came over for tea and talked about the garden.", false),
        ])
        let found = try Self.detector().process(audio)
        #expect(found.isEmpty, "\(found)")
    }

    /// The sentence the old (TCN) openclaw model woke on; the embedding heads do not.
    @Test func `a sentence of near-miss words wakes nothing`() throws {
        let (audio, _) = try Self.compose([
            ("The cloud over the hills looked like a claw, and the commuter train was late.", false),
        ])
        let found = try Self.detector().process(audio)
        #expect(found.isEmpty, "\(found)")
    }

    @Test func `a trigger said twice within two seconds wakes once, farther apart twice`() throws {
        try #require(Fixtures.model("openclaw") != nil, "no openclaw model")
        let (close, _) = try Self.compose([("openclaw", true), ("openclaw", true)], gap: 0.3)
        #expect(try Self.detector().process(close).count == 1)
        let (apart, ends) = try Self.compose([("openclaw", true), ("openclaw", true)], gap: 2.5)
        let found = try Self.detector().process(apart)
        #expect(found.count == 2, "\(found)")
        for (d, e) in zip(found, ends) { #expect(abs(d.ms - e) <= 500) }
    }
}

@Suite struct WakeBenchTests {
    @Test func `the bench runs the shipped models and reports CPU time`() throws {
        let missing = WakeModelCatalog(directory: Fixtures.modelsDirectory).resolve(WakeModelCatalog.defaultPhrases).missing
        try #require(missing.isEmpty, "\(missing)")
        let r = try WakeBench.measure(modelsDirectory: Fixtures.modelsDirectory, secondsOfAudio: 3)
        #expect(r.secondsOfAudio == 3)
        #expect(r.cpuSeconds > 0 && r.cpuSeconds < 3)
    }

    @Test func `the bench names the missing models`() {
        #expect(throws: WakeWordError.self) {
            _ = try WakeBench.measure(modelsDirectory: "/nonexistent", phrases: ["hey claw"], secondsOfAudio: 1)
        }
    }
}

@Suite struct WakeDecisionTests {
    /// Two copies of one tiny model under different phrases and thresholds: both cross on the
    /// same steps, and the wake goes to the one further over its threshold, not the first listed.
    @Test func `when several models cross, the one furthest over its threshold wins`() throws {
        let d = WakeDetector(models: [try tinyModel(phrase: "first", threshold: 0.0002), try tinyModel(phrase: "second", threshold: 0.0001)])
        let found = d.process([Int16](repeating: 100, count: 16_000)) + d.finish()
        #expect(found.map(\.phrase) == ["second"])
        #expect(found.first?.ms == 80)          // the first step: no warm-up
    }

    @Test func `a wake still being decided at the end of a file is reported by finish`() throws {
        let d = WakeDetector(models: [try tinyModel(threshold: 0.0001)])
        #expect(d.process([Int16](repeating: 100, count: 1280)).isEmpty)   // crosses at 80 ms, would be decided at 160
        #expect(d.finish().map(\.ms) == [80])
        #expect(d.finish().isEmpty)
    }

    @Test func `reset after a capture gap starts the stream afresh`() throws {
        let d = WakeDetector(models: [try tinyModel(threshold: 0.0001)], refractoryMilliseconds: 100_000)
        let noise = (0..<6400).map { Int16(truncatingIfNeeded: ($0 * 7919) % 2001 - 1000) }
        var first: [[Float]] = []
        let wakes = d.process(noise) { first.append($0.scores) } + d.finish()
        #expect(wakes.count == 1)
        #expect(d.process(noise).isEmpty)       // refractory: still the same stream
        d.reset()
        var again: [[Float]] = []
        let after = d.process(noise) { again.append($0.scores) } + d.finish()
        #expect(again == first)                 // the same audio after a reset scores as at the start
        #expect(after.count == 1)
        #expect(d.positionMilliseconds == 400)
    }
}

@Suite struct WakeConfirmationTests {
    @Test func `a model bids only after its score has been over the threshold for its steps in a row`() {
        var c = WakeConfirmation(required: [2, 1])
        var bids: [Bool] = []
        for over in [true, false, true, true, true] { bids.append(c.step(0, over: over)) }
        // one step over: not yet; the run is broken; two in a row; and every step after while it stays up
        #expect(bids == [false, false, false, true, true])
        let other = c.step(1, over: true)           // a model that needs one step bids at once
        #expect(other)
        #expect(c.runs == [3, 1])
        c.reset()
        #expect(c.runs == [0, 0])
        let afterReset = c.step(0, over: true)      // a reset starts the run again
        #expect(!afterReset)
    }

    @Test func `required steps below one count as one`() {
        var c = WakeConfirmation(required: [0])
        #expect(c.required == [1])
        let bid = c.step(0, over: true)
        #expect(bid)
    }

    @Test func `the detector wakes on the step that completes the run, stamped there`() throws {
        let one = WakeDetector(models: [try tinyModel(threshold: 0.0001)])
        #expect((one.process([Int16](repeating: 100, count: 16_000)) + one.finish()).map(\.ms) == [80])
        let two = WakeDetector(models: [try tinyModel(threshold: 0.0001, consecutiveSteps: 2)])
        #expect((two.process([Int16](repeating: 100, count: 16_000)) + two.finish()).map(\.ms) == [160])
        #expect(two.confirmation.required == [2])
        // A single 80 ms step is never enough for it: the stream ends after the first step.
        let short = WakeDetector(models: [try tinyModel(threshold: 0.0001, consecutiveSteps: 2)])
        #expect((short.process([Int16](repeating: 100, count: 1280)) + short.finish()).isEmpty)
        // A reset (capture gap) starts the run again: one step before and one after is not two.
        let gap = WakeDetector(models: [try tinyModel(threshold: 0.0001, consecutiveSteps: 2)])
        #expect(gap.process([Int16](repeating: 100, count: 1280)).isEmpty)
        gap.reset()
        #expect((gap.process([Int16](repeating: 100, count: 1280)) + gap.finish()).isEmpty)
    }
}

@Suite struct WakeWarmupTests {
    @Test func `a warm-up, when set, keeps wakes out of the stream's first milliseconds`() throws {
        let d = WakeDetector(models: [try tinyModel(threshold: 0.0001)], refractoryMilliseconds: 100)
        d.warmupMilliseconds = 500
        let found = d.process([Int16](repeating: 100, count: 16_000)) + d.finish()
        #expect(found.first?.ms == 560, "\(found)")
        #expect(found.allSatisfy { $0.ms >= 500 })
    }
}

@Suite struct WakeFormatTests {
    @Test func `the detector takes 16 kHz mono buffers and refuses others with a line that says so`() throws {
        let d = WakeDetector(models: [try tinyModel()])
        #expect(try d.process(PCMBuffer(format: .voice, samples: [Int16](repeating: 0, count: 320))).isEmpty)
        do {
            _ = try d.process(PCMBuffer(format: AudioFormat(sampleRateHz: 48_000, channels: 2), samples: [0, 0]))
            Issue.record("48 kHz stereo accepted")
        } catch {
            #expect(error == .wrongFormat(AudioFormat(sampleRateHz: 48_000, channels: 2)))
            #expect(error.description.contains("resample"))
        }
    }
}
