// TurnDetector: decides the end of a user's turn from how the speech ended, not from silence
// alone (issue 25). Each 20 ms frame gives its level, its pitch (normalised autocorrelation over
// the last 40 ms, 60–400 Hz) and whether the endpointer counted it as speech; in a pause after
// speech the detector describes the speech before the pause (how the pitch and the level moved
// over its last 300 ms, where they ended against the turn's own median, how long the last run of
// speech and of voicing lasted, how long the pause is so far) and a small logistic model
// (models/turn.json, trained by models/training/turn_train.py) gives the chance that the turn is
// over. The Endpointer ends the utterance when that chance passes the model's threshold after
// at least `minimumSilenceMs` of pause; its silence window stays the ceiling.
// Pure value: no clock, no I/O; the frames' audio is its time.

import Foundation

/// The model: feature scaling, logistic weights, the threshold and the shortest pause it may end.
public struct TurnModel: Codable, Sendable, Equatable {
    public var format: String
    public var version: Int
    public var features: [String]
    public var mean: [Double]
    public var scale: [Double]
    public var weights: [Double]
    public var bias: Double
    public var threshold: Double
    public var minimumSilenceMs: Double
    public var trainingEngines: [String]?

    public static let fileName = "turn.json"
    public static let formatName = "clawvoice-turn-detector"
    /// 2: pitch from the shortest good lag, over the last pitched frames, smoothed.
    public static let version = 2

    public init(features: [String] = TurnDetector.featureNames, mean: [Double], scale: [Double], weights: [Double],
                bias: Double, threshold: Double, minimumSilenceMs: Double, trainingEngines: [String]? = nil) {
        format = Self.formatName
        version = Self.version
        self.features = features
        self.mean = mean
        self.scale = scale
        self.weights = weights
        self.bias = bias
        self.threshold = threshold
        self.minimumSilenceMs = minimumSilenceMs
        self.trainingEngines = trainingEngines
    }

    /// Reads `directory/turn.json`; one line naming the problem when it cannot.
    public static func load(directory: String) throws -> TurnModel {
        let path = (directory as NSString).appendingPathComponent(fileName)
        guard let data = FileManager.default.contents(atPath: path) else {
            throw TurnModelError("no end-of-turn model at \(path) (train one with: make turn-model)")
        }
        let m: TurnModel
        do { m = try JSONDecoder().decode(TurnModel.self, from: data) } catch {
            throw TurnModelError("\(path) does not decode as an end-of-turn model (\(error))")
        }
        guard m.format == formatName, m.version == version, m.features == TurnDetector.featureNames,
              m.mean.count == m.features.count, m.scale.count == m.features.count, m.weights.count == m.features.count else {
            throw TurnModelError("\(path): \"\(m.format)\" version \(m.version) with features \(m.features); this build reads \(formatName) \(version) with \(TurnDetector.featureNames)")
        }
        return m
    }

    /// The chance that the turn is over, for one feature vector.
    public func probability(_ x: [Double]) -> Double {
        var z = bias
        for i in 0..<min(x.count, weights.count) { z += weights[i] * (x[i] - mean[i]) / max(scale[i], 1e-9) }
        return 1 / (1 + exp(-z))
    }
}

public struct TurnModelError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ d: String) { description = d }
}

/// One stream's end-of-turn features (one owner; a value).
public struct TurnDetector: Sendable {
    public static let featureNames = ["pauseMs", "pitchSlope", "pitchEnd", "levelSlope", "levelEnd",
                                      "lastRunMs", "lastVoicedMs", "speechMs", "voicedShare"]

    struct Frame: Sendable { var level: Double; var pitch: Double?; var speech: Bool }
    /// The last 40 ms of samples (the pitch window).
    private var window = [Double](repeating: 0, count: 640)
    /// Frames since the turn's start, speech or not (bounded: the last 15 s).
    private var frames: [Frame] = []
    private var pitches: [Double] = []   // semitones of every pitched speech frame (for the median)
    private var levels: [Double] = []    // dBFS of every speech frame
    public private(set) var pauseMs = 0.0
    public private(set) var heardSpeech = false

    public init() {}

    /// Pitch of 320 new samples with the 320 before them, in semitones over 100 Hz, or nil when
    /// the frame is not periodic (best normalised autocorrelation under 0.5) or too quiet.
    mutating func pitch(_ samples: [Int16]) -> Double? {
        let n = samples.count
        guard n > 0, n <= 640 else { return nil }
        window.withUnsafeMutableBufferPointer { w in
            for i in 0..<(640 - n) { w[i] = w[i + n] }
            for i in 0..<n { w[640 - n + i] = Double(samples[i]) }
        }
        return window.withUnsafeBufferPointer { w -> Double? in
            let minLag = 40, maxLag = 266, span = 640 - maxLag
            var e0 = 0.0
            for i in 0..<span { e0 += w[i] * w[i] }
            guard e0 / Double(span) > 10 else { return nil }  // about −70 dBFS
            var eL = 0.0
            for i in minLag..<(minLag + span) { eL += w[i] * w[i] }
            var rs = [Double](repeating: 0, count: maxLag + 1)
            var best = 0.0
            var lag = minLag
            while lag <= maxLag {
                var c = 0.0
                for i in 0..<span { c += w[i] * w[i + lag] }
                rs[lag] = c / (e0 * eL).squareRoot().nextUp
                best = max(best, rs[lag])
                // Slide the lagged energy one sample on.
                if lag < maxLag { eL += w[lag + span] * w[lag + span] - w[lag] * w[lag] }
                lag += 1
            }
            guard best >= 0.5 else { return nil }
            // The shortest lag at a peak nearly as good as the best: a period's multiples score
            // about as well as the period itself, and taking them halves the pitch (octave errors).
            var bestLag = 0
            for l in minLag...maxLag where rs[l] >= 0.9 * best && (l == maxLag || rs[l] >= rs[l + 1]) && (l == minLag || rs[l] >= rs[l - 1]) {
                bestLag = l
                break
            }
            guard bestLag > 0 else { return nil }
            return 12 * log2(16_000 / Double(bestLag) / 100)
        }
    }

    /// One frame: its level, whether it counted as speech. Returns the feature vector when the
    /// frame is in a pause after speech (nil otherwise).
    public mutating func feed(_ samples: [Int16], levelDbfs: Double, speech: Bool) -> [Double]? {
        let p = pitch(samples)
        let ms = Double(samples.count) / 16
        frames.append(Frame(level: levelDbfs, pitch: p, speech: speech))
        if frames.count > 750 { frames.removeFirst(frames.count - 750) }
        if speech {
            heardSpeech = true
            pauseMs = 0
            levels.append(levelDbfs)
            if let p { pitches.append(p) }
            if levels.count > 750 { levels.removeFirst() }
            if pitches.count > 750 { pitches.removeFirst() }
            return nil
        }
        guard heardSpeech else { return nil }
        pauseMs += ms
        return features()
    }

    static func median(_ xs: [Double]) -> Double {
        guard !xs.isEmpty else { return 0 }
        let s = xs.sorted()
        return s[s.count / 2]
    }

    /// Slope (per second) of a least-squares line through (t, y) with t in 20 ms frames.
    static func slope(_ pts: [(Double, Double)]) -> Double {
        guard pts.count >= 2 else { return 0 }
        let n = Double(pts.count)
        let mt = pts.reduce(0) { $0 + $1.0 } / n, my = pts.reduce(0) { $0 + $1.1 } / n
        var sxy = 0.0, sxx = 0.0
        for (t, y) in pts { sxy += (t - mt) * (y - my); sxx += (t - mt) * (t - mt) }
        return sxx > 0 ? sxy / sxx * 50 : 0
    }

    /// The features of the pause now. Pitch: over the last 10 pitched speech frames (within the
    /// last 40 speech frames), each the median of it and its neighbours (a stray octave jump
    /// does not make a slope); level: over the last 15 speech frames.
    func features() -> [Double] {
        guard let lastSpeech = frames.lastIndex(where: { $0.speech }) else { return [Double](repeating: 0, count: Self.featureNames.count) }
        var tail: [(Int, Frame)] = []
        var i = lastSpeech
        var seen = 0
        while i >= 0 && seen < 40 {
            if frames[i].speech { tail.append((i, frames[i])); seen += 1 }
            i -= 1
        }
        tail.reverse()
        let pitchedAll = tail.compactMap { f in f.1.pitch.map { (Double(f.0), $0) } }
        var smooth: [(Double, Double)] = []
        for k in pitchedAll.indices {
            let around = pitchedAll[max(0, k - 1)...min(pitchedAll.count - 1, k + 1)].map(\.1)
            smooth.append((pitchedAll[k].0, Self.median(around)))
        }
        let pitched = Array(smooth.suffix(10))
        let levelTail = Array(tail.suffix(15))
        let medPitch = Self.median(pitches), medLevel = Self.median(levels)
        let pitchEnd = pitched.suffix(3).map(\.1)
        let levelEnd = levelTail.suffix(5).map(\.1.level)
        var run = 0
        var j = lastSpeech
        while j >= 0 && frames[j].speech { run += 1; j -= 1 }
        var voiced = 0
        j = lastSpeech
        while j >= 0 && frames[j].pitch != nil { voiced += 1; j -= 1 }
        return [
            pauseMs,
            Self.slope(pitched),
            pitchEnd.isEmpty ? 0 : pitchEnd.reduce(0, +) / Double(pitchEnd.count) - medPitch,
            Self.slope(levelTail.map { (Double($0.0), $0.1.level) }),
            levelEnd.isEmpty ? 0 : levelEnd.reduce(0, +) / Double(levelEnd.count) - medLevel,
            Double(run) * 20,
            Double(voiced) * 20,
            Double(levels.count) * 20,
            levelTail.isEmpty ? 0 : Double(levelTail.filter { $0.1.pitch != nil }.count) / Double(levelTail.count),
        ]
    }
}
