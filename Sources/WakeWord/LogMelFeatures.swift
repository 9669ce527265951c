// LogMelFeatures: 40 log-mel energies every 10 ms from 16 kHz Int16 audio, streaming. The
// definition (and the reference the tests compare against) is models/training/features.py;
// the numbers must agree with it, so change both or neither.

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the features are. Every wake model's manifest carries the same fields, and a model
/// whose features differ from the extractor's is refused at load time.
public struct LogMelConfiguration: Sendable, Equatable {
    /// Input rate in Hz.
    public var sampleRateHz: Int = 16_000
    /// Analysis window in samples (400 = 25 ms).
    public var windowSamples: Int = 400
    /// Hop between frames in samples (160 = 10 ms).
    public var hopSamples: Int = 160
    /// FFT length in samples; the window is zero-padded to it.
    public var fftSize: Int = 512
    /// Number of mel bands.
    public var mels: Int = 40
    /// Lowest and highest filter edges in Hz (HTK mel scale).
    public var fminHz: Double = 60
    public var fmaxHz: Double = 7600
    /// Added to each band energy before the natural log, so silence stays finite.
    public var logFloor: Double = 1e-6

    public init() {}

    /// The features every shipped model was trained on.
    public static let standard = LogMelConfiguration()

    /// Frame period in milliseconds.
    public var hopMilliseconds: Double { Double(hopSamples) * 1000 / Double(sampleRateHz) }
}

/// Streaming log-mel extractor. Feed any number of samples at a time; every completed
/// 25 ms window (every 10 ms once the first is full) yields one frame of `mels` values.
///
/// Frame `t` covers samples `[160 t, 160 t + 400)`: the mean is removed, a periodic Hann
/// window applied, the 512-point power spectrum taken, 40 triangular HTK-mel filters
/// (peak weight 1) summed, and `ln(energy + 1e-6)` returned, with samples scaled to ±1.
/// One owner: not `Sendable`.
public final class LogMelFeatures {
    public let configuration: LogMelConfiguration
    /// Frames produced since creation or the last `reset()`.
    public private(set) var framesEmitted = 0

    private let fft: RealFFT
    private let hann: [Double]
    /// Sparse filterbank: band m uses bins `filterStart[m] ..< filterStart[m] + filterWeights[m].count`.
    private let filterStart: [Int]
    private let filterWeights: [[Double]]
    private var window: [Double]
    private var filled = 0
    private var frame: [Double]
    private var power: [Double]
    private var output: [Float]

    public init(configuration: LogMelConfiguration = .standard) {
        let c = configuration
        precondition(c.windowSamples <= c.fftSize && c.hopSamples > 0 && c.hopSamples <= c.windowSamples,
                     "LogMelFeatures: window \(c.windowSamples), hop \(c.hopSamples), FFT \(c.fftSize) do not fit")
        self.configuration = c
        fft = RealFFT(size: c.fftSize)
        hann = (0..<c.windowSamples).map { 0.5 - 0.5 * cos(2 * Double.pi * Double($0) / Double(c.windowSamples)) }
        (filterStart, filterWeights) = Self.filterbank(c)
        window = [Double](repeating: 0, count: c.windowSamples)
        frame = [Double](repeating: 0, count: c.fftSize)
        power = [Double](repeating: 0, count: c.fftSize / 2 + 1)
        output = [Float](repeating: 0, count: c.mels)
    }

    /// Forgets buffered audio; the next frame starts a new stream.
    public func reset() {
        filled = 0
        framesEmitted = 0
    }

    /// Consumes `samples` (16 kHz mono) and calls `onFrame` with each completed frame. The
    /// buffer passed to `onFrame` is only valid during the call.
    public func process(_ samples: UnsafeBufferPointer<Int16>, onFrame: (UnsafeBufferPointer<Float>) -> Void) {
        let size = configuration.windowSamples
        let hop = configuration.hopSamples
        var i = 0
        while i < samples.count {
            let take = min(size - filled, samples.count - i)
            window.withUnsafeMutableBufferPointer { w in
                for j in 0..<take { w[filled + j] = Double(samples[i + j]) * (1.0 / 32768.0) }
            }
            filled += take
            i += take
            if filled == size {
                computeFrame()
                framesEmitted += 1
                output.withUnsafeBufferPointer { onFrame($0) }
                // Keep the overlap: the last (window - hop) samples start the next window.
                window.withUnsafeMutableBufferPointer { w in
                    for j in 0..<(size - hop) { w[j] = w[j + hop] }
                }
                filled = size - hop
            }
        }
    }

    /// Convenience: all frames of `samples`, each `mels` long.
    public func process(_ samples: [Int16]) -> [[Float]] {
        var frames: [[Float]] = []
        samples.withUnsafeBufferPointer { buffer in
            process(buffer) { frames.append(Array($0)) }
        }
        return frames
    }

    private func computeFrame() {
        let n = configuration.windowSamples
        window.withUnsafeBufferPointer { w in
            frame.withUnsafeMutableBufferPointer { f in
                hann.withUnsafeBufferPointer { h in
                    var sum = 0.0
                    for j in 0..<n { sum += w[j] }
                    let mean = sum / Double(n)
                    for j in 0..<n { f[j] = (w[j] - mean) * h[j] }
                    for j in n..<f.count { f[j] = 0 }
                }
            }
        }
        frame.withUnsafeBufferPointer { f in
            power.withUnsafeMutableBufferPointer { p in fft.powerSpectrum(f, into: p) }
        }
        let floor = configuration.logFloor
        power.withUnsafeBufferPointer { p in
            output.withUnsafeMutableBufferPointer { out in
                for m in 0..<out.count {
                    let start = filterStart[m]
                    var e = 0.0
                    filterWeights[m].withUnsafeBufferPointer { wts in
                        for k in 0..<wts.count { e += wts[k] * p[start + k] }
                    }
                    out[m] = Float(log(e + floor))
                }
            }
        }
    }

    /// Triangular filters between mel-spaced edges, kept as (first bin, weights) pairs.
    static func filterbank(_ c: LogMelConfiguration) -> ([Int], [[Double]]) {
        func mel(_ f: Double) -> Double { 2595 * log10(1 + f / 700) }
        func hz(_ m: Double) -> Double { 700 * (pow(10, m / 2595) - 1) }
        let lo = mel(c.fminHz), hi = mel(c.fmaxHz)
        let edges = (0..<(c.mels + 2)).map { hz(lo + (hi - lo) * Double($0) / Double(c.mels + 1)) }
        let bins = c.fftSize / 2 + 1
        var starts: [Int] = [], weights: [[Double]] = []
        for m in 0..<c.mels {
            let a = edges[m], b = edges[m + 1], d = edges[m + 2]
            var first = -1
            var w: [Double] = []
            for k in 0..<bins {
                let f = Double(k) * Double(c.sampleRateHz) / Double(c.fftSize)
                let v = max(0, min((f - a) / (b - a), (d - f) / (d - b)))
                if v > 0 {
                    if first < 0 { first = k }
                    // Zero weights between two positive ones cannot happen for a triangle.
                    w.append(v)
                }
            }
            starts.append(max(first, 0))
            weights.append(w)
        }
        return (starts, weights)
    }
}
