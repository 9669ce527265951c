// WakeModel: one trained trigger, read from its JSON manifest (models/<stem>.json) and the
// little-endian float32 weights beside it (models/<stem>.bin). models/README.md is the format's
// manual; models/training/model.py writes it.

import Foundation

/// The manifest as stored. Fields this build does not use (the training recipe, validation
/// figures) are kept in the file for people and ignored here.
public struct WakeModelManifest: Codable, Sendable, Equatable {
    public struct Features: Codable, Sendable, Equatable {
        public var sampleRateHz: Int
        public var windowSamples: Int
        public var hopSamples: Int
        public var fftSize: Int
        public var mels: Int
        public var fminHz: Double
        public var fmaxHz: Double
        public var melScale: String
        public var window: String
        public var removeFrameMean: Bool
        public var logFloor: Double
    }

    public struct Block: Codable, Sendable, Equatable {
        public var kernel: Int
        public var dilation: Int
    }

    public struct Network: Codable, Sendable, Equatable {
        public var type: String
        public var inputKernelFrames: Int
        public var strideFrames: Int
        public var channels: Int
        public var blocks: [Block]
        public var activation: String
        public var residual: Bool
        public var output: String
    }

    public struct Tensor: Codable, Sendable, Equatable {
        public var name: String
        public var shape: [Int]
        /// Offset in float32 values (not bytes) from the start of the weights file.
        public var offset: Int
    }

    public var format: String
    public var version: Int
    /// The trigger phrase as the gateway spells it.
    public var phrase: String
    /// Weights file name, relative to the manifest's directory.
    public var weights: String
    public var weightsBytes: Int
    /// Score (0…1) at or above which the model reports a wake at sensitivity 0.5.
    public var threshold: Double
    public var features: Features
    public var network: Network
    public var tensors: [Tensor]
}

/// A loaded model: its weights in the layout `WakeInference` reads, contiguous per tensor.
public struct WakeModel: Sendable {
    /// One residual depthwise-separable block.
    struct Block: Sendable {
        var dilation: Int
        /// [channels][3], taps oldest (s − 2d) to newest (s).
        var depthwise: [Float]
        var depthwiseBias: [Float]
        /// [channels out][channels in].
        var pointwise: [Float]
        var pointwiseBias: [Float]
    }

    public let manifest: WakeModelManifest
    /// Where it was loaded from (for messages).
    public let path: String
    public var phrase: String { manifest.phrase }
    public var threshold: Double { manifest.threshold }
    /// Feature frames per network step (3 = one step every 30 ms).
    public var strideFrames: Int { manifest.network.strideFrames }

    let mels: Int
    let channels: Int
    let inputKernel: Int
    let mean: [Float]
    let invStd: [Float]
    /// [channels][inputKernel × mels]: output channel, then tap (oldest first), then mel.
    let inputWeight: [Float]
    let inputBias: [Float]
    let blocks: [Block]
    let headWeight: [Float]
    let headBias: Float

    /// Reads `<dir>/<stem>.json` and the weights it names.
    public static func load(manifestPath path: String) throws(WakeWordError) -> WakeModel {
        let manifestData: Data
        do { manifestData = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            throw .unreadable(path: path, reason: (error as NSError).localizedDescription)
        }
        let manifest: WakeModelManifest
        do { manifest = try JSONDecoder().decode(WakeModelManifest.self, from: manifestData) } catch {
            throw .unsupported(path: path, reason: "manifest does not decode (\(error))")
        }
        let weightsPath = (path as NSString).deletingLastPathComponent + "/" + manifest.weights
        let blob: Data
        do { blob = try Data(contentsOf: URL(fileURLWithPath: weightsPath)) } catch {
            throw .unreadable(path: weightsPath, reason: (error as NSError).localizedDescription)
        }
        return try WakeModel(manifest: manifest, weights: blob, path: path)
    }

    /// Builds a model from a decoded manifest and the raw weights file.
    public init(manifest m: WakeModelManifest, weights blob: Data, path: String) throws(WakeWordError) {
        guard m.format == "clawvoice-wake" else { throw .unsupported(path: path, reason: "format \"\(m.format)\"") }
        guard m.version == 1 else { throw .unsupported(path: path, reason: "format version \(m.version); this build reads version 1") }
        let f = m.features, std = LogMelConfiguration.standard
        guard f.sampleRateHz == std.sampleRateHz, f.windowSamples == std.windowSamples, f.hopSamples == std.hopSamples,
              f.fftSize == std.fftSize, f.mels == std.mels, f.fminHz == std.fminHz, f.fmaxHz == std.fmaxHz,
              f.melScale == "htk", f.window == "hann-periodic", f.removeFrameMean, f.logFloor == std.logFloor else {
            throw .unsupported(path: path, reason: "features differ from the extractor's (16 kHz, 25/10 ms, 512-point FFT, 40 HTK mels 60–7600 Hz)")
        }
        let n = m.network
        guard n.type == "causal-dilated-ds-tcn", n.activation == "relu", n.residual, n.output == "sigmoid",
              n.channels > 0, n.strideFrames > 0, n.inputKernelFrames >= n.strideFrames,
              n.blocks.allSatisfy({ $0.kernel == 3 && $0.dilation > 0 }) else {
            throw .unsupported(path: path, reason: "network \(n.type) with these settings")
        }
        guard (0...1).contains(m.threshold) else { throw .corrupt(path: path, reason: "threshold \(m.threshold) is outside 0…1") }
        guard blob.count == m.weightsBytes, blob.count % 4 == 0 else {
            throw .corrupt(path: path, reason: "weights are \(blob.count) bytes, manifest says \(m.weightsBytes)")
        }
        var floats = [Float](repeating: 0, count: blob.count / 4)
        floats.withUnsafeMutableBytes { dst in
            blob.withUnsafeBytes { src in dst.copyMemory(from: src) }
        }
        #if _endian(big)
        floats = floats.map { Float(bitPattern: UInt32(littleEndian: $0.bitPattern)) }
        #endif
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
        let c = n.channels, mels = f.mels
        manifest = m
        self.path = path
        self.mels = mels
        channels = c
        inputKernel = n.inputKernelFrames
        mean = try tensor("norm.mean", [mels])
        invStd = try tensor("norm.invStd", [mels])
        inputWeight = try tensor("input.weight", [c, n.inputKernelFrames * mels])
        inputBias = try tensor("input.bias", [c])
        var blocks: [Block] = []
        for (i, b) in n.blocks.enumerated() {
            blocks.append(Block(dilation: b.dilation,
                                depthwise: try tensor("block\(i).depthwise.weight", [c, 3]),
                                depthwiseBias: try tensor("block\(i).depthwise.bias", [c]),
                                pointwise: try tensor("block\(i).pointwise.weight", [c, c]),
                                pointwiseBias: try tensor("block\(i).pointwise.bias", [c])))
        }
        self.blocks = blocks
        headWeight = try tensor("head.weight", [c])
        headBias = try tensor("head.bias", [1])[0]
    }

    /// Feature frames the network looks back over, including the current one.
    public var receptiveFieldFrames: Int {
        inputKernel + strideFrames * blocks.reduce(0) { $0 + 2 * $1.dilation }
    }
}
