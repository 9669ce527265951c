// RealFFT: the power spectrum of a real frame, in Double. The feature extractor's only use is
// 512 points every 10 ms, so it is written for that: the even/odd samples packed as one complex
// sequence through Audio's ComplexFFT at half size, then one split pass to the N/2+1 bins.

import Audio

/// Power spectrum |X_k|² (k = 0 … N/2) of a real sequence of N samples, N a power of two ≥ 4.
/// Holds its twiddles and scratch; one owner (not `Sendable`), no allocation per call.
final class RealFFT {
    /// Transform length N in samples.
    let size: Int
    private let half: Int
    private let complex: ComplexFFT
    /// cos/sin of -2πk/N for the split pass, k ≤ N/2.
    private let splitCos: [Double], splitSin: [Double]
    private var re: [Double], im: [Double]

    init(size: Int) {
        precondition(size >= 4 && size & (size - 1) == 0, "RealFFT: size \(size) is not a power of two ≥ 4")
        self.size = size
        half = size / 2
        complex = ComplexFFT(size: half)
        let h = half
        splitCos = (0...h).map { cos(-2 * Double.pi * Double($0) / Double(size)) }
        splitSin = (0...h).map { sin(-2 * Double.pi * Double($0) / Double(size)) }
        re = [Double](repeating: 0, count: h)
        im = [Double](repeating: 0, count: h)
    }

    /// Writes |X_k|² for k = 0 … N/2 into `power` (N/2 + 1 values) from `input` (N samples).
    func powerSpectrum(_ input: UnsafeBufferPointer<Double>, into power: UnsafeMutableBufferPointer<Double>) {
        precondition(input.count == size && power.count == half + 1)
        let h = half
        re.withUnsafeMutableBufferPointer { re in
            im.withUnsafeMutableBufferPointer { im in
                // Pack z[n] = x[2n] + i·x[2n+1] and transform it at half size.
                for n in 0..<h {
                    re[n] = input[2 * n]
                    im[n] = input[2 * n + 1]
                }
                complex.forward(re, im)
                // Split: X[k] = E[k] + W^k·O[k], with E = (Z[k] + conj Z[h-k]) / 2 and
                // O = (Z[k] - conj Z[h-k]) / 2i, Z[h] ≡ Z[0].
                splitCos.withUnsafeBufferPointer { wc in
                    splitSin.withUnsafeBufferPointer { ws in
                        for k in 0...h {
                            let a = k == h ? 0 : k
                            let b = k == 0 ? 0 : h - k
                            let zr = re[a], zi = im[a], cr = re[b], ci = -im[b]
                            let er = 0.5 * (zr + cr), ei = 0.5 * (zi + ci)
                            // (Z - conj) / 2i = (dI/2) - i (dR/2)
                            let dr = zr - cr, di = zi - ci
                            let or = 0.5 * di, oi = -0.5 * dr
                            let xr = er + wc[k] * or - ws[k] * oi
                            let xi = ei + wc[k] * oi + ws[k] * or
                            power[k] = xr * xr + xi * xi
                        }
                    }
                }
            }
        }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
