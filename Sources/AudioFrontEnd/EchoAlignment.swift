// EchoAlignment: where each clip's echo sits behind its reference, read from the echo itself, so
// that the detectors' linear canceller meets every clip at the alignment it learnt on the first.
// A clip's reference is placed by PulseAudio's timing, which leaves the echo 28-39 ms behind it,
// a different amount for each clip (WakeOverReplyTests' room, GCC-PHAT over whole replies), and
// speexdsp learns any move of its path as a new path: it was still learning when a trigger came
// 1.5-3.5 s into a reply, and missed triggers came with the echo 2-5 dB down. The first clip
// the filter hears is played to it as it comes, and its echo's delay becomes the target; on every
// later clip the filter is held (its reference reads silence: it neither cancels nor learns) until
// that clip's delay is known, then gets the reference moved by the difference, so the echo lands
// where the filter learnt it. Delays are measured by GCC-PHAT over the last 0.4 s every 0.2 s from
// 0.6 s into a clip; two windows in a row that agree lock it. A clip whose delay cannot be read in
// 2 s gets the last delay measured. A pure value: samples in, decisions out.

import Foundation

public struct EchoAlignment: Sendable {
    /// Where the filter learnt the echo: the first locked clip's delay (nil: none locked yet).
    public private(set) var target: Int?
    /// The longest echo delay looked for (200 ms).
    public static let maxLag = 3_200
    static let window = 6_400, hop = 3_200, firstAt = 9_600, giveUpAt = 32_000
    /// Two windows in a row within this many samples of each other lock the delay.
    static let agreement = 2
    /// The correlation peak over the median of its magnitudes, for a window to count.
    static let minPeakRatio = 50.0

    /// This clip's echo delay behind its reference (samples), once locked.
    public private(set) var locked: Int?
    /// The last delay locked on any clip.
    public private(set) var lastLocked: Int?
    private var samples = 0
    private var nextWindowAt = EchoAlignment.firstAt
    private var previous: Int?
    private var near: [Int16] = []
    private var far: [Int16] = []

    public init() {}

    /// A new clip begins: its delay is to be read again.
    public mutating func beginClip() {
        locked = nil
        samples = 0
        nextWindowAt = Self.firstAt
        previous = nil
        near.removeAll(keepingCapacity: true)
        far.removeAll(keepingCapacity: true)
    }

    /// How many samples the reference is delayed before the linear filter, negative: read ahead
    /// (nil: hold the filter). 0 until a first clip's delay is known.
    public var referenceDelay: Int? {
        guard let target else { return 0 }
        if let d = locked ?? (samples >= Self.giveUpAt ? lastLocked : nil) { return d - target }
        return nil
    }

    /// One capture frame and the clip's reference for it (undelayed, continuous within the clip).
    public mutating func push(near n: [Int16], far f: [Int16]) {
        guard locked == nil, samples < Self.giveUpAt else { samples += n.count; return }
        samples += n.count
        near += n
        far += f
        if near.count > Self.window {
            near.removeFirst(near.count - Self.window)
            far.removeFirst(far.count - Self.window)
        }
        // Windows end at 0.6 s, 0.8 s, … into the clip.
        guard samples >= nextWindowAt, near.count == Self.window else { return }
        nextWindowAt += Self.hop
        guard let d = Self.delay(near: near, far: far) else { previous = nil; return }
        if let p = previous, abs(p - d) <= Self.agreement {
            locked = d
            lastLocked = d
            if target == nil { target = d }
        }
        previous = d
    }

    /// One capture frame: learns from it and gives the linear filter's reference for it.
    /// `end`: where the frame ends in the clip, run on one frame per frame from the clip's start;
    /// `read(e)`: the clip's `near.count` samples ending at index `e` (zeros outside what played).
    public mutating func reference(near n: [Int16], end: Int, read: (Int) -> [Int16]) -> [Int16] {
        let asPlayed = read(end)
        push(near: n, far: asPlayed)
        guard let d = referenceDelay else { return [Int16](repeating: 0, count: n.count) }
        return d == 0 ? asPlayed : read(end - d)
    }

    /// The lag (samples, 0..<maxLag) at which `near` best follows `far`, by GCC-PHAT; nil when the
    /// peak does not stand out (no echo, or the reference silent).
    public static func delay(near: [Int16], far: [Int16]) -> Int? {
        let farEnergy = far.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(max(1, far.count))
        guard farEnergy > 1e4 else { return nil }
        let n = 1 << Int(ceil(log2(Double(near.count + maxLag))))
        var a = FFT.Complex(count: n), b = FFT.Complex(count: n)
        for i in near.indices { a.re[i] = Double(near[i]) }
        for i in far.indices { b.re[i] = Double(far[i]) }
        FFT.transform(&a, inverse: false)
        FFT.transform(&b, inverse: false)
        for k in 0..<n {
            // near × conj(far), whitened
            let re = a.re[k] * b.re[k] + a.im[k] * b.im[k]
            let im = a.im[k] * b.re[k] - a.re[k] * b.im[k]
            let m = (re * re + im * im).squareRoot() + 1e-9
            a.re[k] = re / m
            a.im[k] = im / m
        }
        FFT.transform(&a, inverse: true)
        let cc = Array(a.re[0..<maxLag])
        guard let best = cc.indices.max(by: { cc[$0] < cc[$1] }) else { return nil }
        let magnitudes = cc.map(abs).sorted()
        let median = magnitudes[magnitudes.count / 2]
        return cc[best] / max(median, 1e-12) >= minPeakRatio ? best : nil
    }
}

/// A radix-2 complex FFT, enough for the occasional correlation above (a few per clip).
enum FFT {
    struct Complex {
        var re: [Double], im: [Double]
        init(count: Int) { re = [Double](repeating: 0, count: count); im = re }
    }

    /// In place; `count` a power of two. The inverse is not scaled (only the peak's place matters).
    static func transform(_ x: inout Complex, inverse: Bool) {
        let n = x.re.count
        var j = 0
        for i in 1..<n {
            var bit = n >> 1
            while j & bit != 0 { j ^= bit; bit >>= 1 }
            j |= bit
            if i < j { x.re.swapAt(i, j); x.im.swapAt(i, j) }
        }
        var len = 2
        while len <= n {
            let angle = (inverse ? 2 : -2) * Double.pi / Double(len)
            let wr = cos(angle), wi = sin(angle)
            var start = 0
            while start < n {
                var cr = 1.0, ci = 0.0
                for k in 0..<(len / 2) {
                    let u = start + k, v = u + len / 2
                    let tr = x.re[v] * cr - x.im[v] * ci
                    let ti = x.re[v] * ci + x.im[v] * cr
                    x.re[v] = x.re[u] - tr; x.im[v] = x.im[u] - ti
                    x.re[u] += tr; x.im[u] += ti
                    let ncr = cr * wr - ci * wi
                    ci = cr * wi + ci * wr
                    cr = ncr
                }
                start += len
            }
            len <<= 1
        }
    }
}
