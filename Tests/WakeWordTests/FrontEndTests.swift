import ClawvoiceCore
import Foundation
import Testing
@testable import WakeWord

/// The Swift speech-embedding front end against the original TFLite networks (run by the TFLite
/// library in the pyopen-wakeword wheel; models/training/make_fixtures.py wrote the values).
@Suite struct FrontEndTests {
    static func frontEnd() throws -> EmbeddingFrontEnd {
        EmbeddingFrontEnd(weights: try FrontEndWeights.load(manifestPath: Fixtures.modelsDirectory + "/frontend.json"))
    }

    /// Feeds `samples` in pieces of `piece`; the newest embedding after every chunk.
    static func embeddings(_ fe: EmbeddingFrontEnd, _ samples: [Int16], piece: Int) -> [[Float]] {
        var out: [[Float]] = []
        samples.withUnsafeBufferPointer { buf in
            var i = 0
            while i < buf.count {
                let n = min(piece, buf.count - i)
                fe.process(UnsafeBufferPointer(rebasing: buf[i..<i + n])) { history in
                    out.append(Array(history[(history.count - 96)...]))
                }
                i += n
            }
        }
        return out
    }

    @Test func `embeddings match the TFLite networks within 2e-3`() throws {
        let golden = try Fixtures.json("frontend-golden.json")
        let expected = (golden["tflite"] as! [[Double]])
        let samples = try Fixtures.wav("frontend-input.wav").samples
        #expect(samples.count == golden["samples"] as! Int)
        let fe = try Self.frontEnd()
        let got = Self.embeddings(fe, samples, piece: 333)
        #expect(got.count == expected.count)
        #expect(expected.count >= 20)
        var worst = 0.0, largest = 0.0
        for (a, b) in zip(got, expected) {
            for (x, y) in zip(a, b) { worst = max(worst, abs(Double(x) - y)); largest = max(largest, abs(y)) }
        }
        #expect(largest > 10, "the fixture's embeddings are not trivial")
        #expect(worst < 2e-3, "largest difference \(worst) (values up to \(largest))")
    }

    @Test func `piece size does not matter and reset starts the stream again`() throws {
        let samples = try Fixtures.wav("frontend-input.wav").samples
        let fe = try Self.frontEnd()
        let a = Self.embeddings(fe, samples, piece: 1280)
        fe.reset()
        let b = Self.embeddings(fe, samples, piece: 77)
        #expect(a == b)
        #expect(fe.chunks == samples.count / 1280)
    }

    @Test func `a damaged front end is refused with one line`() throws {
        let path = Fixtures.modelsDirectory + "/frontend.json"
        let manifest = try JSONDecoder().decode(FrontEndManifest.self, from: try Data(contentsOf: URL(fileURLWithPath: path)))
        let blob = try Data(contentsOf: URL(fileURLWithPath: Fixtures.modelsDirectory + "/frontend.bin"))
        #expect(throws: WakeWordError.self) { try FrontEndWeights(manifest: manifest, weights: blob.prefix(1000), path: path) }
        var other = manifest
        other.layers.removeLast()
        do {
            _ = try FrontEndWeights(manifest: other, weights: blob, path: path)
            Issue.record("accepted a different network")
        } catch {
            #expect(!error.description.contains("\n"))
        }
    }
}

/// Each shipped head in the detector against numpy's logits for the same audio (from the
/// TFLite embeddings; models/training/make_fixtures.py).
@Suite struct HeadGoldenTests {
    @Test(arguments: WakeModelCatalog.defaultPhrases)
    func `the detector's scores match the reference head within 1e-3`(stem: String) throws {
        let golden = try Fixtures.json("heads-golden.json")
        let expected = try #require(golden[stem] as? [Double], "no golden logits for \(stem): rerun make_fixtures.py")
        let model = try WakeModel.load(manifestPath: Fixtures.modelsDirectory + "/\(stem).json")
        let d = WakeDetector(models: [model])
        var scores: [Float] = []
        _ = d.process(try Fixtures.wav("frontend-input.wav").samples) { scores.append($0.scores[0]) }
        #expect(scores.count == expected.count)
        var worst = 0.0
        for (a, b) in zip(scores, expected) { worst = max(worst, abs(Double(a) - 1 / (1 + exp(-b)))) }
        #expect(worst < 1e-3, "\(stem): largest score difference \(worst)")
    }
}
