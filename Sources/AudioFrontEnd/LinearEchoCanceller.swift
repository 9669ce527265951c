// The detectors' echo canceller (issue 14): a linear one, in pure Swift, with no nonlinear
// suppression after it. webrtc's canceller (AudioFrontEnd) suppresses what its linear stage
// leaves, and in double talk it takes the user's voice with the echo; the wake and stop heads
// need the user's voice whole more than the last decibels of echo gone. This owns that path:
// a partitioned-block frequency-domain adaptive filter (overlap-save, 64-sample blocks, NLMS per
// bin normalised by the far end's power over the filter's span, 120 ms from the reference on: the
// rooms' 40 ms and the configured 60 ms both inside) on the code base's one FFT (Audio's ComplexFFT).
//
// Two filters: the background one adapts; the foreground one, whose error is the output, only
// takes the background's coefficients when they have cancelled clearly better over the last
// ~100 ms, and a background that has drifted far off is set back to the foreground. In double
// talk (the caller says so, from the suppressing canceller's verdict on the same frame: `nearVoice`)
// both hold still, so the output filter is the one from before the user spoke and passes their
// voice untouched. (An NLMS step this large, left adapting, learns to cancel part of the user.)

import Audio
import Foundation

/// One linear echo canceller for one 16 kHz mono stream: feed the far end and the microphone
/// together, sample-aligned as the capture sees them (the far end being what was playing when
/// each microphone sample was recorded); the echo may lag it by 0 to `filterMs`.
public final class LinearEchoCanceller {
    public static let blockSize = 64
    static let fftSize = 128
    static let bins = 65
    public let partitions: Int
    let step: Float
    let holdBlocks: Int
    private let fft = BlockFFT(size: LinearEchoCanceller.fftSize)

    // Far-end spectra, newest first from `head`: partition p is block (now − p).
    private let xr: UnsafeMutablePointer<Float>, xi: UnsafeMutablePointer<Float>
    // Foreground (output) and background (adapting) filters, partitions × bins.
    private let fr: UnsafeMutablePointer<Float>, fi: UnsafeMutablePointer<Float>
    private let br: UnsafeMutablePointer<Float>, bi: UnsafeMutablePointer<Float>
    private var head = 0
    private var blocks = 0, farBlocks = 0
    private var farPrev = [Float](repeating: 0, count: LinearEchoCanceller.blockSize)
    private var farPower = [Float](repeating: 0, count: LinearEchoCanceller.bins)
    private var foregroundError: Float = 0, backgroundError: Float = 0
    // Blocks left of holding still after the last near-end voice.
    private var doubleTalkHold = 0
    private var nearPending: [Int16] = [], farPending: [Int16] = [], output: [Int16] = []
    // FFT work space.
    private var wr = [Float](repeating: 0, count: LinearEchoCanceller.fftSize)
    private var wi = [Float](repeating: 0, count: LinearEchoCanceller.fftSize)

    /// Microphone and residual energy over the last second (for ERLE, in sample units squared).
    public private(set) var recentNear: Double = 0
    public private(set) var recentOut: Double = 0
    /// How often the output filter took the adapting one's coefficients, and was set back.
    public private(set) var copies = 0, resets = 0
    /// Blocks in which the adapting filter held still for the near end's voice.
    public private(set) var doubleTalkBlocks = 0

    /// `filterMs`: the span of echo delays covered (the room's path plus any misalignment of the
    /// reference), `step`: the NLMS step of the adapting filter (0…1), `holdMs`: how long both
    /// filters hold still after the last frame said to hold the near end's voice. The step and
    /// the hold were chosen on one 2 min echo-room recording (`clawvoice-bench --echo-only
    /// --recording`): 0.8 cancels 4 dB more alone, but in double talk what the hint misses
    /// (pauses inside the user's words; most of a user at the echo's level, whom webrtc
    /// suppresses) teaches it the user, and "computer" was heard 9 of 27 times at 0 dB against
    /// 17 with 0.3 and a 300 ms hold.
    public init(filterMs: Int = 120, step: Float = 0.3, holdMs: Int = 300) {
        partitions = max(1, (filterMs * 16 + Self.blockSize - 1) / Self.blockSize)
        self.step = step
        holdBlocks = max(1, holdMs * 16 / Self.blockSize)
        let n = partitions * Self.bins
        func zeros() -> UnsafeMutablePointer<Float> {
            let p = UnsafeMutablePointer<Float>.allocate(capacity: n)
            p.initialize(repeating: 0, count: n)
            return p
        }
        xr = zeros(); xi = zeros(); fr = zeros(); fi = zeros(); br = zeros(); bi = zeros()
    }

    deinit { for p in [xr, xi, fr, fi, br, bi] { p.deallocate() } }

    /// The microphone samples with the linear estimate of the echo taken out, same length. With
    /// lengths that are multiples of 64 (the capture's 20 ms frames) there is no added delay;
    /// otherwise the output runs up to one block behind. `nearTalking`: the near end's voice is
    /// in these samples (double talk while the far end plays): the adapting filter holds still
    /// from here until `holdMs` after the last such call, and the output filter takes nothing from
    /// it, or both would learn the user's voice as echo (see `nearVoice`).
    public func process(near: [Int16], far: [Int16], nearTalking: Bool = false) -> [Int16] {
        precondition(near.count == far.count, "near and far must be sample-aligned")
        if nearTalking { doubleTalkHold = holdBlocks }
        nearPending += near
        farPending += far
        var offset = 0
        while nearPending.count - offset >= Self.blockSize {
            block(near: nearPending[offset..<offset + Self.blockSize], far: farPending[offset..<offset + Self.blockSize])
            offset += Self.blockSize
        }
        nearPending.removeFirst(offset)
        farPending.removeFirst(offset)
        if output.count < near.count { output.insert(contentsOf: [Int16](repeating: 0, count: near.count - output.count), at: 0) }
        let out = Array(output.prefix(near.count))
        output.removeFirst(near.count)
        return out
    }

    /// The near end's voice from a suppressing canceller's output on the same frame (webrtc's, in
    /// CaptureCleaner): it takes the echo 45 dB down and lets a talking user through, so output
    /// above −55 dBFS that is also less than 25 dB under the microphone is the user, not echo.
    public static func nearVoice(microphone: [Int16], suppressed: [Int16]) -> Bool {
        func power(_ s: [Int16]) -> Double { s.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(max(s.count, 1)) }
        let out = power(suppressed), mic = power(microphone)
        return out > 32_768.0 * 32_768.0 * 3.2e-6 && out * 316 > mic
    }

    /// Echo return loss enhancement over roughly the last second, in dB.
    public var erleDb: Double { 10 * log10(max(recentNear, 1) / max(recentOut, 1)) }

    private func block(near: ArraySlice<Int16>, far: ArraySlice<Int16>) {
        let n = Self.blockSize, m = Self.fftSize, k = Self.bins, p = partitions
        // The newest far-end spectrum: the last two blocks (overlap-save).
        head = (head + p - 1) % p
        for j in 0..<n {
            wr[j] = farPrev[j]
            let v = Float(far[far.startIndex + j]) / 32_768
            wr[n + j] = v
            farPrev[j] = v
        }
        for j in 0..<m { wi[j] = 0 }
        fft.forward(&wr, &wi)
        let x0 = head * k
        for b in 0..<k { xr[x0 + b] = wr[b]; xi[x0 + b] = wi[b] }

        // Both filters' echo estimates in one inverse transform (each is real: the foreground in
        // the real part, the background in the imaginary part).
        var yfr = [Float](repeating: 0, count: k), yfi = [Float](repeating: 0, count: k)
        var ybr = [Float](repeating: 0, count: k), ybi = [Float](repeating: 0, count: k)
        for q in 0..<p {
            let xo = ((head + q) % p) * k, wo = q * k
            for b in 0..<k {
                let ar = xr[xo + b], ai = xi[xo + b]
                yfr[b] += fr[wo + b] * ar - fi[wo + b] * ai
                yfi[b] += fr[wo + b] * ai + fi[wo + b] * ar
                ybr[b] += br[wo + b] * ar - bi[wo + b] * ai
                ybi[b] += br[wo + b] * ai + bi[wo + b] * ar
            }
        }
        // Z = Yf + i·Yb over the full (Hermitian) spectra.
        for b in 0..<k {
            wr[b] = yfr[b] - ybi[b]
            wi[b] = yfi[b] + ybr[b]
        }
        for b in 1..<(k - 1) {
            // Yf[m−b] = conj(Yf[b]), Yb likewise.
            wr[m - b] = yfr[b] + ybi[b]
            wi[m - b] = -yfi[b] + ybr[b]
        }
        fft.inverse(&wr, &wi)
        var ef = [Float](repeating: 0, count: n), eb = [Float](repeating: 0, count: n)
        var sd: Float = 0, sf: Float = 0, sb: Float = 0
        for j in 0..<n {
            let d = Float(near[near.startIndex + j]) / 32_768
            ef[j] = d - wr[n + j]
            eb[j] = d - wi[n + j]
            sd += d * d; sf += ef[j] * ef[j]; sb += eb[j] * eb[j]
        }
        let holding = doubleTalkHold > 0
        if holding { doubleTalkHold -= 1; doubleTalkBlocks += 1 }
        // A fresh filter learns the room at a larger step over its first 2 s of far-end sound.
        var sx: Float = 0
        for j in 0..<n { sx += farPrev[j] * farPrev[j] }
        if sx > Float(n) * 1e-5 && !holding { farBlocks += 1 }   // far end above −50 dBFS
        let adapting = holding ? 0 : farBlocks < 500 ? max(step, 0.8) : step

        // The background's update: E = FFT([0, e_b]); W_q += µ·conj(X_q)·E / Σ|X|².
        for j in 0..<n { wr[j] = 0; wr[n + j] = eb[j] }
        for j in 0..<m { wi[j] = 0 }
        fft.forward(&wr, &wi)
        let floor: Float = Float(p) * Float(m) * 1e-6   // −60 dBFS of far-end noise per bin
        for b in 0..<k {
            var s: Float = 0
            for q in 0..<p { let o = q * k + b; s += xr[o] * xr[o] + xi[o] * xi[o] }
            farPower[b] = s + floor
        }
        for q in 0..<p {
            let xo = ((head + q) % p) * k, wo = q * k
            for b in 0..<k {
                let g = adapting / farPower[b]
                let er = wr[b] * g, ei = wi[b] * g
                let ar = xr[xo + b], ai = xi[xo + b]
                br[wo + b] += ar * er + ai * ei
                bi[wo + b] += ar * ei - ai * er
            }
        }
        // Keep one partition a block causal (its impulse response in the first half only).
        if !holding { constrain(partition: blocks % p) }
        blocks += 1

        // Which filter cancels better over the last ~100 ms.
        foregroundError = 0.85 * foregroundError + sf
        backgroundError = 0.85 * backgroundError + sb
        if holding {
            // Double talk: both filters as they were.
        } else if backgroundError < 0.7 * foregroundError && blocks > p {
            (fr).update(from: br, count: p * k)
            (fi).update(from: bi, count: p * k)
            foregroundError = backgroundError
            copies += 1
        } else if backgroundError > 4 * foregroundError && foregroundError > 0 {
            br.update(from: fr, count: p * k)
            bi.update(from: fi, count: p * k)
            backgroundError = foregroundError
            resets += 1
        }

        recentNear = 0.996 * recentNear + Double(sd) * 32_768 * 32_768
        recentOut = 0.996 * recentOut + Double(sf) * 32_768 * 32_768
        for j in 0..<n { output.append(Int16(clamping: Int((ef[j] * 32_768).rounded()))) }
    }

    private func constrain(partition q: Int) {
        let n = Self.blockSize, m = Self.fftSize, k = Self.bins
        let o = q * k
        for b in 0..<k { wr[b] = br[o + b]; wi[b] = bi[o + b] }
        for b in 1..<(k - 1) { wr[m - b] = br[o + b]; wi[m - b] = -bi[o + b] }
        fft.inverse(&wr, &wi)
        for j in n..<m { wr[j] = 0 }
        for j in 0..<m { wi[j] = 0 }
        fft.forward(&wr, &wi)
        for b in 0..<k { br[o + b] = wr[b]; bi[o + b] = wi[b] }
    }
}

/// The canceller's Float blocks through the code base's one FFT (Audio's ComplexFFT, in Double).
final class BlockFFT {
    private let fft: ComplexFFT
    private var re: [Double], im: [Double]

    init(size: Int) {
        fft = ComplexFFT(size: size)
        re = [Double](repeating: 0, count: size)
        im = [Double](repeating: 0, count: size)
    }

    func forward(_ r: inout [Float], _ i: inout [Float]) { run(&r, &i, inverse: false) }
    func inverse(_ r: inout [Float], _ i: inout [Float]) { run(&r, &i, inverse: true) }

    private func run(_ r: inout [Float], _ i: inout [Float], inverse: Bool) {
        let n = fft.size
        re.withUnsafeMutableBufferPointer { dr in
            im.withUnsafeMutableBufferPointer { di in
                for k in 0..<n { dr[k] = Double(r[k]); di[k] = Double(i[k]) }
                if inverse { fft.inverse(dr, di) } else { fft.forward(dr, di) }
                for k in 0..<n { r[k] = Float(dr[k]); i[k] = Float(di[k]) }
            }
        }
    }
}
