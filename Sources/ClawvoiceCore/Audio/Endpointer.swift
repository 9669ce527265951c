// Endpointer: decides from capture frames alone when speech has begun and when the utterance is
// over (talk.silenceTimeoutMs without speech after speech, or the per-capture hard cap). What
// counts as speech: the voice detector's probability for the frame when one is given (the
// default, audio.voiceDetector "model"), else the frame's level against the noise floor ("level").
// With an end-of-turn model (TurnDetector, models/turn.json) the pause after speech may end the
// utterance sooner, when how the speech ended says the turn is over; the window stays the ceiling.
// Pure value: no clock, no I/O; time is the audio fed so far, so tests replay it frame by frame.

import Foundation

/// Why an utterance ended.
public enum EndpointReason: Sendable, Equatable {
    /// `silenceTimeoutMs` of quiet followed speech.
    case silence
    /// The capture reached `maxCaptureMs`, speech or not.
    case maxDuration
    /// The end-of-turn model heard the turn end, before the silence window ran out.
    case turnEnd
}

/// What one frame changed.
public enum EndpointEvent: Sendable, Equatable {
    /// The first frames loud enough to be speech (after `speechOnsetFrames` of them in a row).
    case speechStarted
    /// The utterance is over; later frames are ignored.
    case endOfUtterance(reason: EndpointReason)
}

/// RMS against an adaptive noise floor, after the iOS Talk rule (talk-and-voice.md §1.4): the floor
/// is the mean of the quieter half of the first `calibrationFrames` frames, and a frame is loud when
/// its level is above `clamp(floor + margin, minimum, maximum)`.
///
/// The iOS constants (`floor + 0.10`, clamped to 0.12…0.35, 0.18 before calibration) belong to the
/// level scale of Apple's audio meter, not to plain RMS: read as linear full-scale RMS, 0.12 is
/// −18 dBFS, which ordinary speech through a headset mic (−35…−15 dBFS per 20 ms frame) rarely
/// reaches. So the rule is kept and the numbers are restated in dBFS, where a margin means the same
/// thing at any floor:
/// - margin 10 dB: speech sits 15–30 dB above room noise; 10 dB clears noise that wobbles a few dB
///   and still catches the loud part of every word;
/// - minimum −35 dBFS: even after calibrating on digital silence, −40 dBFS hiss (the quietest real
///   noise floor we expect) stays 5 dB under the bar;
/// - maximum −20 dBFS: in a loud room (floor −25 dBFS) the bar stops at −20, still under the vowels
///   of normal speech. espeak-ng's default voice at 16 kHz puts the 20 ms frames inside words at
///   −43…−11 dBFS (median −24, 70 % above −30), so every sentence has runs of frames over any
///   threshold in range;
/// - −30 dBFS before calibration, the iOS 0.18's role: strict enough that noise does not start an
///   utterance in the first 440 ms, loose enough that an early word does.
public struct Endpointer: Sendable {
    /// Level rule in dBFS (0 dBFS = full-scale RMS). See the type's comment for the defaults.
    public struct Thresholds: Sendable, Equatable {
        public var marginDb: Double
        public var minimumDbfs: Double
        public var maximumDbfs: Double
        public var uncalibratedDbfs: Double

        public init(marginDb: Double = 10, minimumDbfs: Double = -35, maximumDbfs: Double = -20,
                    uncalibratedDbfs: Double = -30) {
            self.marginDb = marginDb
            self.minimumDbfs = minimumDbfs
            self.maximumDbfs = maximumDbfs
            self.uncalibratedDbfs = uncalibratedDbfs
        }
    }

    /// Quiet after speech that ends the utterance (talk.silenceTimeoutMs).
    public let silenceTimeoutMs: Int
    /// Hard cap on one capture; 0 or less means no cap.
    public let maxCaptureMs: Int
    /// Frames measured for the noise floor (22 on iOS: 440 ms of 20 ms frames).
    public let calibrationFrames: Int
    /// Loud frames in a row that count as speech starting (2 = 40 ms, so a click does not).
    public let speechOnsetFrames: Int
    public let thresholds: Thresholds
    /// With a voice probability per frame: a frame is speech when the probability reaches this
    /// (nil: the level rule decides, whatever is passed).
    public let voiceThreshold: Double?
    /// Even a voice-like frame is not speech under this level (−60 dBFS: below any microphone's
    /// hiss; the detector only sees shapes, and digital near-silence has shapes too).
    public static let voiceFloorDbfs = -60.0
    /// Voiced frames in a row that keep an utterance going once speech was heard.
    public var voiceHoldFrames = Endpointer.defaultVoiceHoldFrames
    public static let defaultVoiceHoldFrames = 2
    private var voiceRun = 0

    /// Speech has been heard in this capture.
    public private(set) var speechHeard = false
    /// An `endOfUtterance` was returned; later frames are ignored.
    public private(set) var isFinished = false
    /// The measured floor in dBFS, once calibration is over.
    public private(set) var noiseFloorDbfs: Double?
    /// Whether the last frame fed counted as speech (loud, or voice with a detector).
    public private(set) var lastFrameSpeech = false
    /// The level of the last frame fed, in dBFS.
    public private(set) var lastLevelDbfs = -100.0
    /// Audio fed so far, in milliseconds.
    public private(set) var elapsedMilliseconds = 0.0
    /// Quiet since the last loud frame after speech, in milliseconds.
    public private(set) var quietMilliseconds = 0.0

    /// The end-of-turn model (nil: the silence window alone decides).
    public var turnModel: TurnModel?
    private var turn = TurnDetector()
    /// The end-of-turn model's last chance that the turn is over (nil: not in a pause after speech).
    public private(set) var lastTurnProbability: Double?

    private var calibrationLevels: [Double] = []  // linear RMS, like the iOS floor
    private var loudRun = 0

    public init(silenceTimeoutMs: Int = 900, maxCaptureMs: Int = 12_000, calibrationFrames: Int = 22,
                speechOnsetFrames: Int = 2, thresholds: Thresholds = Thresholds(), voiceThreshold: Double? = nil) {
        self.silenceTimeoutMs = max(silenceTimeoutMs, 0)
        self.maxCaptureMs = maxCaptureMs
        self.calibrationFrames = max(calibrationFrames, 0)
        self.speechOnsetFrames = max(speechOnsetFrames, 1)
        self.thresholds = thresholds
        self.voiceThreshold = voiceThreshold
    }

    /// The level a frame must exceed to be loud, in dBFS.
    public var thresholdDbfs: Double {
        guard let floor = noiseFloorDbfs else { return thresholds.uncalibratedDbfs }
        return min(max(floor + thresholds.marginDb, thresholds.minimumDbfs), thresholds.maximumDbfs)
    }

    /// 20·log10 of a 0…1 RMS, with digital silence reported as −100 dBFS instead of −∞.
    public static func dbfs(rms: Double) -> Double { 20 * log10(max(rms, 1e-5)) }

    /// Feeds one frame (any length; capture frames are 20 ms) and returns what it changed.
    /// `voice`: the voice detector's probability for this frame, when it ran.
    public mutating func feed(_ frame: PCMBuffer, voice: Double? = nil) -> EndpointEvent? {
        guard !isFinished else { return nil }
        let rms = frame.rms
        let level = Self.dbfs(rms: rms)
        lastLevelDbfs = level
        elapsedMilliseconds += frame.durationMilliseconds

        // Judge the frame against the threshold in force before it, so a loud first word cannot
        // raise its own bar.
        let loud: Bool
        if let bar = voiceThreshold, let p = voice {
            let voiced = p >= bar && level > Self.voiceFloorDbfs
            voiceRun = voiced ? voiceRun + 1 : 0
            // After speech has started, only `voiceHoldFrames` voiced frames in a row keep the
            // utterance going: a lone voice-like frame in music or clatter does not.
            loud = voiced && (!speechHeard || voiceRun >= voiceHoldFrames)
        } else {
            loud = level > thresholdDbfs
        }
        lastFrameSpeech = loud
        if noiseFloorDbfs == nil && calibrationFrames > 0 {
            calibrationLevels.append(rms)
            if calibrationLevels.count >= calibrationFrames {
                let quieter = calibrationLevels.sorted().prefix(max(calibrationLevels.count / 2, 1))
                noiseFloorDbfs = Self.dbfs(rms: quieter.reduce(0, +) / Double(quieter.count))
                calibrationLevels = []
            }
        }

        var turnFeatures: [Double]?
        if turnModel != nil { turnFeatures = turn.feed(frame.samples, levelDbfs: level, speech: loud) }
        var event: EndpointEvent?
        if loud {
            loudRun += 1
            quietMilliseconds = 0
            if !speechHeard && loudRun >= speechOnsetFrames {
                speechHeard = true
                event = .speechStarted
            }
        } else {
            loudRun = 0
            if speechHeard {
                quietMilliseconds += frame.durationMilliseconds
                if quietMilliseconds >= Double(silenceTimeoutMs) {
                    isFinished = true
                    return .endOfUtterance(reason: .silence)
                }
                if let m = turnModel, let x = turnFeatures {
                    let p = m.probability(x)
                    lastTurnProbability = p
                    if quietMilliseconds >= m.minimumSilenceMs && p >= m.threshold {
                        isFinished = true
                        return .endOfUtterance(reason: .turnEnd)
                    }
                }
            }
        }
        if maxCaptureMs > 0 && elapsedMilliseconds >= Double(maxCaptureMs) {
            isFinished = true
            return .endOfUtterance(reason: .maxDuration)
        }
        return event
    }
}
