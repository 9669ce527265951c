// WakeInference: one model run step by step over a stream of feature frames. It keeps only
// what the causal network needs (the last few input frames and each block's dilated history),
// so one step costs the same at minute one and hour ten. The numbers equal the training
// framework's whole-sequence outputs (Tests/WakeWordTests/GoldenInferenceTests.swift).

/// Streaming state for one `WakeModel`. Feed every feature frame with `push`; every
/// `strideFrames` frames (30 ms for the shipped models) the network runs once and the
/// step's logit comes back. Positions before the first frame count as zeros, as in training.
/// One owner: not `Sendable`.
public final class WakeInference {
    public let model: WakeModel
    /// Steps computed since creation or `reset()`.
    public private(set) var steps = 0
    private var framesSeen = 0

    private let c: Int, mels: Int, kernel: Int
    /// The last `kernel` normalised frames, stored twice over so any window is contiguous.
    private let inputRing: UnsafeMutablePointer<Float>
    private var inputHead = 0
    /// Per block: ring of the block's last 2d+1 inputs, [slot][channel].
    private let histories: [UnsafeMutablePointer<Float>]
    private let historySlots: [Int]
    private let h: UnsafeMutablePointer<Float>
    private let y: UnsafeMutablePointer<Float>
    // Weights, copied once into aligned storage.
    private let mean: UnsafeMutablePointer<Float>, invStd: UnsafeMutablePointer<Float>
    private let w0: UnsafeMutablePointer<Float>, b0: UnsafeMutablePointer<Float>
    private let dw: [UnsafeMutablePointer<Float>], dwb: [UnsafeMutablePointer<Float>]
    private let pw: [UnsafeMutablePointer<Float>], pwb: [UnsafeMutablePointer<Float>]
    private let dilations: [Int]
    private let wh: UnsafeMutablePointer<Float>
    private let bh: Float
    private var owned: [UnsafeMutablePointer<Float>] = []

    public init(model: WakeModel) {
        self.model = model
        c = model.channels
        mels = model.mels
        kernel = model.inputKernel
        var owned: [UnsafeMutablePointer<Float>] = []
        func copy(_ a: [Float]) -> UnsafeMutablePointer<Float> {
            let p = UnsafeMutablePointer<Float>.allocate(capacity: max(a.count, 1))
            p.initialize(repeating: 0, count: max(a.count, 1))
            a.withUnsafeBufferPointer { p.update(from: $0.baseAddress!, count: a.count) }
            owned.append(p)
            return p
        }
        func zeros(_ n: Int) -> UnsafeMutablePointer<Float> { copy([Float](repeating: 0, count: n)) }
        inputRing = zeros(2 * kernel * mels)
        historySlots = model.blocks.map { 2 * $0.dilation + 1 }
        histories = historySlots.map { zeros($0 * model.channels) }
        h = zeros(c)
        y = zeros(c)
        mean = copy(model.mean)
        invStd = copy(model.invStd)
        w0 = copy(model.inputWeight)
        b0 = copy(model.inputBias)
        dw = model.blocks.map { copy($0.depthwise) }
        dwb = model.blocks.map { copy($0.depthwiseBias) }
        pw = model.blocks.map { copy($0.pointwise) }
        pwb = model.blocks.map { copy($0.pointwiseBias) }
        dilations = model.blocks.map(\.dilation)
        wh = copy(model.headWeight)
        bh = model.headBias
        self.owned = owned
    }

    deinit { for p in owned { p.deallocate() } }

    /// Back to the start-of-stream state (all history zero).
    public func reset() {
        inputRing.update(repeating: 0, count: 2 * kernel * mels)
        for (p, slots) in zip(histories, historySlots) { p.update(repeating: 0, count: slots * c) }
        inputHead = 0
        framesSeen = 0
        steps = 0
    }

    /// Adds one frame of `mels` log-mel values. Returns the logit when this frame completes a
    /// step (score = sigmoid(logit)), nil otherwise.
    public func push(_ frame: UnsafeBufferPointer<Float>) -> Float? {
        precondition(frame.count == mels, "WakeInference.push: \(frame.count) values, model wants \(mels)")
        // Normalise into both copies of the ring slot.
        let slot = inputHead
        let a = inputRing + slot * mels, b = inputRing + (slot + kernel) * mels
        for m in 0..<mels {
            let v = (frame[m] - mean[m]) * invStd[m]
            a[m] = v
            b[m] = v
        }
        inputHead = (inputHead + 1) % kernel
        framesSeen += 1
        // Step s ends at frame stride·s + (stride − 1): the conv's last tap.
        guard framesSeen % model.strideFrames == 0 else { return nil }
        return step()
    }

    /// Convenience for arrays.
    public func push(_ frame: [Float]) -> Float? { frame.withUnsafeBufferPointer { push($0) } }

    private func step() -> Float {
        let s = steps
        steps += 1
        // Oldest of the last `kernel` frames is at inputHead (the ring just advanced past it).
        let window = UnsafePointer(inputRing + inputHead * mels)
        let width = kernel * mels
        for o in 0..<c {
            h[o] = max(0, b0[o] + dot(UnsafePointer(w0 + o * width), window, width))
        }
        for blk in 0..<dilations.count {
            let d = dilations[blk], slots = historySlots[blk], hist = histories[blk]
            let cur = s % slots
            (hist + cur * c).update(from: h, count: c)
            // Before the stream started the history is zero, which the zeroed ring already is.
            let p1 = hist + ((s - d) % slots + slots) % slots * c
            let p2 = hist + ((s - 2 * d) % slots + slots) % slots * c
            let k = dw[blk], kb = dwb[blk]
            for ch in 0..<c {
                let v = kb[ch] + k[3 * ch] * p2[ch] + k[3 * ch + 1] * p1[ch] + k[3 * ch + 2] * h[ch]
                y[ch] = max(0, v)
            }
            let w = pw[blk], wb = pwb[blk]
            let yp = UnsafePointer(y)
            for o in 0..<c {
                h[o] += max(0, wb[o] + dot(UnsafePointer(w + o * c), yp, c))
            }
        }
        return bh + dot(UnsafePointer(wh), UnsafePointer(h), c)
    }
}

/// Dot product of two float runs, eight lanes at a time.
@inline(__always)
func dot(_ a: UnsafePointer<Float>, _ b: UnsafePointer<Float>, _ n: Int) -> Float {
    var acc = SIMD8<Float>()
    var i = 0
    let ra = UnsafeRawPointer(a), rb = UnsafeRawPointer(b)
    while i + 8 <= n {
        acc += ra.loadUnaligned(fromByteOffset: i * 4, as: SIMD8<Float>.self)
            * rb.loadUnaligned(fromByteOffset: i * 4, as: SIMD8<Float>.self)
        i += 8
    }
    var sum = acc.sum()
    while i < n {
        sum += a[i] * b[i]
        i += 1
    }
    return sum
}

/// Logistic function, the score of a logit.
@inline(__always)
public func wakeScore(logit: Float) -> Float { 1 / (1 + expf(-logit)) }

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
