// WakeDetector: several trigger models over one audio stream. Shares one feature extractor,
// turns per-model scores into wake events with per-model thresholds, a global sensitivity and
// a refractory period. Time is the stream position (milliseconds of audio fed), never a clock.

import Audio

/// One wake: which phrase, when (milliseconds of audio since the stream started, at the end
/// of the step that crossed the threshold), and the score then.
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
    /// No wake in the first this-many milliseconds of a stream: the models were never scored on
    /// their first 0.5 s (a history of zeros, not of audio), so their output there means nothing.
    public var warmupMilliseconds = 500
    /// After the first model crosses its threshold, how long the others may still bid before
    /// the wake is decided (stamped at the first crossing). Several triggers share sounds
    /// ("openclaw" and "claude"), and the one that crosses first is not always the one said.
    public var decisionMilliseconds = 90

    private let features: LogMelFeatures
    private let runners: [WakeInference]
    private var scoreBuffer: [Float]
    private var thresholdLogits: [Float]
    /// A wake being decided: when it started, the best bid so far and its margin over threshold (logits).
    private var pending: (ms: Int, best: Int, margin: Float, score: Float)?

    /// - Parameters:
    ///   - models: one per trigger phrase; they must share the stride (all shipped ones do).
    ///   - sensitivity: 0…1, 0.5 = each model's trained threshold.
    ///   - refractoryMilliseconds: quiet period after a wake, 2000 by default.
    public init(models: [WakeModel], sensitivity: Double = 0.5, refractoryMilliseconds: Int = 2000) {
        self.models = models
        self.sensitivity = sensitivity
        thresholds = Self.thresholds(models, sensitivity)
        refractory = WakeRefractory(periodMilliseconds: refractoryMilliseconds)
        features = LogMelFeatures()
        runners = models.map { WakeInference(model: $0) }
        scoreBuffer = [Float](repeating: 0, count: models.count)
        thresholdLogits = thresholds.map(Self.logit)
    }

    static func logit(_ p: Float) -> Float {
        let q = min(max(p, 1e-7), 1 - 1e-7)
        return log(q / (1 - q))
    }

    static func thresholds(_ models: [WakeModel], _ sensitivity: Double) -> [Float] {
        let shift = 4 * (min(max(sensitivity, 0), 1) - 0.5)
        return models.map { m in
            let t = min(max(m.threshold, 1e-6), 1 - 1e-6)
            let logit = log(t / (1 - t)) - shift
            return Float(1 / (1 + exp(-logit)))
        }
    }

    /// Milliseconds of audio fed so far (whole frames).
    public var positionMilliseconds: Int { frameEndMilliseconds(features.framesEmitted - 1) }

    private func frameEndMilliseconds(_ frame: Int) -> Int {
        let c = features.configuration
        return (frame * c.hopSamples + c.windowSamples) * 1000 / c.sampleRateHz
    }

    /// Back to the start of a stream: features, histories and the refractory period.
    public func reset() {
        features.reset()
        for r in runners { r.reset() }
        refractory.reset()
        pending = nil
    }

    /// Feeds 16 kHz mono samples; returns the wakes they complete. `onScores`, when given, sees
    /// every step's scores.
    public func process(_ samples: UnsafeBufferPointer<Int16>, onScores: ((StepScores) -> Void)? = nil) -> [WakeDetection] {
        var found: [WakeDetection] = []
        features.process(samples) { frame in
            var stepped = false
            for (i, r) in runners.enumerated() {
                if let logit = r.push(frame) {
                    scoreBuffer[i] = wakeScore(logit: logit)
                    stepped = true
                }
            }
            guard stepped else { return }
            let ms = frameEndMilliseconds(features.framesEmitted - 1)
            onScores?(StepScores(ms: ms, scores: scoreBuffer))
            if let p = pending, ms - p.ms >= decisionMilliseconds, let d = decide() { found.append(d) }
            // Of the models over their threshold on this step, the one furthest over (in logits) bids.
            var best = -1
            var bestMargin: Float = 0
            for i in 0..<runners.count where scoreBuffer[i] >= thresholds[i] {
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
        return found
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

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
