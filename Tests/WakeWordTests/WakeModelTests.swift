import Foundation
import Testing
@testable import WakeWord

/// Sane manifests load; damaged or foreign ones are refused with a line that names the problem.
@Suite struct WakeModelTests {
    /// The shipped front end, loaded once for the suite.
    static let shippedFrontEnd = Result { () throws(WakeWordError) -> FrontEndWeights in
        try FrontEndWeights.load(manifestPath: Fixtures.modelsDirectory + "/frontend.json")
    }

    static func frontEnd() throws -> FrontEndWeights { try shippedFrontEnd.get() }

    /// A tiny valid head over the shipped front end: 4 embeddings, hidden [3, 2].
    static func tinyManifest(sha: String) -> (WakeModelManifest, Data) {
        var tensors: [WakeModelManifest.Tensor] = []
        var offset = 0
        func add(_ name: String, _ shape: [Int]) {
            tensors.append(.init(name: name, shape: shape, offset: offset))
            offset += shape.reduce(1, *)
        }
        add("dense0.weight", [3, 384]); add("dense0.bias", [3]); add("dense1.weight", [2, 3]); add("dense1.bias", [2])
        add("dense2.weight", [1, 2]); add("dense2.bias", [1])
        let floats = (0..<offset).map { Float($0 % 7) * 0.01 }
        let data = floats.withUnsafeBytes { Data($0) }
        let m = WakeModelManifest(
            format: "clawvoice-wake", version: 2, phrase: "tiny", weights: "tiny.bin", weightsBytes: data.count, threshold: 0.8,
            frontEnd: .init(manifest: "frontend.json", weightsSHA256: sha),
            network: .init(type: "embedding-mlp", windowEmbeddings: 4, embeddingSize: 96, hidden: [3, 2], activation: "relu", output: "sigmoid"),
            tensors: tensors)
        return (m, data)
    }

    @Test func `a well-formed manifest and weights load`() throws {
        let fe = try Self.frontEnd()
        let (m, data) = Self.tinyManifest(sha: fe.manifest.weightsSHA256)
        let model = try WakeModel(manifest: m, weights: data, frontEnd: fe, path: "tiny.json")
        #expect(model.phrase == "tiny")
        #expect(model.layers.map(\.outputs) == [3, 2, 1])
    }

    @Test func `damaged and foreign models are refused`() throws {
        let fe = try Self.frontEnd()
        let (good, data) = Self.tinyManifest(sha: fe.manifest.weightsSHA256)
        var cases: [(String, WakeModelManifest, Data)] = []
        var m = good; m.format = "onnx"; cases.append(("format", m, data))
        m = good; m.version = 1; cases.append(("version 1 (the old TCN)", m, data))
        m = good; m.frontEnd.weightsSHA256 = "00"; cases.append(("other front end", m, data))
        m = good; m.network.windowEmbeddings = 17; cases.append(("window", m, data))
        m = good; m.network.type = "tcn"; cases.append(("type", m, data))
        m = good; m.threshold = 1.5; cases.append(("threshold", m, data))
        m = good; m.consecutiveSteps = 0; cases.append(("no consecutive steps", m, data))
        m = good; m.consecutiveSteps = 9; cases.append(("too many consecutive steps", m, data))
        m = good; cases.append(("short weights", m, data.prefix(data.count - 4)))
        m = good; m.tensors.removeLast(); cases.append(("missing tensor", m, data))
        m = good; m.tensors[0].shape = [4, 384]; cases.append(("shape", m, data))
        m = good; m.tensors[5].offset = 10_000; cases.append(("offset", m, data))
        for (what, manifest, weights) in cases {
            do {
                _ = try WakeModel(manifest: manifest, weights: weights, frontEnd: fe, path: "x.json")
                Issue.record("\(what) was accepted")
            } catch {
                #expect(!error.description.contains("\n"), "\(what)")
                #expect(error.description.contains("x.json"), "\(what)")
            }
        }
    }

    /// The tiny head as a two-member ensemble: member 1 has weights of its own.
    static func tinyEnsemble(sha: String) -> (WakeModelManifest, Data) {
        var (m, data) = tinyManifest(sha: sha)
        let count = data.count / 4
        m.tensors += m.tensors.map { .init(name: "member1." + $0.name, shape: $0.shape, offset: $0.offset + count) }
        let second: [Float] = (0..<count).map { (i: Int) -> Float in Float((i * 5) % 11) * 0.01 - 0.03 }
        data += second.withUnsafeBytes { Data($0) }
        m.weightsBytes = data.count
        m.network.members = 2
        return (m, data)
    }

    /// Three seeds' heads of four members joined are twelve (RULE-V46): up to sixteen load, and
    /// members that are all the same head score as that head alone.
    @Test func `an ensemble holds up to sixteen members`() throws {
        let fe = try Self.frontEnd()
        let (single, data) = Self.tinyManifest(sha: fe.manifest.weightsSHA256)
        func copies(_ n: Int) -> WakeModelManifest {
            var m = single
            m.tensors += (1..<n).flatMap { k in
                single.tensors.map { WakeModelManifest.Tensor(name: "member\(k)." + $0.name, shape: $0.shape, offset: $0.offset) }
            }
            m.network.members = n
            return m
        }
        let one = try WakeModel(manifest: single, weights: data, frontEnd: fe, path: "one.json")
        let sixteen = try WakeModel(manifest: copies(16), weights: data, frontEnd: fe, path: "sixteen.json")
        #expect(sixteen.members.count == 16)
        let history: [Float] = (0..<(EmbeddingFrontEnd.historyLength * 96)).map { (i: Int) -> Float in Float((i * 29) % 97) * 0.02 - 1 }
        let (l1, l16) = history.withUnsafeBufferPointer { (WakeHead(model: one).logit(history: $0), WakeHead(model: sixteen).logit(history: $0)) }
        #expect(abs(l1 - l16) < 1e-5)
        do {
            _ = try WakeModel(manifest: copies(17), weights: data, frontEnd: fe, path: "x.json")
            Issue.record("17 members were accepted")
        } catch {
            #expect(error.description.contains("members 17 is outside 1…16"))
            #expect(error.description.contains("x.json"))
        }
    }

    @Test func `an ensemble's logit is the mean of its members' logits`() throws {
        let fe = try Self.frontEnd()
        let (m, data) = Self.tinyEnsemble(sha: fe.manifest.weightsSHA256)
        let both = try WakeModel(manifest: m, weights: data, frontEnd: fe, path: "tiny.json")
        #expect(both.members.count == 2)
        // Each member alone, as a plain single head.
        var first = m
        first.network.members = nil
        first.tensors = Array(m.tensors.prefix(6))
        var second = first
        second.tensors = m.tensors.suffix(6).map { .init(name: String($0.name.dropFirst("member1.".count)), shape: $0.shape, offset: $0.offset) }
        let a = try WakeModel(manifest: first, weights: data, frontEnd: fe, path: "a.json")
        let b = try WakeModel(manifest: second, weights: data, frontEnd: fe, path: "b.json")
        let history: [Float] = (0..<(EmbeddingFrontEnd.historyLength * 96)).map { (i: Int) -> Float in Float((i * 37) % 101) * 0.02 - 1 }
        let (la, lb, lab) = history.withUnsafeBufferPointer {
            (WakeHead(model: a).logit(history: $0), WakeHead(model: b).logit(history: $0), WakeHead(model: both).logit(history: $0))
        }
        #expect(abs(la - lb) > 1e-3, "the members should differ")
        #expect(abs(lab - (la + lb) / 2) < 1e-5)
        // A manifest without `members` is a single head, as every earlier head is.
        #expect(try WakeModel(manifest: first, weights: data, frontEnd: fe, path: "a.json").members.count == 1)
        var bad = m; bad.network.members = 0
        var missing = m; missing.tensors.removeLast()
        for (what, manifest) in [("0 members", bad), ("a member's tensor missing", missing)] {
            do {
                _ = try WakeModel(manifest: manifest, weights: data, frontEnd: fe, path: "x.json")
                Issue.record("\(what) was accepted")
            } catch {
                #expect(!error.description.contains("\n"), "\(what)")
                #expect(error.description.contains("x.json"), "\(what)")
            }
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
        let fe = try Self.frontEnd()
        let (m, data) = Self.tinyManifest(sha: fe.manifest.weightsSHA256)
        try JSONEncoder().encode(m).write(to: URL(fileURLWithPath: dir + "/tiny.json"))
        try data.write(to: URL(fileURLWithPath: dir + "/tiny.bin"))
        do {
            _ = try WakeModel.load(manifestPath: dir + "/tiny.json")   // no frontend.json beside it yet
            Issue.record("loaded without its front end")
        } catch {
            #expect(error.description.contains("frontend.json"))
        }
        for f in ["frontend.json", "frontend.bin"] {
            try FileManager.default.copyItem(atPath: Fixtures.modelsDirectory + "/" + f, toPath: dir + "/" + f)
        }
        #expect(try WakeModel.load(manifestPath: dir + "/tiny.json").phrase == "tiny")
    }

    @Test(arguments: WakeModelCatalog.defaultPhrases + ["stop"])
    func `the shipped models load and say how they were trained`(stem: String) throws {
        let model = try WakeModel.load(manifestPath: Fixtures.modelsDirectory + "/\(stem).json")
        #expect(model.phrase == stem)
        #expect((0.2...0.999).contains(model.threshold))
        let raw = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: model.path))) as! [String: Any]
        let training = raw["training"] as! [String: Any]
        #expect((training["command"] as? String)?.hasPrefix("make wake-model TRIGGER=\"\(stem)\"") == true)
        // Trained on the training engines only: nothing held out (flite and its kin) among them.
        // RHVoice trains claude since stop 49 (models/training/RULE-V28.md).
        let allowed: Set<String> = ["espeak-ng", "piper-joe", "pico-en-US", "pico-en-GB", "rhvoice"]
        #expect((training["engines"] as? [String]).map { Set($0).isSubset(of: allowed) } == true)
    }
}
