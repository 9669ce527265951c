// WakeVerifier: how close the window a trigger's head reads is to the household's takes
// (WakeEnrollment), in two views, the lower of the two: the raw embeddings (the voice, the room
// and the word together) and the head's first layer (what the head makes of them: the word).
// Each view is the best cosine over the takes. Chosen on held-out voices over either view alone
// (models/EVALUATION.md, "Enrollment"). One owner per detector; computed only for steps between
// the enrollment's floor and the threshold.

import COpenBLAS

struct WakeVerifier {
    let enrollment: WakeEnrollment
    /// Per member, the head's first layer: weight [out][in], bias, sizes.
    private let layers: [WakeModel.Layer]
    private let raw: [[Float]]
    private let hidden: [[Float]]
    private var scratch: [Float]

    /// nil when the enrollment does not fit the model (WakeEnrollment.mismatch says why).
    init?(_ enrollment: WakeEnrollment, model: WakeModel) {
        guard enrollment.mismatch(with: model) == nil else { return nil }
        let first = model.members.map { $0[0] }
        var tmp = [Float](repeating: 0, count: first.reduce(0) { $0 + $1.outputs })
        var h: [[Float]] = []
        for t in enrollment.templates {
            t.withUnsafeBufferPointer { Self.firstLayer(first, $0, into: &tmp) }
            h.append(Self.unit(tmp))
        }
        self.enrollment = enrollment
        layers = first
        scratch = tmp
        raw = enrollment.templates.map(Self.unit)
        hidden = h
    }

    /// The similarity of `window` (windowEmbeddings × embeddingSize, oldest first) to the takes.
    mutating func nearest(_ window: UnsafeBufferPointer<Float>) -> Float {
        let r = Self.bestCosine(raw, window)
        Self.firstLayer(layers, window, into: &scratch)
        let h = scratch.withUnsafeBufferPointer { Self.bestCosine(hidden, $0) }
        return min(r, h)
    }

    /// Every member's first-layer pre-activations (W·x + b), one after another.
    static func firstLayer(_ layers: [WakeModel.Layer], _ x: UnsafeBufferPointer<Float>, into out: inout [Float]) {
        var offset = 0
        out.withUnsafeMutableBufferPointer { o in
            for l in layers {
                let dst = o.baseAddress! + offset
                for i in 0..<l.outputs { dst[i] = l.bias[i] }
                l.weight.withUnsafeBufferPointer { w in
                    cblas_sgemv(CblasRowMajor, CblasNoTrans, Int32(l.outputs), Int32(l.inputs), 1,
                                w.baseAddress, Int32(l.inputs), x.baseAddress! + (x.count - l.inputs), 1, 1, dst, 1)
                }
                offset += l.outputs
            }
        }
    }

    /// The best cosine similarity between `x` and any of `units` (unit length); −1 when `x` is all zeros.
    static func bestCosine(_ units: [[Float]], _ x: UnsafeBufferPointer<Float>) -> Float {
        var norm: Float = 0
        for v in x { norm += v * v }
        guard norm > 0 else { return -1 }
        let scale = 1 / norm.squareRoot()
        var best: Float = -1
        for t in units where t.count == x.count {
            var dot: Float = 0
            for i in 0..<t.count { dot += t[i] * x[i] }
            best = max(best, dot * scale)
        }
        return best
    }

    static func unit(_ x: [Float]) -> [Float] {
        let n = x.reduce(Float(0)) { $0 + $1 * $1 }.squareRoot()
        return n > 0 ? x.map { $0 / n } : x
    }
}
