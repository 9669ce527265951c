// WakeDetector: several trigger models over one audio stream. Shares one speech-embedding front
// end (per distinct front-end file; all shipped models share one), runs each trigger's head
// every 80 ms, and turns the scores into wake events with per-model thresholds, a global
// sensitivity and a refractory period. Time is the stream position (milliseconds of audio fed),
// never a clock. A stream starts after silence, as in training, so a trigger at 0 ms is heard.

import Audio

/// One wake: which phrase, when (milliseconds of audio since the stream started, at the end
/// of the step that made the bid: the threshold crossed for `consecutiveSteps` steps), and the score then.
public struct WakeDetection: Sendable, Equatable, Codable {
    public var phrase: String
    public var ms: Int
    public var score: Double

    public init(phrase: String, ms: Int, score: Double) {
        self.phrase = phrase
        self.ms = ms
        self.score = score
    }
}

/// The quiet period after a wake: no second wake (of any phrase) until it has passed, so
/// one utterance never wakes twice and "openclaw" cannot also wake "claude".
public struct WakeRefractory: Sendable, Equatable {
    /// Length of the quiet period in milliseconds of audio.
    public var periodMilliseconds: Int
    /// Audio position of the last admitted wake, if any.
    public private(set) var lastMilliseconds: Int?

    public init(periodMilliseconds: Int = 2000) { self.periodMilliseconds = periodMilliseconds }

    /// True when a wake at `ms` may fire; records it when so.
    public mutating func admit(atMilliseconds ms: Int) -> Bool {
        if let last = lastMilliseconds, ms - last < periodMilliseconds { return false }
        lastMilliseconds = ms
        return true
    }

    /// Forgets the last wake.
    public mutating func reset() { lastMilliseconds = nil }
}

/// Per model, how many consecutive steps its score has been at or over its threshold. A model
/// may bid for a wake once that run reaches its `consecutiveSteps` (1: every step over the
/// threshold bids). A pure value: the detector tells it each step's comparisons.
public struct WakeConfirmation: Sendable, Equatable {
    /// Steps in a row each model needs (at least 1).
    public let required: [Int]
    /// The current run of steps at or over the threshold, per model.
    public private(set) var runs: [Int]

    public init(required: [Int]) {
        self.required = required.map { max(1, $0) }
        runs = [Int](repeating: 0, count: required.count)
    }

    /// Model `i`'s score this step is (or is not) over its threshold; true when its run is long enough.
    public mutating func step(_ i: Int, over: Bool) -> Bool {
        runs[i] = over ? runs[i] + 1 : 0
        return runs[i] >= required[i]
    }

    /// A fresh stream: no runs.
    public mutating func reset() { runs = [Int](repeating: 0, count: runs.count) }
}

/// Runs every model on each frame and reports wakes. One owner: not `Sendable`.
///
/// Thresholds: each model carries its own (the score at which it wakes at sensitivity 0.5).
/// `sensitivity` (0…1) moves all of them together in logit space: 0.5 leaves them as
/// trained, 1 lowers each by 2 logits (more wakes, more false wakes), 0 raises each by 2.
public final class WakeDetector {
    /// Per-step scores of every model, for threshold sweeps (`wake detect --scores`).
    public struct StepScores: Sendable {
        /// Audio position at the end of the step, in milliseconds.
        public var ms: Int
        /// One score per model, in `phrases` order.
        public var scores: [Float]
        /// Per model with an enrollment, the window's cosine similarity to the nearest take (nil: not enrolled).
        public var nearest: [Float?] = []
    }

    public let models: [WakeModel]
    public var phrases: [String] { models.map(\.phrase) }
    /// 0…1; see the type's comment.
    public var sensitivity: Double {
        didSet {
            thresholds = Self.thresholds(models, sensitivity)
            thresholdLogits = thresholds.map(Self.logit)
        }
    }
    public private(set) var thresholds: [Float]
    public var refractory: WakeRefractory
    /// Which models have been over their threshold long enough to bid (`consecutiveSteps`).
    public private(set) var confirmation: WakeConfirmation
    /// No wake in the first this-many milliseconds of a stream. 0: the heads were trained on
    /// stream starts (silence before the first sample), so a trigger at 0 ms may wake.
    public var warmupMilliseconds = 0
    /// After the first model crosses its threshold, how long the others may still bid before
    /// the wake is decided (stamped at the first bid). Several triggers share sounds
    /// ("openclaw" and "claude"), and the one that crosses first is not always the one said.
    public var decisionMilliseconds = 80

    private let frontEnds: [EmbeddingFrontEnd]
    /// Per model: index into frontEnds.
    private let frontEndOf: [Int]
    private let heads: [WakeHead]
    private var scoreBuffer: [Float]
    /// `scoreBuffer` holds the heads' scores for the histories as they are now.
    private var scoresCurrent = false
    private var thresholdLogits: [Float]
    /// Lowers every threshold by this many logits while it is set: the node's own voice, though
    /// cancelled, leaves a residue that takes a trigger said over it a little below its bar. When
    /// it rises, the steps of the last `lookback.milliseconds` that were heard under relief are
    /// judged again at the new one (WakeLookback: a barge-in's relief reaches back before it).
    public var thresholdRelief: Float = 0 {
        didSet { if thresholdRelief > oldValue { lookbackDue = true } }
    }
    /// The last second of steps, for a relief that rises.
    public var lookback = WakeLookback()
    private var lookbackDue = false
    /// Per model, the household's takes (`wake enroll`): a step over the enrollment's floor whose
    /// window is near a take counts as over the threshold (WakeEnrollment's rule). Set with `enroll`.
    public var enrollments: [WakeEnrollment?] { verifiers.map { $0?.enrollment } }
    private var verifiers: [WakeVerifier?]
    /// A wake being decided: when it started, the best bid so far and its margin over threshold (logits).
    private var pending: (ms: Int, best: Int, margin: Float, score: Float)?

    /// - Parameters:
    ///   - models: one per trigger phrase; models naming the same front end share one.
    ///   - sensitivity: 0…1, 0.5 = each model's trained threshold.
    ///   - refractoryMilliseconds: quiet period after a wake, 2000 by default.
    public init(models: [WakeModel], sensitivity: Double = 0.5, refractoryMilliseconds: Int = 2000) {
        self.models = models
        self.sensitivity = sensitivity
        thresholds = Self.thresholds(models, sensitivity)
        refractory = WakeRefractory(periodMilliseconds: refractoryMilliseconds)
        confirmation = WakeConfirmation(required: models.map(\.consecutiveSteps))
        var ends: [EmbeddingFrontEnd] = []
        var of: [Int] = []
        for m in models {
            if let i = ends.firstIndex(where: { $0.weights === m.frontEnd }) {
                of.append(i)
            } else {
                ends.append(EmbeddingFrontEnd(weights: m.frontEnd))
                of.append(ends.count - 1)
            }
        }
        frontEnds = ends
        frontEndOf = of
        heads = models.map { WakeHead(model: $0) }
        scoreBuffer = [Float](repeating: 0, count: models.count)
        thresholdLogits = thresholds.map(Self.logit)
        verifiers = [WakeVerifier?](repeating: nil, count: models.count)
    }

    /// Uses `list[i]` for model i (nil: none). Enrollments that do not fit their model
    /// (WakeEnrollment.mismatch) are not used; returns their lines.
    @discardableResult
    public func enroll(_ list: [WakeEnrollment?]) -> [String] {
        var problems: [String] = []
        for i in models.indices {
            let e = i < list.count ? list[i] : nil
            if let e, let why = e.mismatch(with: models[i]) {
                problems.append("the enrollment of \"\(models[i].phrase)\" is not used: \(why)")
                verifiers[i] = nil
            } else {
                verifiers[i] = e.flatMap { WakeVerifier($0, model: models[i]) }
            }
        }
        return problems
    }

    /// Model i's window (its head's input) against its enrollment's takes.
    private func nearest(_ i: Int) -> Float {
        guard var v = verifiers[i] else { return -1 }
        let n = v.enrollment.windowEmbeddings * v.enrollment.embeddingSize
        let s = frontEnds[frontEndOf[i]].history.withUnsafeBufferPointer { h in
            v.nearest(UnsafeBufferPointer(rebasing: h[(h.count - n)...]))
        }
        verifiers[i] = v
        return s
    }

    static func logit(_ p: Float) -> Float {
        let q = min(max(p, 1e-7), 1 - 1e-7)
        return log(q / (1 - q))
    }

    public static func thresholds(_ models: [WakeModel], _ sensitivity: Double) -> [Float] {
        let shift = 4 * (min(max(sensitivity, 0), 1) - 0.5)
        return models.map { m in
            let t = min(max(m.threshold, 1e-6), 1 - 1e-6)
            let logit = log(t / (1 - t)) - shift
            return Float(1 / (1 + exp(-logit)))
        }
    }

    /// Chunks (80 ms) of digital silence that needed no computing (EmbeddingFrontEnd.steadySamples).
    public var skippedSteps: Int { frontEnds.first?.skippedChunks ?? 0 }
    /// False: every chunk is computed, silent or not (tests; the bench's "before").
    public var skipsSilence: Bool {
        get { frontEnds.first?.skipsSilence ?? false }
        set { for f in frontEnds { f.skipsSilence = newValue } }
    }

    /// Milliseconds of audio fed so far (whole 80 ms steps).
    public var positionMilliseconds: Int { (frontEnds.first?.chunks ?? 0) * Self.stepMilliseconds }

    /// One score per model every this-many milliseconds of audio.
    public static let stepMilliseconds = EmbeddingFrontEnd.chunkSamples * 1000 / 16_000

    /// Back to the start of a stream: front ends, histories and the refractory period. Call it
    /// when the audio is not continuous (a capture gap): the front end would otherwise join two
    /// stretches of sound that were never next to each other.
    public func reset() {
        for f in frontEnds { f.reset() }
        scoresCurrent = false
        refractory.reset()
        confirmation.reset()
        pending = nil
        lookback.removeAll()
        lookbackDue = false
    }

    /// Feeds 16 kHz mono samples; returns the wakes they complete. `onScores`, when given, sees
    /// every step's scores.
    public func process(_ samples: UnsafeBufferPointer<Int16>, onScores: ((StepScores) -> Void)? = nil) -> [WakeDetection] {
        var found: [WakeDetection] = []
        guard let lead = frontEnds.first else { return found }
        var i = 0
        while i < samples.count {
            // Every front end is on the same chunk boundary; feed up to it.
            let n = min(lead.remainingInChunk, samples.count - i)
            var stepped = false
            for f in frontEnds { stepped = f.append(UnsafeBufferPointer(rebasing: samples[i..<i + n])) }
            i += n
            if stepped { step(&found, onScores) }
        }
        return found
    }

    private func step(_ found: inout [WakeDetection], _ onScores: ((StepScores) -> Void)?) {
        // A skipped chunk left every history as it was: the heads would give the scores they gave.
        if !(scoresCurrent && frontEnds.allSatisfy(\.lastStepSkipped)) {
            for (i, h) in heads.enumerated() {
                let logit = frontEnds[frontEndOf[i]].history.withUnsafeBufferPointer { h.logit(history: $0) }
                scoreBuffer[i] = wakeScore(logit: logit)
            }
            scoresCurrent = true
        }
        let ms = positionMilliseconds
        if let onScores {
            let near: [Float?] = verifiers.indices.map { verifiers[$0] == nil ? nil : nearest($0) }
            onScores(StepScores(ms: ms, scores: scoreBuffer, nearest: near))
        }
        let relief = thresholdRelief
        if lookbackDue {
            lookbackDue = false
            if pending == nil, let b = lookback.bid(thresholdLogits: thresholdLogits, required: confirmation.required, relief: relief),
               b.ms >= warmupMilliseconds, refractory.lastMilliseconds.map({ b.ms - $0 >= refractory.periodMilliseconds }) ?? true {
                pending = (b.ms, b.model, b.margin, b.score)
            }
        }
        lookback.record(WakeLookback.Step(ms: ms, scores: scoreBuffer, relief: relief))
        if let p = pending, ms - p.ms >= decisionMilliseconds, let d = decide() { found.append(d) }
        // Of the models over their threshold for long enough, the one furthest over (in logits) bids.
        var best = -1
        var bestMargin: Float = 0
        for i in 0..<heads.count where confirmation.step(i, over: isOver(i, relief)) {
            let margin = Self.logit(scoreBuffer[i]) - thresholdLogits[i]
            if best < 0 || margin > bestMargin { best = i; bestMargin = margin }
        }
        guard best >= 0, ms >= warmupMilliseconds else { return }
        if let p = pending {
            if bestMargin > p.margin { pending = (p.ms, best, bestMargin, scoreBuffer[best]) }
        } else if refractory.lastMilliseconds.map({ ms - $0 >= refractory.periodMilliseconds }) ?? true {
            pending = (ms, best, bestMargin, scoreBuffer[best])
            if decisionMilliseconds <= 0, let d = decide() { found.append(d) }
        }
    }

    /// Model i's score this step is over its bar: its threshold (less any relief), or the
    /// enrollment's floor with the window near a take.
    private func isOver(_ i: Int, _ relief: Float) -> Bool {
        if relief == 0 ? scoreBuffer[i] >= thresholds[i] : Self.logit(scoreBuffer[i]) >= thresholdLogits[i] - relief { return true }
        guard let e = verifiers[i]?.enrollment else { return false }
        return e.over(score: scoreBuffer[i], threshold: .infinity, similarity: { nearest(i) })
    }

    /// Ends the stream: a wake still being decided is decided now.
    public func finish() -> [WakeDetection] {
        decide().map { [$0] } ?? []
    }

    private func decide() -> WakeDetection? {
        guard let p = pending else { return nil }
        pending = nil
        guard refractory.admit(atMilliseconds: p.ms) else { return nil }
        return WakeDetection(phrase: models[p.best].phrase, ms: p.ms, score: Double(p.score))
    }

    /// Feeds a buffer that carries its format; it must be 16 kHz mono (`AudioFormat.voice`),
    /// the capture format. Resample other audio first (`Resampler.convert`).
    public func process(_ pcm: PCMBuffer, onScores: ((StepScores) -> Void)? = nil) throws(WakeWordError) -> [WakeDetection] {
        guard pcm.format == .voice else { throw .wrongFormat(pcm.format) }
        return process(pcm.samples, onScores: onScores)
    }

    /// Convenience for arrays of 16 kHz mono samples.
    public func process(_ samples: [Int16], onScores: ((StepScores) -> Void)? = nil) -> [WakeDetection] {
        samples.withUnsafeBufferPointer { process($0, onScores: onScores) }
    }
}

/// The sigmoid of a head's logit, the score thresholds apply to.
func wakeScore(logit: Float) -> Float { 1 / (1 + exp(-logit)) }

public import ClawvoiceCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
