// VoiceDetector: the endpointer's "is this voice?" per 20 ms capture frame, from the shape of the
// sound and not its loudness. A small MLP (models/voice.json + voice.bin, trained by
// models/training/voice_train.py) over the last 320 ms of log-mel frames, computed with the wake
// front end's window and mel matrix (models/frontend.bin) every 10 ms; each window is floored
// 80 dB under its loudest value and shifted so that its loudest value is 0, so a loud fan and a
// quiet one look the same. The arithmetic is voice_train.py's, checked against its golden
// probabilities in the tests. It lives here because it shares the wake features' FFT and weights.

import COpenBLAS
import Foundation

/// The detector's manifest (models/voice.json).
public struct VoiceDetectorManifest: Codable, Sendable, Equatable {
    public struct Golden: Codable, Sendable, Equatable {
        public var signal: String
        public var probabilities: [Double]
    }
    public var format: String
    public var version: Int
    public var frontEnd: String
    public var frameSamples: Int
    public var hopSamples: Int
    public var fftSize: Int
    public var mels: Int
    public var windowFrames: Int
    public var floorBels: Double
    public var silentBels: Double
    public var inputScale: Double
    public var inputOffset: Double
    public var layers: [Int]
    public var threshold: Double
    public var weights: String
    public var weightsBytes: Int
    public var trainingEngines: [String]
    public var golden: Golden?
}

/// Loaded weights; immutable and shared.
public final class VoiceDetectorModel: Sendable {
    public let manifest: VoiceDetectorManifest
    let window: [Float]
    let melMatrix: [Float]
    /// Per layer: weight [in][out] row-major, bias [out].
    let dense: [(weight: [Float], bias: [Float], inputs: Int, outputs: Int)]

    public static let fileName = "voice.json"

    /// Reads `directory/voice.json`, the weights it names and the front end's window and mel matrix.
    public static func load(directory: String) throws(WakeWordError) -> VoiceDetectorModel {
        let path = (directory as NSString).appendingPathComponent(fileName)
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            throw .unreadable(path: path, reason: (error as NSError).localizedDescription)
        }
        let m: VoiceDetectorManifest
        do { m = try JSONDecoder().decode(VoiceDetectorManifest.self, from: data) } catch {
            throw .unsupported(path: path, reason: "voice detector manifest does not decode (\(error))")
        }
        guard m.format == "clawvoice-voice-detector", m.version == 1 else {
            throw .unsupported(path: path, reason: "\"\(m.format)\" version \(m.version); this build reads clawvoice-voice-detector 1")
        }
        guard m.frameSamples == 320, m.hopSamples == 160, m.fftSize == 512, m.mels == 32, m.windowFrames >= 2,
              m.layers.count >= 2, m.layers.first == m.windowFrames * m.mels, m.layers.last == 1 else {
            throw .unsupported(path: path, reason: "settings differ from the ones this build implements")
        }
        let front = try FrontEndWeights.load(manifestPath: (directory as NSString).appendingPathComponent(m.frontEnd))
        let weightsPath = (directory as NSString).appendingPathComponent(m.weights)
        let blob: Data
        do { blob = try Data(contentsOf: URL(fileURLWithPath: weightsPath)) } catch {
            throw .unreadable(path: weightsPath, reason: (error as NSError).localizedDescription)
        }
        let expected = zip(m.layers.dropLast(), m.layers.dropFirst()).reduce(0) { $0 + ($1.0 + 1) * $1.1 } * 4
        guard blob.count == m.weightsBytes, blob.count == expected else {
            throw .corrupt(path: weightsPath, reason: "weights are \(blob.count) bytes, layers \(m.layers) need \(expected)")
        }
        let floats = littleEndianFloats(blob)
        var dense: [(weight: [Float], bias: [Float], inputs: Int, outputs: Int)] = []
        var o = 0
        for (a, b) in zip(m.layers.dropLast(), m.layers.dropFirst()) {
            dense.append((Array(floats[o..<o + a * b]), Array(floats[o + a * b..<o + a * b + b]), a, b))
            o += a * b + b
        }
        return VoiceDetectorModel(manifest: m, window: front.window, melMatrix: front.melMatrix, dense: dense)
    }

    init(manifest: VoiceDetectorManifest, window: [Float], melMatrix: [Float], dense: [(weight: [Float], bias: [Float], inputs: Int, outputs: Int)]) {
        self.manifest = manifest
        self.window = window
        self.melMatrix = melMatrix
        self.dense = dense
    }
}

/// One stream's detector: feed 16 kHz samples in order; `probability(_:)` per 20 ms frame.
/// One owner (not `Sendable`).
public final class VoiceDetector {
    public let model: VoiceDetectorModel
    public var threshold: Double { model.manifest.threshold }
    private let fft = RealFFT(size: 512)
    private var ring = [Double](repeating: 0, count: 512)   // 352 older samples, then the 160 being filled
    private var pending = 0                                    // samples since the last mel frame
    private var frame = [Double](repeating: 0, count: 512)
    private var power = [Double](repeating: 0, count: 257)
    private var powerF = [Float](repeating: 0, count: 257)
    private var bands = [Float](repeating: 0, count: 32)
    private var mels: [Float]                                  // windowFrames × 32, oldest first
    private var input: [Float]
    /// Each layer's output.
    private let outputs: [UnsafeMutablePointer<Float>]
    /// The last probability computed.
    public private(set) var last = 0.0

    public init(model: VoiceDetectorModel) {
        self.model = model
        let m = model.manifest
        mels = [Float](repeating: Float(m.silentBels), count: m.windowFrames * m.mels)
        input = [Float](repeating: 0, count: m.windowFrames * m.mels)
        outputs = model.dense.map { l in
            let p = UnsafeMutablePointer<Float>.allocate(capacity: l.outputs)
            p.initialize(repeating: 0, count: l.outputs)
            return p
        }
        openblas_set_num_threads(1)
    }

    deinit { for p in outputs { p.deallocate() } }

    /// 20 ms frames that fill the detector's whole state (its mel window and the FFT's older
    /// samples): after `reset()` and these frames, it gives what it would have given had it
    /// heard everything before them.
    public static func contextFrames(_ model: VoiceDetectorModel) -> Int {
        (model.manifest.windowFrames * 160 + 352 + 319) / 320
    }

    /// Back to the start of a stream (silence before it).
    public func reset() {
        for i in ring.indices { ring[i] = 0 }
        pending = 0
        for i in mels.indices { mels[i] = Float(model.manifest.silentBels) }
        last = 0
    }

    /// Feeds samples (any count); returns the voice probability after them, recomputed when
    /// they complete a 20 ms frame (a capture frame is exactly one).
    @discardableResult
    public func probability(_ samples: [Int16]) -> Double {
        var newFrames = 0
        for s in samples {
            ring[352 + pending] = Double(s)
            pending += 1
            if pending == 160 {
                pending = 0
                pushMelFrame()
                ring.withUnsafeMutableBufferPointer { r in
                    _ = memmove(r.baseAddress!, r.baseAddress! + 160, 352 * MemoryLayout<Double>.size)
                }
                newFrames += 1
            }
        }
        if newFrames > 0 { last = run() }
        return last
    }

    private func pushMelFrame() {
        let window = model.window, n = 32
        for i in 0..<512 { frame[i] = ring[i] * Double(window[i]) }
        frame.withUnsafeBufferPointer { inp in power.withUnsafeMutableBufferPointer { fft.powerSpectrum(inp, into: $0) } }
        for k in 0..<257 { powerF[k] = Float(power[k]) }
        // bands = melMatrixᵀ · power (the matrix is [257][32] row-major).
        model.melMatrix.withUnsafeBufferPointer { m in
            cblas_sgemv(CblasRowMajor, CblasTrans, 257, Int32(n), 1, m.baseAddress, Int32(n), powerF, 1, 0, &bands, 1)
        }
        mels.withUnsafeMutableBufferPointer { w in
            _ = memmove(w.baseAddress!, w.baseAddress! + n, (w.count - n) * MemoryLayout<Float>.size)
            for b in 0..<n { w[w.count - n + b] = Float(log10(max(Double(bands[b]), 1e-10))) }
        }
    }

    private func run() -> Double {
        let m = model.manifest
        var top = -Float.infinity
        for v in mels { top = max(top, v) }
        let floor = top - Float(m.floorBels), scale = Float(m.inputScale), offset = Float(m.inputOffset)
        for i in mels.indices { input[i] = (max(mels[i], floor) - top) * scale + offset }
        // Each layer: out = bias + weightᵀ · in (weights [in][out] row-major), ReLU but the last.
        input.withUnsafeBufferPointer { inp in
            for (li, layer) in model.dense.enumerated() {
                let out = outputs[li]
                out.update(from: layer.bias, count: layer.outputs)
                let x: UnsafePointer<Float> = li == 0 ? inp.baseAddress! : UnsafePointer(outputs[li - 1])
                layer.weight.withUnsafeBufferPointer { w in
                    cblas_sgemv(CblasRowMajor, CblasTrans, Int32(layer.inputs), Int32(layer.outputs), 1, w.baseAddress,
                                Int32(layer.outputs), x, 1, 1, out, 1)
                }
                if li < model.dense.count - 1 { for j in 0..<layer.outputs { out[j] = max(out[j], 0) } }
            }
        }
        return 1 / (1 + exp(-Double(outputs[outputs.count - 1][0])))
    }
}
