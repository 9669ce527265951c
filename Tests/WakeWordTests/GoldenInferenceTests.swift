import Foundation
import Testing
@testable import WakeWord

/// The training framework's (JAX) whole-sequence logits for a fixed window of features, saved
/// by models/training/train.py next to each model it exports; our streaming run must match.
@Suite struct GoldenInferenceTests {
    @Test func `every shipped model has a golden fixture`() {
        let shipped = WakeModelCatalog(directory: Fixtures.modelsDirectory).availablePhrases()
        #expect(!shipped.isEmpty, "no models under \(Fixtures.modelsDirectory)")
        for phrase in shipped {
            #expect(Fixtures.goldenNames().contains("golden-\(WakeModelCatalog.fileStem(for: phrase)).json"), "\(phrase)")
        }
    }

    @Test(arguments: Fixtures.goldenNames())
    func `streaming inference matches the framework within 1e-4`(fixture: String) throws {
        let golden = try Fixtures.json(fixture)
        let stem = golden["model"] as! String
        let model = try WakeModel.load(manifestPath: Fixtures.modelsDirectory + "/\(stem).json")
        let frames = (golden["features"] as! [[Double]]).map { $0.map(Float.init) }
        let expected = golden["logits"] as! [Double]
        let run = WakeInference(model: model)
        var logits: [Float] = []
        for f in frames { if let l = run.push(f) { logits.append(l) } }
        #expect(logits.count == expected.count)
        var worst = 0.0
        for (a, b) in zip(logits, expected) { worst = max(worst, abs(Double(a) - b)) }
        #expect(worst < 1e-4, "\(stem): largest logit difference \(worst)")
        var worstScore = 0.0
        for (a, b) in zip(logits, expected) { worstScore = max(worstScore, abs(Double(wakeScore(logit: a)) - 1 / (1 + exp(-b)))) }
        #expect(worstScore < 1e-4)

        // reset() is the start-of-stream state: the same frames give the same numbers again.
        run.reset()
        var again: [Float] = []
        for f in frames { if let l = run.push(f) { again.append(l) } }
        #expect(again == logits)
    }

    @Test func `a step comes every third frame`() throws {
        let name = try #require(Fixtures.goldenNames().first)
        let stem = (try Fixtures.json(name))["model"] as! String
        let run = WakeInference(model: try #require(Fixtures.model(stem)))
        let frame = [Float](repeating: -5, count: 40)
        let pattern = (0..<9).map { _ in run.push(frame) != nil }
        #expect(pattern == [false, false, true, false, false, true, false, false, true])
        #expect(run.steps == 3)
    }
}
