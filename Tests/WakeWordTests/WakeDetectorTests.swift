import Audio
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

@Suite struct WakeDetectorTests {
    @Test func `sensitivity moves every threshold in logit space and 0.5 keeps the trained one`() throws {
        let (m, data) = WakeModelTests.tinyManifest()
        let model = try WakeModel(manifest: m, weights: data, path: "tiny.json")
        let d = WakeDetector(models: [model])
        #expect(abs(Double(d.thresholds[0]) - 0.8) < 1e-6)
        d.sensitivity = 1
        #expect(abs(Double(d.thresholds[0]) - 1 / (1 + exp(-(log(4.0) - 2)))) < 1e-6)
        d.sensitivity = 0
        #expect(abs(Double(d.thresholds[0]) - 1 / (1 + exp(-(log(4.0) + 2)))) < 1e-6)
        d.sensitivity = 7   // clamped to 1
        #expect(d.thresholds[0] < 0.8)
    }

    @Test func `steps are stamped with the audio position at their last frame`() throws {
        let (m, data) = WakeModelTests.tinyManifest()
        let d = WakeDetector(models: [try WakeModel(manifest: m, weights: data, path: "tiny.json")])
        var stamps: [Int] = []
        _ = d.process([Int16](repeating: 0, count: 2000)) { stamps.append($0.ms) }
        // Frames end at 25, 35, 45, … ms; steps complete at frames 2, 5, 8: 45, 75, 105 ms.
        #expect(Array(stamps.prefix(3)) == [45, 75, 105])
        #expect(d.positionMilliseconds == 25 + 10 * 10)
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
        guard Fixtures.model(trigger) != nil else { return }
        let (audio, ends) = try Self.compose([("Please ask", false), (trigger, true), ("to turn on the kitchen lights.", false)])
        let detector = try Self.detector()
        let found = detector.process(audio) + detector.finish()
        #expect(found.count == 1, "\(found)")
        let d = try #require(found.first)
        #expect(d.phrase == trigger)
        #expect(abs(d.ms - ends[0]) <= 300, "detected at \(d.ms) ms, trigger ended at \(ends[0]) ms")
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

    /// Near misses are a measured rate (models/EVALUATION.md), not a promise: the shipped openclaw
    /// model (recipe v4) may still wake on "like a claw" in this sentence (it wakes on 8 % of the
    /// held-out near-miss utterances). Recorded as a known issue, so the suite stays honest and
    /// says so the day a model stops doing it.
    @Test func `a sentence of near-miss words wakes nothing (known issue of the shipped openclaw model)`() throws {
        let (audio, _) = try Self.compose([
            ("The cloud over the hills looked like a claw, and the commuter train was late.", false),
        ])
        let found = try Self.detector().process(audio)
        withKnownIssue("openclaw may false-wake on 'looked like a claw'", isIntermittent: true) {
            #expect(found.isEmpty, "\(found)")
        }
    }

    @Test func `a trigger said twice within two seconds wakes once, farther apart twice`() throws {
        guard Fixtures.model("openclaw") != nil else { return }
        let (close, _) = try Self.compose([("openclaw", true), ("openclaw", true)], gap: 0.3)
        #expect(try Self.detector().process(close).count == 1)
        let (apart, ends) = try Self.compose([("openclaw", true), ("openclaw", true)], gap: 2.5)
        let found = try Self.detector().process(apart)
        #expect(found.count == 2, "\(found)")
        for (d, e) in zip(found, ends) { #expect(abs(d.ms - e) <= 300) }
    }
}

@Suite struct WakeBenchTests {
    @Test func `the bench runs the shipped models and reports CPU time`() throws {
        guard WakeModelCatalog(directory: Fixtures.modelsDirectory).resolve(WakeModelCatalog.defaultPhrases).missing.isEmpty else { return }
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
        let (tiny, data) = WakeModelTests.tinyManifest()
        var a = tiny, b = tiny
        a.phrase = "first"; a.threshold = 0.0002
        b.phrase = "second"; b.threshold = 0.0001
        let d = WakeDetector(models: [try WakeModel(manifest: a, weights: data, path: "a.json"),
                                      try WakeModel(manifest: b, weights: data, path: "b.json")])
        let found = d.process([Int16](repeating: 100, count: 16_000)) + d.finish()
        #expect(found.map(\.phrase) == ["second"])
        #expect(found.first?.ms == 525)          // the first step (every 30 ms from 45 ms) after the 500 ms warm-up
    }

    @Test func `a wake still being decided at the end of a file is reported by finish`() throws {
        let (tiny, data) = WakeModelTests.tinyManifest()
        var m = tiny
        m.threshold = 0.0001
        let d = WakeDetector(models: [try WakeModel(manifest: m, weights: data, path: "t.json")])
        #expect(d.process([Int16](repeating: 100, count: 8_400)).isEmpty)   // crosses at 525 ms, would be decided at 615
        #expect(d.finish().map(\.ms) == [525])
        #expect(d.finish().isEmpty)
    }
}

@Suite struct WakeWarmupTests {
    @Test func `nothing wakes in the first half second of a stream, even at full score`() throws {
        let (tiny, data) = WakeModelTests.tinyManifest()
        var m = tiny
        m.threshold = 0.0001   // every step is over threshold
        let d = WakeDetector(models: [try WakeModel(manifest: m, weights: data, path: "tiny.json")], refractoryMilliseconds: 100)
        let found = d.process([Int16](repeating: 100, count: 16_000)) + d.finish()
        #expect(found.first.map { $0.ms >= 500 } == true, "\(found)")
        #expect(found.allSatisfy { $0.ms >= 500 })
    }
}

@Suite struct WakeFormatTests {
    @Test func `the detector takes 16 kHz mono buffers and refuses others with a line that says so`() throws {
        let (m, data) = WakeModelTests.tinyManifest()
        let d = WakeDetector(models: [try WakeModel(manifest: m, weights: data, path: "tiny.json")])
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
