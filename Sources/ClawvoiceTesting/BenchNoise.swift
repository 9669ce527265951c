// BenchNoise: the noises of clawvoice-bench --vad and --endpoint and of the endpoint tests,
// from generators of their own (not the voice detector's training script's): white, pink,
// brown, mains hum, a fan, chord music, clatter and alarm beeps, each at unit RMS from a seed.

public import Audio
import Foundation

public enum BenchNoise: String, CaseIterable, Sendable {
    case white, pink, brown, hum, fan, music, clatter, alarm

    /// `count` samples at unit RMS.
    public func samples(_ count: Int, rng: inout SplitMix64) -> [Double] {
        var x = [Double](repeating: 0, count: count)
        func gauss() -> Double {
            let u = max(Double(rng.next() >> 11) / Double(1 << 53), 1e-12), v = Double(rng.next() >> 11) / Double(1 << 53)
            return sqrt(-2 * log(u)) * cos(2 * .pi * v)
        }
        func uniform(_ a: Double, _ b: Double) -> Double { a + (b - a) * Double(rng.next() >> 11) / Double(1 << 53) }
        let sr = 16_000.0
        switch self {
        case .white:
            for i in 0..<count { x[i] = gauss() }
        case .pink:   // Paul Kellet's filter
            var b = [Double](repeating: 0, count: 7)
            for i in 0..<count {
                let w = gauss()
                b[0] = 0.99886 * b[0] + w * 0.0555179; b[1] = 0.99332 * b[1] + w * 0.0750759
                b[2] = 0.96900 * b[2] + w * 0.1538520; b[3] = 0.86650 * b[3] + w * 0.3104856
                b[4] = 0.55000 * b[4] + w * 0.5329522; b[5] = -0.7616 * b[5] - w * 0.0168980
                x[i] = b[0] + b[1] + b[2] + b[3] + b[4] + b[5] + b[6] + w * 0.5362
                b[6] = w * 0.115926
            }
        case .brown:
            var y = 0.0
            for i in 0..<count { y = 0.998 * y + gauss(); x[i] = y }
        case .hum:
            let f0 = [50.0, 60.0][Int(rng.next() % 2)]
            let amps = (1...8).map { _ in uniform(0.1, 1) }
            for i in 0..<count {
                let t = Double(i) / sr
                for (h, a) in amps.enumerated() { x[i] += a / Double(h + 1) * sin(2 * .pi * f0 * Double(h + 1) * t) }
            }
        case .fan:    // low rumble, a blade tone, a slow wobble
            var y = 0.0
            let blade = uniform(80, 220), wobble = uniform(0.3, 1.5)
            for i in 0..<count {
                let t = Double(i) / sr
                y = 0.97 * y + 0.3 * gauss()
                x[i] = (y + 0.4 * sin(2 * .pi * blade * t)) * (1 + 0.25 * sin(2 * .pi * wobble * t))
            }
        case .music:  // chords of three notes, three partials each, decaying, every 0.2–0.8 s
            var pos = 0
            while pos < count {
                let n = min(count - pos, Int(uniform(0.2, 0.8) * sr))
                let root = 110 * pow(2, Double(rng.next() % 24) / 12), decay = uniform(0.1, 0.5) * sr
                let notes = [0.0, [3.0, 4.0][Int(rng.next() % 2)], 7.0].map { root * pow(2, $0 / 12) }
                for k in 0..<n {
                    let t = Double(k) / sr, env = exp(-Double(k) / decay)
                    for f in notes { for h in 1...3 { x[pos + k] += env * sin(2 * .pi * f * Double(h) * t) / Double(h) } }
                }
                pos += n
            }
        case .clatter: // dishes and keys: decaying bursts at random times
            var pos = 0
            for i in 0..<count { x[i] = 0.02 * gauss() }
            while true {
                pos += Int(-log(max(uniform(0, 1), 1e-9)) * 0.3 * sr) + 80
                guard pos < count else { break }
                let n = min(count - pos, Int(uniform(0.03, 0.3) * sr)), tau = uniform(0.005, 0.08) * sr
                let ring = [uniform(1000, 5000), uniform(1000, 5000)], a = uniform(0.5, 3)
                for k in 0..<n {
                    let t = Double(k) / sr
                    x[pos + k] += a * exp(-Double(k) / tau) * (0.6 * gauss() + sin(2 * .pi * ring[0] * t) + sin(2 * .pi * ring[1] * t))
                }
            }
        case .alarm:  // beeps: 0.1–0.6 s tones with gaps
            var pos = 0
            while pos < count {
                let n = min(count - pos, Int(uniform(0.1, 0.6) * sr)), f = uniform(500, 3000)
                for k in 0..<n { x[pos + k] = sin(2 * .pi * f * Double(k) / sr) }
                pos += n + Int(uniform(0.05, 0.4) * sr)
            }
        }
        let rms = sqrt(x.reduce(0) { $0 + $1 * $1 } / Double(max(count, 1)))
        return x.map { $0 / max(rms, 1e-12) }
    }
}
