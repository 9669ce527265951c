// Issue 25, idle cost: after EmbeddingFrontEnd.steadySamples of digital silence the wake front end
// is at a fixed point, so silent chunks are skipped (no mels, no network, no heads). That must
// change nothing: the same scores at every step through the silence and after it, as with every
// chunk computed, and a spoken trigger afterwards scores as it would have.

import Foundation
import Testing
@testable import WakeWord

@Suite struct SilenceSkipTests {
    static func run(skipping: Bool, _ audio: [Int16]) throws -> (scores: [[Float]], skipped: Int) {
        let models = WakeModelCatalog.defaultPhrases.compactMap { Fixtures.model($0) }
        try #require(!models.isEmpty, "no shipped wake models in \(Fixtures.modelsDirectory)")
        let d = WakeDetector(models: models)
        d.skipsSilence = skipping
        var scores: [[Float]] = []
        // In 20 ms frames, as the capture hands them over.
        for start in stride(from: 0, to: audio.count, by: 320) {
            _ = d.process(Array(audio[start..<min(start + 320, audio.count)])) { scores.append($0.scores) }
        }
        return (scores, d.skippedSteps)
    }

    @Test func `silent chunks are skipped and every score is the one computing them gives`() throws {
        let speech = try Fixtures.speak("hey, open claw, what time is it")
        let audio = [Int16](repeating: 0, count: 12 * 16_000) + speech + [Int16](repeating: 0, count: 10 * 16_000) + speech
        let full = try Self.run(skipping: false, audio)
        let skipped = try Self.run(skipping: true, audio)
        #expect(full.skipped == 0)
        // 12 s and 10 s of silence, each skipped after 8 s of it: about 75 of the 275 steps.
        #expect(skipped.skipped >= 60, "only \(skipped.skipped) silent steps skipped")
        #expect(skipped.scores.count == full.scores.count)
        let differing = zip(skipped.scores, full.scores).enumerated().filter { $0.element.0 != $0.element.1 }.map(\.offset)
        #expect(differing.isEmpty, "scores differ at steps \(differing.prefix(10))")
    }
}
