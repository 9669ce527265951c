// WakeModel: one trained trigger, read from its JSON manifest (models/<stem>.json) and the
// little-endian float32 weights beside it (models/<stem>.bin): a small head over the shared
// speech-embedding front end (models/frontend.json), which the manifest names. models/README.md
// is the format's manual; models/training/train_head.py writes it.

import Synchronization
public import Foundation

/// The manifest as stored. Fields this build does not use (the training recipe, validation
/// figures) are kept in the file for people and ignored here.
public struct WakeModelManifest: Codable, Sendable, Equatable {
    public struct FrontEnd: Codable, Sendable, Equatable {
        /// The front end's manifest, relative to this manifest's directory.
        public var manifest: String
        /// The front end weights' SHA-256 the head was trained on.
        public var weightsSHA256: String
    }

    public struct Network: Codable, Sendable, Equatable {
        public var type: String
        /// Embeddings (80 ms each) the head reads, newest last.
        public var windowEmbeddings: Int
        public var embeddingSize: Int
        public var hidden: [Int]
        public var activation: String
        public var output: String
        /// Heads of the same shape whose logits are averaged (an ensemble; 1…16, absent means 1: three
        /// seeds' heads of four members joined are twelve).
        /// Member 0's tensors are `dense<i>.*`, member m's `member<m>.dense<i>.*`.
        public var members: Int? = nil
    }

    /// Named like the front end's: name, shape and offset in float32 values (not bytes).
    public typealias Tensor = FrontEndManifest.Tensor

    public var format: String
    public var version: Int
    /// The trigger phrase as the gateway spells it.
    public var phrase: String
    /// Weights file name, relative to the manifest's directory.
    public var weights: String
    public var weightsBytes: Int
    /// Score (0…1) at or above which the model reports a wake at sensitivity 0.5.
    public var threshold: Double
    /// How many consecutive 80 ms scores must reach the threshold before the model bids for a
    /// wake (1…8; absent means 1). A spoken trigger keeps the score up for several steps, a
    /// stray peak seldom for two: openWakeWord-style detectors confirm the same way.
    public var consecutiveSteps: Int?
    public var frontEnd: FrontEnd
    public var network: Network
    public var tensors: [Tensor]
}

/// A loaded model: the head's weights, and the front end it runs on.
public struct WakeModel: Sendable {
    public let manifest: WakeModelManifest
    /// Where it was loaded from (for messages).
    public let path: String
    public var phrase: String { manifest.phrase }
    public var threshold: Double { manifest.threshold }
    public var consecutiveSteps: Int { manifest.consecutiveSteps ?? 1 }
    public let frontEnd: FrontEndWeights

    typealias Layer = (weight: [Float], bias: [Float], inputs: Int, outputs: Int)
    let window: Int
    /// Each member's dense layers, first to last: weight [out][in], bias [out].
    let members: [[Layer]]
    /// Member 0's layers (every member has the same shape).
    var layers: [Layer] { members[0] }

    /// Reads `<dir>/<stem>.json`, the weights it names and the front end it names.
    public static func load(manifestPath path: String) throws(WakeWordError) -> WakeModel {
        let manifestData: Data
        do { manifestData = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            throw .unreadable(path: path, reason: (error as NSError).localizedDescription)
        }
        let manifest: WakeModelManifest
        do { manifest = try JSONDecoder().decode(WakeModelManifest.self, from: manifestData) } catch {
            throw .unsupported(path: path, reason: "manifest does not decode (\(error))")
        }
        let dir = (path as NSString).deletingLastPathComponent
        let weightsPath = dir + "/" + manifest.weights
        let blob: Data
        do { blob = try Data(contentsOf: URL(fileURLWithPath: weightsPath)) } catch {
            throw .unreadable(path: weightsPath, reason: (error as NSError).localizedDescription)
        }
        let frontEnd = try FrontEndCache.shared.load(dir + "/" + manifest.frontEnd.manifest, sha256: manifest.frontEnd.weightsSHA256)
        return try WakeModel(manifest: manifest, weights: blob, frontEnd: frontEnd, path: path)
    }

    /// Builds a model from a decoded manifest, the raw weights file and its front end.
    public init(manifest m: WakeModelManifest, weights blob: Data, frontEnd: FrontEndWeights, path: String) throws(WakeWordError) {
        guard m.format == "clawvoice-wake" else { throw .unsupported(path: path, reason: "format \"\(m.format)\"") }
        guard m.version == 2 else { throw .unsupported(path: path, reason: "format version \(m.version); this build reads version 2") }
        guard m.frontEnd.weightsSHA256 == frontEnd.manifest.weightsSHA256 else {
            throw .unsupported(path: path, reason: "trained on a different front end than \(frontEnd.path)")
        }
        let n = m.network
        guard n.type == "embedding-mlp", n.activation == "relu", n.output == "sigmoid",
              n.embeddingSize == frontEnd.manifest.embeddingSize,
              (1...EmbeddingFrontEnd.historyLength).contains(n.windowEmbeddings),
              !n.hidden.isEmpty, n.hidden.allSatisfy({ $0 > 0 }) else {
            throw .unsupported(path: path, reason: "network \(n.type) with these settings")
        }
        guard (0...1).contains(m.threshold) else { throw .corrupt(path: path, reason: "threshold \(m.threshold) is outside 0…1") }
        if let k = m.consecutiveSteps, !(1...8).contains(k) {
            throw .corrupt(path: path, reason: "consecutiveSteps \(k) is outside 1…8")
        }
        let memberCount = n.members ?? 1
        guard (1...16).contains(memberCount) else { throw .corrupt(path: path, reason: "members \(memberCount) is outside 1…16") }
        guard blob.count == m.weightsBytes, blob.count % 4 == 0 else {
            throw .corrupt(path: path, reason: "weights are \(blob.count) bytes, manifest says \(m.weightsBytes)")
        }
        let floats = littleEndianFloats(blob)
        var byName: [String: WakeModelManifest.Tensor] = [:]
        for t in m.tensors { byName[t.name] = t }
        func tensor(_ name: String, _ shape: [Int]) throws(WakeWordError) -> [Float] {
            guard let t = byName[name] else { throw .corrupt(path: path, reason: "tensor \(name) is missing") }
            guard t.shape == shape else { throw .corrupt(path: path, reason: "tensor \(name) has shape \(t.shape), expected \(shape)") }
            let count = shape.reduce(1, *)
            guard t.offset >= 0, t.offset + count <= floats.count else {
                throw .corrupt(path: path, reason: "tensor \(name) runs past the end of the weights")
            }
            return Array(floats[t.offset..<t.offset + count])
        }
        let sizes = [n.windowEmbeddings * n.embeddingSize] + n.hidden + [1]
        var members: [[Layer]] = []
        for member in 0..<memberCount {
            let prefix = member == 0 ? "" : "member\(member)."
            var layers: [Layer] = []
            for i in 0..<(sizes.count - 1) {
                layers.append((try tensor("\(prefix)dense\(i).weight", [sizes[i + 1], sizes[i]]),
                               try tensor("\(prefix)dense\(i).bias", [sizes[i + 1]]), sizes[i], sizes[i + 1]))
            }
            members.append(layers)
        }
        manifest = m
        self.path = path
        self.frontEnd = frontEnd
        window = n.windowEmbeddings
        self.members = members
    }
}

/// Front ends by path, so the models of one directory share one loaded copy.
final class FrontEndCache: Sendable {
    static let shared = FrontEndCache()
    private let loaded = Mutex<[String: FrontEndWeights]>([:])

    /// The front end at `path`; read again when the cached copy is not the one `sha256` names.
    func load(_ path: String, sha256: String) throws(WakeWordError) -> FrontEndWeights {
        let key = (path as NSString).standardizingPath
        // Held while loading, so two callers never read the same files twice.
        return try loaded.withLock { (loaded: inout [String: FrontEndWeights]) throws(WakeWordError) -> FrontEndWeights in
            if let w = loaded[key], w.manifest.weightsSHA256 == sha256 { return w }
            let w = try FrontEndWeights.load(manifestPath: key)
            loaded[key] = w
            return w
        }
    }
}
