// FrontEndWeights: the frozen speech-embedding front end as stored (models/frontend.json + .bin,
// openWakeWord's melspectrogram and embedding networks exported by models/training/frontend.py).
// Reads and checks the file; EmbeddingFrontEnd runs it.

public import Foundation

/// The front end's manifest. models/README.md is its manual.
public struct FrontEndManifest: Codable, Sendable, Equatable {
    public struct Tensor: Codable, Sendable, Equatable {
        public var name: String
        public var shape: [Int]
        /// Offset in float32 values from the start of the weights file.
        public var offset: Int
    }

    public var format: String
    public var version: Int
    public var weights: String
    public var weightsBytes: Int
    public var weightsSHA256: String
    public var sampleRateHz: Int
    public var chunkSamples: Int
    public var contextSamples: Int
    public var fftSize: Int
    public var hopSamples: Int
    public var mels: Int
    public var topDb: Double
    public var melScale: Double
    public var melOffset: Double
    public var embeddingFrames: Int
    public var embeddingStepFrames: Int
    public var embeddingSize: Int
    public var leakyReluSlope: Double
    public var activationFloor: Double
    public var layers: [String]
    public var tensors: [Tensor]
}

/// Loaded front-end weights; immutable, shared by every model that names the same file.
public final class FrontEndWeights: Sendable {
    /// One convolution: weight [out][kh][kw][in] (TFLite's layout), bias [out].
    struct Conv: Sendable {
        var out: Int, kh: Int, kw: Int, inputs: Int
        var weight: [Float]
        var bias: [Float]
    }

    enum Layer: Sendable {
        /// A convolution; `padMel` pads the mel axis by one each side.
        case conv(Conv, padMel: Bool, activate: Bool)
        /// Max pooling over `time` × 2 (mel) with the same stride.
        case pool(time: Int)
    }

    public let manifest: FrontEndManifest
    public let path: String
    /// The 512-point analysis window (a 400-sample Hann centred in 512).
    let window: [Float]
    /// [257][32]: power spectrum bin → mel band.
    let melMatrix: [Float]
    let layers: [Layer]

    static let expectedLayers = ["c33", "c13", "c31", "p22"] + ["c13", "c31", "c13", "c31", "p12"]
        + ["c13", "c31", "c13", "c31", "p22"] + ["c13", "c31", "c13", "c31", "p12"]
        + ["c13", "c31", "c13", "c31", "p22", "last"]

    /// Reads `path` (a frontend.json) and the weights it names.
    public static func load(manifestPath path: String) throws(WakeWordError) -> FrontEndWeights {
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            throw .unreadable(path: path, reason: (error as NSError).localizedDescription)
        }
        let m: FrontEndManifest
        do { m = try JSONDecoder().decode(FrontEndManifest.self, from: data) } catch {
            throw .unsupported(path: path, reason: "front-end manifest does not decode (\(error))")
        }
        let weightsPath = (path as NSString).deletingLastPathComponent + "/" + m.weights
        let blob: Data
        do { blob = try Data(contentsOf: URL(fileURLWithPath: weightsPath)) } catch {
            throw .unreadable(path: weightsPath, reason: (error as NSError).localizedDescription)
        }
        return try FrontEndWeights(manifest: m, weights: blob, path: path)
    }

    public init(manifest m: FrontEndManifest, weights blob: Data, path: String) throws(WakeWordError) {
        guard m.format == "clawvoice-wake-frontend", m.version == 1 else {
            throw .unsupported(path: path, reason: "front end \"\(m.format)\" version \(m.version); this build reads clawvoice-wake-frontend 1")
        }
        guard m.sampleRateHz == 16_000, m.chunkSamples == 1280, m.contextSamples == 480, m.fftSize == 512, m.hopSamples == 160,
              m.mels == 32, m.embeddingFrames == 76, m.embeddingStepFrames == 8, m.embeddingSize == 96,
              m.layers == Self.expectedLayers else {
            throw .unsupported(path: path, reason: "front-end settings differ from the ones this build implements")
        }
        guard blob.count == m.weightsBytes, blob.count % 4 == 0 else {
            throw .corrupt(path: path, reason: "weights are \(blob.count) bytes, manifest says \(m.weightsBytes)")
        }
        let floats = littleEndianFloats(blob)
        var byName: [String: FrontEndManifest.Tensor] = [:]
        for t in m.tensors { byName[t.name] = t }
        func tensor(_ name: String) throws(WakeWordError) -> (shape: [Int], values: [Float]) {
            guard let t = byName[name] else { throw .corrupt(path: path, reason: "tensor \(name) is missing") }
            let count = t.shape.reduce(1, *)
            guard t.offset >= 0, count > 0, t.offset + count <= floats.count else {
                throw .corrupt(path: path, reason: "tensor \(name) runs past the end of the weights")
            }
            return (t.shape, Array(floats[t.offset..<t.offset + count]))
        }
        let w = try tensor("stft.window"), mel = try tensor("mel.matrix")
        guard w.shape == [512], mel.shape == [257, 32] else { throw .corrupt(path: path, reason: "window or mel matrix has the wrong shape") }
        window = w.values
        melMatrix = mel.values
        var layers: [Layer] = []
        var conv = 0, channels = 1
        for kind in m.layers {
            switch kind {
            case "p22": layers.append(.pool(time: 2))
            case "p12": layers.append(.pool(time: 1))
            default:
                let (kh, kw) = kind == "c33" ? (3, 3) : kind == "c13" ? (1, 3) : (3, 1)
                let wt = try tensor("conv\(conv).weight"), b = try tensor("conv\(conv).bias")
                guard wt.shape.count == 4, wt.shape[1] == kh, wt.shape[2] == kw, wt.shape[3] == channels, b.shape == [wt.shape[0]] else {
                    throw .corrupt(path: path, reason: "conv\(conv) has shape \(wt.shape), expected [_, \(kh), \(kw), \(channels)]")
                }
                layers.append(.conv(Conv(out: wt.shape[0], kh: kh, kw: kw, inputs: channels, weight: wt.values, bias: b.values),
                                    padMel: kw == 3, activate: kind != "last"))
                channels = wt.shape[0]
                conv += 1
            }
        }
        guard channels == m.embeddingSize else { throw .corrupt(path: path, reason: "the network ends in \(channels) channels, not \(m.embeddingSize)") }
        self.layers = layers
        manifest = m
        self.path = path
    }
}

/// Little-endian float32 values of a weights file.
func littleEndianFloats(_ blob: Data) -> [Float] {
    var floats = [Float](repeating: 0, count: blob.count / 4)
    floats.withUnsafeMutableBytes { dst in
        blob.withUnsafeBytes { src in dst.copyMemory(from: UnsafeRawBufferPointer(rebasing: src[0..<dst.count])) }
    }
    #if _endian(big)
    floats = floats.map { Float(bitPattern: UInt32(littleEndian: $0.bitPattern)) }
    #endif
    return floats
}
