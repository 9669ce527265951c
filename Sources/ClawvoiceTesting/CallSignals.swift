// The signals the realtime call tests and clawvoice-bench --calls speak into a call.

import Foundation

/// A voiced, speech-like test signal: 180 Hz with harmonics under a syllable envelope.
public func speechLike(ms: Int, rate: Int, dbfs: Double = -14) -> [Int16] {
    let n = ms * rate / 1000
    let amp = pow(10, dbfs / 20) * 32767
    return (0..<n).map { i in
        let t = Double(i) / Double(rate)
        let env = 0.6 + 0.4 * sin(2 * .pi * 4 * t)
        let v = sin(2 * .pi * 180 * t) + 0.5 * sin(2 * .pi * 360 * t) + 0.25 * sin(2 * .pi * 540 * t)
        return Int16(max(-32767, min(32767, amp * env * v / 1.75)))
    }
}
