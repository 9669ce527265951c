import Foundation
import Testing
@testable import WakeWord

/// Sane manifests load; damaged or foreign ones are refused with a line that names the problem.
@Suite struct WakeModelTests {
    /// A tiny valid model: 2 channels, one block, weights 0.1 · index.
    static func tinyManifest(channels c: Int = 2) -> (WakeModelManifest, Data) {
        var tensors: [WakeModelManifest.Tensor] = []
        var offset = 0
        func add(_ name: String, _ shape: [Int]) {
            tensors.append(.init(name: name, shape: shape, offset: offset))
            offset += shape.reduce(1, *)
        }
        add("norm.mean", [40]); add("norm.invStd", [40]); add("input.weight", [c, 200]); add("input.bias", [c])
        add("block0.depthwise.weight", [c, 3]); add("block0.depthwise.bias", [c])
        add("block0.pointwise.weight", [c, c]); add("block0.pointwise.bias", [c])
        add("head.weight", [c]); add("head.bias", [1])
        let floats = (0..<offset).map { Float($0 % 7) * 0.1 }
        let data = floats.withUnsafeBytes { Data($0) }
        let m = WakeModelManifest(
            format: "clawvoice-wake", version: 1, phrase: "tiny", weights: "tiny.bin", weightsBytes: data.count, threshold: 0.8,
            features: .init(sampleRateHz: 16_000, windowSamples: 400, hopSamples: 160, fftSize: 512, mels: 40, fminHz: 60,
                            fmaxHz: 7600, melScale: "htk", window: "hann-periodic", removeFrameMean: true, logFloor: 1e-6),
            network: .init(type: "causal-dilated-ds-tcn", inputKernelFrames: 5, strideFrames: 3, channels: c,
                           blocks: [.init(kernel: 3, dilation: 1)], activation: "relu", residual: true, output: "sigmoid"),
            tensors: tensors)
        return (m, data)
    }

    @Test func `a well-formed manifest and weights load`() throws {
        let (m, data) = Self.tinyManifest()
        let model = try WakeModel(manifest: m, weights: data, path: "tiny.json")
        #expect(model.phrase == "tiny")
        #expect(model.receptiveFieldFrames == 5 + 3 * 2)
    }

    @Test func `damaged and foreign models are refused`() {
        let (good, data) = Self.tinyManifest()
        var cases: [(String, WakeModelManifest, Data)] = []
        var m = good; m.format = "onnx"; cases.append(("format", m, data))
        m = good; m.version = 2; cases.append(("version", m, data))
        m = good; m.features.mels = 32; cases.append(("features", m, data))
        m = good; m.network.blocks = [.init(kernel: 5, dilation: 1)]; cases.append(("kernel", m, data))
        m = good; m.threshold = 1.5; cases.append(("threshold", m, data))
        m = good; cases.append(("short weights", m, data.prefix(data.count - 4)))
        m = good; m.tensors.removeLast(); cases.append(("missing tensor", m, data))
        m = good; m.tensors[2].shape = [3, 200]; cases.append(("shape", m, data))
        m = good; m.tensors[9].offset = 10_000; cases.append(("offset", m, data))
        for (what, manifest, weights) in cases {
            #expect(throws: WakeWordError.self, "\(what)") { try WakeModel(manifest: manifest, weights: weights, path: "x.json") }
        }
    }

    @Test func `a missing or unreadable file names the path`() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("wake-model-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(throws: WakeWordError.self) { try WakeModel.load(manifestPath: dir + "/nope.json") }
        try Data("{not json".utf8).write(to: URL(fileURLWithPath: dir + "/bad.json"))
        do {
            _ = try WakeModel.load(manifestPath: dir + "/bad.json")
            Issue.record("bad JSON loaded")
        } catch {
            #expect(error.description.contains("bad.json"))
        }
        let (m, data) = Self.tinyManifest()
        try JSONEncoder().encode(m).write(to: URL(fileURLWithPath: dir + "/tiny.json"))
        #expect(throws: WakeWordError.self) { try WakeModel.load(manifestPath: dir + "/tiny.json") }   // no tiny.bin yet
        try data.write(to: URL(fileURLWithPath: dir + "/tiny.bin"))
        #expect(try WakeModel.load(manifestPath: dir + "/tiny.json").phrase == "tiny")
    }

    @Test func `the shipped models load and say how they were trained`() throws {
        for stem in ["openclaw", "claude", "computer"] {
            guard let model = Fixtures.model(stem) else { continue }
            #expect(model.phrase == stem)
            #expect((0.3...0.99).contains(model.threshold))
            let raw = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: model.path))) as! [String: Any]
            let training = raw["training"] as! [String: Any]
            #expect((training["command"] as? String)?.hasPrefix("make wake-model TRIGGER=\"\(stem)\"") == true)
        }
    }
}
