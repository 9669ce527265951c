// WakeHead: one trigger's small network over the front end's embedding history: dense layers
// with ReLU, then one logit (the mean of the members' logits for an ensemble). Scratch space of
// its own; one owner (not Sendable).

import COpenBLAS

final class WakeHead {
    let model: WakeModel
    private let a: UnsafeMutablePointer<Float>, b: UnsafeMutablePointer<Float>

    init(model: WakeModel) {
        self.model = model
        let widest = model.layers.map(\.outputs).max() ?? 1
        a = .allocate(capacity: widest)
        a.initialize(repeating: 0, count: widest)
        b = .allocate(capacity: widest)
        b.initialize(repeating: 0, count: widest)
    }

    deinit {
        a.deallocate()
        b.deallocate()
    }

    /// The logit for the newest step. `history`: EmbeddingFrontEnd.historyLength embeddings,
    /// oldest first; the head reads the last `window` of them.
    func logit(history: UnsafeBufferPointer<Float>) -> Float {
        if model.members.count == 1 { return logit(history: history, layers: model.members[0]) }
        var sum: Float = 0
        for layers in model.members { sum += logit(history: history, layers: layers) }
        return sum / Float(model.members.count)
    }

    private func logit(history: UnsafeBufferPointer<Float>, layers: [WakeModel.Layer]) -> Float {
        var src = UnsafePointer(history.baseAddress! + (history.count - layers[0].inputs))
        var dst = a, other = b
        var out: Float = 0
        for (li, layer) in layers.enumerated() {
            layer.weight.withUnsafeBufferPointer { w in
                cblas_sgemv(CblasRowMajor, CblasNoTrans, Int32(layer.outputs), Int32(layer.inputs), 1,
                            w.baseAddress, Int32(layer.inputs), src, 1, 0, dst, 1)
            }
            let last = li == layers.count - 1
            for i in 0..<layer.outputs {
                let v = dst[i] + layer.bias[i]
                dst[i] = last ? v : max(v, 0)
            }
            out = dst[0]
            src = UnsafePointer(dst)
            swap(&dst, &other)
        }
        return out
    }
}
