// WakeEnrollment: a household's own takes of one trigger (`clawvoice wake enroll`), kept as the
// windows of front-end embeddings the trigger's head read at each take's best step. The rule: a
// step is over the bar when the head's score reaches the model's threshold, or when it reaches
// a lower floor AND the window the head reads now is close to one of the takes' (WakeVerifier
// measures how close). Pure values; the file lives under the state directory (WakeEnrollmentStore).

import Foundation

public struct WakeEnrollment: Codable, Sendable, Equatable {
    public static let format = "clawvoice-wake-enrollment"

    public var format = WakeEnrollment.format
    public var version = 1
    /// The trigger as the gateway spells it.
    public var phrase: String
    /// The front end the windows came from; another front end's windows are not comparable.
    public var frontEndSHA256: String
    /// Embeddings per window (the head's windowEmbeddings) and their size.
    public var windowEmbeddings: Int
    public var embeddingSize: Int
    /// Score (0…1) a step needs before its window is compared with the takes.
    public var floor: Double
    /// Similarity (−1…1, WakeVerifier.nearest) to the takes that lets a step over the floor count.
    public var similarity: Double
    /// One window per take, as the head read it (windowEmbeddings × embeddingSize, oldest first).
    public var templates: [[Float]]
    /// The take files beside the enrollment, for people (and `wake status`).
    public var takes: [String]

    /// The rule's defaults, chosen on held-out voices (models/EVALUATION.md, "Enrollment").
    public static let defaultFloor = 0.5
    public static let defaultSimilarity = 0.87

    public init(phrase: String, frontEndSHA256: String, windowEmbeddings: Int, embeddingSize: Int,
                floor: Double = defaultFloor, similarity: Double = defaultSimilarity, templates: [[Float]], takes: [String]) {
        self.phrase = phrase
        self.frontEndSHA256 = frontEndSHA256
        self.windowEmbeddings = windowEmbeddings
        self.embeddingSize = embeddingSize
        self.floor = floor
        self.similarity = similarity
        self.templates = templates
        self.takes = takes
    }

    /// Why an enrollment does not fit a model, as one line; nil when it does.
    public func mismatch(with model: WakeModel) -> String? {
        if format != Self.format || version != 1 { return "format \(format) version \(version) is not one this build reads" }
        if phrase != model.phrase { return "it is for \"\(phrase)\", not \"\(model.phrase)\"" }
        if frontEndSHA256 != model.frontEnd.manifest.weightsSHA256 { return "the takes were heard by another front end" }
        if windowEmbeddings != model.window || embeddingSize != model.frontEnd.manifest.embeddingSize {
            return "its windows are \(windowEmbeddings)×\(embeddingSize), the model reads \(model.window)×\(model.frontEnd.manifest.embeddingSize)"
        }
        if templates.isEmpty || templates.contains(where: { $0.count != windowEmbeddings * embeddingSize }) {
            return "its takes' windows are missing or the wrong size"
        }
        if !(0...1).contains(floor) || !(-1...1).contains(similarity) { return "floor \(floor) or similarity \(similarity) is out of range" }
        return nil
    }

    /// The rule for one step: over the model's threshold, or over the floor and near a take.
    /// `similarity` is asked only when the score is between the floor and the threshold.
    public func over(score: Float, threshold: Float, similarity near: () -> Float) -> Bool {
        if score >= threshold { return true }
        guard Double(score) >= floor else { return false }
        return Double(near()) >= similarity
    }

}

extension WakeEnrollment {
    /// The enrollment of `model`'s trigger from `takes` (16 kHz mono): each take runs as a
    /// stream of its own (after silence, as the detector starts), and the window the head read
    /// at its best-scoring step is kept. Also returns each take's best score, for the summary.
    public static func from(takes: [[Int16]], model: WakeModel, takeNames: [String],
                            floor: Double = defaultFloor, similarity: Double = defaultSimilarity) -> (WakeEnrollment, bestScores: [Float]) {
        let n = model.window * model.frontEnd.manifest.embeddingSize
        var templates: [[Float]] = [], best: [Float] = []
        for take in takes {
            let frontEnd = EmbeddingFrontEnd(weights: model.frontEnd)
            let head = WakeHead(model: model)
            var top = -Float.infinity, window: [Float] = []
            take.withUnsafeBufferPointer { buf in
                var i = 0
                while i < buf.count {
                    let k = min(frontEnd.remainingInChunk, buf.count - i)
                    let stepped = frontEnd.append(UnsafeBufferPointer(rebasing: buf[i..<i + k]))
                    i += k
                    guard stepped else { continue }
                    let logit = frontEnd.history.withUnsafeBufferPointer { head.logit(history: $0) }
                    if logit > top { top = logit; window = Array(frontEnd.history.suffix(n)) }
                }
            }
            if !window.isEmpty { templates.append(window); best.append(wakeScore(logit: top)) }
        }
        let e = WakeEnrollment(phrase: model.phrase, frontEndSHA256: model.frontEnd.manifest.weightsSHA256,
                               windowEmbeddings: model.window, embeddingSize: model.frontEnd.manifest.embeddingSize,
                               floor: floor, similarity: similarity, templates: templates, takes: takeNames)
        return (e, best)
    }
}
