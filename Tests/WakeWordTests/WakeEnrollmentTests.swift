// Enrollment's pure parts: the verifier's rule and similarity, the fit check, the take listener
// and checker, the files; and the detector waking on an enrolled voice it missed before.

import Audio
import ClawvoiceCore
import Foundation
import Testing
@testable import WakeWord

@Suite struct WakeEnrollmentRuleTests {
    func enrollment(_ templates: [[Float]], floor: Double = 0.1, similarity: Double = 0.8) -> WakeEnrollment {
        WakeEnrollment(phrase: "x", frontEndSHA256: "f", windowEmbeddings: 1, embeddingSize: templates.first?.count ?? 2,
                       floor: floor, similarity: similarity, templates: templates, takes: [])
    }

    @Test func `a step counts over the threshold, or over the floor when near a take, never under the floor`() {
        let e = enrollment([[1, 0]], floor: 0.1, similarity: 0.8)
        var asked = 0
        let near: () -> Float = { asked += 1; return 0.9 }
        let far: () -> Float = { asked += 1; return 0.5 }
        #expect(e.over(score: 0.9, threshold: 0.8, similarity: far))       // the model alone
        #expect(asked == 0, "the similarity is not computed above the threshold")
        #expect(e.over(score: 0.3, threshold: 0.8, similarity: near))      // lowered bar, near a take
        #expect(!e.over(score: 0.3, threshold: 0.8, similarity: far))      // lowered bar, far from every take
        #expect(!e.over(score: 0.05, threshold: 0.8, similarity: near))    // under the floor
        #expect(asked == 2, "under the floor the similarity is not computed either")
    }

    @Test func `each view's similarity is the best cosine over the takes`() {
        let units = [[Float(2), 0], [0, 3]].map(WakeVerifier.unit)
        #expect(units == [[1, 0], [0, 1]])
        let s = [Float(3), 4].withUnsafeBufferPointer { WakeVerifier.bestCosine(units, $0) }
        #expect(abs(s - 0.8) < 1e-6)
        #expect([Float(-1), 0].withUnsafeBufferPointer { WakeVerifier.bestCosine(units, $0) } == 0)
        #expect([Float(0), 0].withUnsafeBufferPointer { WakeVerifier.bestCosine(units, $0) } == -1, "a silent window is near nothing")
    }

    @Test func `an enrollment that does not fit its model says why and is not used`() throws {
        let model = try tinyModel(phrase: "tiny")
        let n = model.window * model.frontEnd.manifest.embeddingSize
        let good = WakeEnrollment(phrase: "tiny", frontEndSHA256: model.frontEnd.manifest.weightsSHA256, windowEmbeddings: model.window,
                                  embeddingSize: model.frontEnd.manifest.embeddingSize, templates: [[Float](repeating: 1, count: n)], takes: [])
        #expect(good.mismatch(with: model) == nil)
        var other = good; other.phrase = "else"
        #expect(other.mismatch(with: model)?.contains("not \"tiny\"") == true)
        var moved = good; moved.frontEndSHA256 = "0"
        #expect(moved.mismatch(with: model)?.contains("another front end") == true)
        var short = good; short.templates = [[1, 2]]
        #expect(short.mismatch(with: model)?.contains("wrong size") == true)
        let d = WakeDetector(models: [model])
        #expect(d.enroll([moved]).count == 1 && d.enrollments[0] == nil)
        #expect(d.enroll([good]).isEmpty && d.enrollments[0] == good)
    }
}

@Suite struct EnrollmentTakeTests {
    static func tone(_ ms: Int, amplitude: Double) -> [Int16] {
        (0..<(ms * 16)).map { Int16(amplitude * sin(Double($0) * 2 * .pi * 220 / 16_000)) }
    }
    static func quiet(_ ms: Int) -> [Int16] { (0..<(ms * 16)).map { Int16(($0 * 7919) % 7) - 3 } }

    @Test func `a take runs from just before the speech to the pause after it`() {
        var l = EnrollmentTakeListener()
        var events = l.feed(Self.quiet(1000))
        #expect(events.isEmpty)
        events = l.feed(Self.tone(700, amplitude: 8000) + Self.quiet(1000))
        guard events.count == 2, events[0] == .heard, case .take(let take) = events[1] else {
            Issue.record("events: \(events.map { "\($0)".prefix(20) })"); return
        }
        // 400 ms of room before, the 700 ms of speech, and the 600 ms pause that ended it.
        #expect(abs(take.count - (400 + 700 + 600) * 16) <= 2 * 320, "\(take.count)")
        let peak: Int = take.map { (s: Int16) -> Int in abs(Int(s)) }.max()!
        let peakDbfs: Double = 20 * log10(Double(peak) / 32768)
        #expect(EnrollmentTakeCheck.check(take) == .ok(peakDbfs: peakDbfs, seconds: Double(take.count) / 16_000))
    }

    @Test func `nothing said is nothing heard, and a take that runs on is too long`() {
        var l = EnrollmentTakeListener()
        l.waitMilliseconds = 2000
        #expect(l.feed(Self.quiet(1900)).isEmpty)
        #expect(l.feed(Self.quiet(200)) == [.nothingHeard])
        l.restart()
        #expect(l.feed(Self.tone(4000, amplitude: 8000)) == [.heard, .tooLong])
    }

    @Test func `silent, too quiet and clipped takes are refused each with what to do`() {
        guard case .refused(let silent) = EnrollmentTakeCheck.check([Int16](repeating: 0, count: 16_000)) else { Issue.record("silent passed"); return }
        #expect(silent.contains("silent") && silent.contains("microphone"))
        guard case .refused(let quiet) = EnrollmentTakeCheck.check(Self.tone(800, amplitude: 300)) else { Issue.record("quiet passed"); return }
        #expect(quiet.contains("too quiet") && quiet.contains("closer"))
        let hard = Self.tone(800, amplitude: 8000) + [Int16](repeating: 32767, count: 10)
        guard case .refused(let clip) = EnrollmentTakeCheck.check(hard) else { Issue.record("clipped passed"); return }
        #expect(clip.contains("clipped") && clip.contains("softer"))
        guard case .ok = EnrollmentTakeCheck.check(Self.tone(800, amplitude: 8000)) else { Issue.record("a good take was refused"); return }
    }
}

@Suite struct WakeEnrollmentStoreTests {
    @Test func `takes and the enrollment are kept, read back, listed and removed`() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("enroll-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = WakeEnrollmentStore(stateDir: dir)
        let e = WakeEnrollment(phrase: "hey robot", frontEndSHA256: "f", windowEmbeddings: 1, embeddingSize: 2,
                               templates: [[1, 1]], takes: ["take-1.wav"])
        #expect(try store.load("hey robot") == nil)
        try store.save(e, takes: [[1, 2, 3]])
        #expect(try store.load("hey robot") == e)
        let wav = try WAVFile.decode([UInt8](try Data(contentsOf: URL(fileURLWithPath: store.triggerDirectory("hey robot") + "/take-1.wav"))))
        #expect(wav.samples == [1, 2, 3] && wav.format == .voice)
        let mode = try FileManager.default.attributesOfItem(atPath: store.enrollmentPath("hey robot"))[.posixPermissions] as? Int
        #expect(mode == 0o600, "the household's voices are private")
        #expect(store.enrolledPhrases() == ["hey robot"])
        #expect(try store.reset("hey robot"))
        #expect(try store.load("hey robot") == nil && store.enrolledPhrases().isEmpty)
        #expect(try !store.reset("hey robot"))
    }
}

@Suite struct EnrolledDetectorTests {
    /// The enrolled rule in the detector: a clip the model alone does not wake on wakes once its
    /// own window is enrolled with the floor at 0, and a different clip still does not.
    @Test func `the detector wakes on an enrolled window and not on another`() throws {
        // One step over the bar is a bid here: the take's window is in the stream at one step only.
        let shipped = try #require(Fixtures.model("openclaw"), "models/openclaw.json is missing")
        var manifest = shipped.manifest
        manifest.consecutiveSteps = 1
        let model = try WakeModel(manifest: manifest, weights: try Data(contentsOf: URL(fileURLWithPath: Fixtures.modelsDirectory + "/openclaw.bin")),
                                  frontEnd: shipped.frontEnd, path: shipped.path)
        let pad = [Int16](repeating: 0, count: 8000)
        let said = pad + (try Fixtures.speak("good morning")) + pad
        let other = pad + (try Fixtures.speak("what time is it")) + pad
        let plain = WakeDetector(models: [model])
        #expect(plain.process(said).isEmpty && plain.finish().isEmpty, "the model alone does not wake on \"good morning\"")
        var (e, best) = WakeEnrollment.from(takes: [said], model: model, takeNames: ["take-1.wav"])
        #expect(best.count == 1 && Double(best[0]) < model.threshold)
        e.floor = 0
        e.similarity = 0.99
        let enrolled = WakeDetector(models: [model])
        #expect(enrolled.enroll([e]).isEmpty)
        var nearest: Float = -1
        let wakes = enrolled.process(said) { nearest = max(nearest, $0.nearest[0] ?? -1) } + enrolled.finish()
        #expect(nearest > 0.999, "the take's own window is in the stream: \(nearest)")
        #expect(wakes.count == 1 && wakes.first?.phrase == "openclaw", "\(wakes)")
        let again = WakeDetector(models: [model])
        again.enroll([e])
        #expect(again.process(other).isEmpty && again.finish().isEmpty, "another phrase is not near the take")
    }
}
