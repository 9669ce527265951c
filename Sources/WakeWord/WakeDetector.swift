// WakeDetector: several trigger models over one audio stream. Shares one feature extractor,
// turns per-model scores into wake events with per-model thresholds, a global sensitivity and
// a refractory period. Time is the stream position (milliseconds of audio fed), never a clock.

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
    public var sensitivity: Double { didSet { thresholds = Self.thresholds(models, sensitivity) } }
    public private(set) var thresholds: [Float]
    public var refractory: WakeRefractory
    /// No wake in the first this-many milliseconds of a stream: the models were never scored on
    /// their first 0.5 s (a history of zeros, not of audio), so their output there means nothing.
    public var warmupMilliseconds = 500

    private let features: LogMelFeatures
    private let runners: [WakeInference]
    private var scoreBuffer: [Float]

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
            // Of the models over their threshold on this step, the one furthest over wins.
            var best = -1
            var bestMargin: Float = 0
            for i in 0..<runners.count where scoreBuffer[i] >= thresholds[i] {
                let margin = scoreBuffer[i] - thresholds[i]
                if best < 0 || margin > bestMargin { best = i; bestMargin = margin }
            }
            if best >= 0, ms >= warmupMilliseconds, refractory.admit(atMilliseconds: ms) {
                found.append(WakeDetection(phrase: models[best].phrase, ms: ms, score: Double(scoreBuffer[best])))
            }
        }
        return found
    }

    /// Convenience for arrays.
    public func process(_ samples: [Int16], onScores: ((StepScores) -> Void)? = nil) -> [WakeDetection] {
        samples.withUnsafeBufferPointer { process($0, onScores: onScores) }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
