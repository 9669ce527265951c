// The talk loop's ears: everything that listens to the microphone frames besides the uplink.
// The echo canceller (CaptureCleaner), the voice detector and its context, the wake listener with
// its lookback, triggers and routing, the stop-word head and the pre-roll. The loop hands each
// frame here and carries out the machine's listen actions through it.

import Audio
import ClawvoiceCore
import Foundation
import GatewayClient
import GatewayProtocol
import WakeWord

final class Ears {
    /// A wake word heard in a frame.
    struct Heard {
        var phrase: String
        var score: Double
        var triggers: [String]
        var routed: String?
    }

    private let log: LogSink
    private let echoReference: EchoReference?
    private var cleaner: CaptureCleaner?
    private var cleanedFrames = 0
    /// The canceller could not be made: the capture goes on without it.
    private(set) var echoFailed = false
    private var preRoll: PreRollBuffer
    private var wake: WakeListener?
    private var knownTriggers: [String]?
    private var knownRouting: JSONValue?
    /// Whether the wake detector heard the previous frame.
    var wakeHeardLast = false
    private var stopWord: StopWordListener?
    /// Whether the stop head was fed the frame being processed (else its stream has a gap).
    var stopFed = false
    private var voice: VoiceDetector?
    /// The last frames heard (as many as the voice detector's window spans), and whether the
    /// detector heard the frame before this one.
    private var voiceContext = PreRollBuffer(milliseconds: 0)
    private var voiceCurrent = false
    /// What the models say over the config: the voice detector's threshold, the end-of-turn model.
    private(set) var voiceModelThreshold: Double?
    private(set) var turnModel: TurnModel?

    init(config: TalkConfig, echoReference: EchoReference?, log: LogSink) {
        self.log = log
        self.echoReference = echoReference
        preRoll = PreRollBuffer(milliseconds: config.preRollMs)
        if let dir = config.stopWordModelsDirectory {
            let (listener, problem) = StopWordListener.load(directory: dir, sensitivity: config.stopWordSensitivity)
            stopWord = listener
            if let problem { log.log(.warning, "talk", problem) }
        }
    }

    func setPreRoll(ms: Int) { preRoll = PreRollBuffer(milliseconds: ms) }

    /// Whether the capture is echo-cancelled: a reference to cancel against, the config (nil:
    /// on for loudspeakers), and a canceller that could be made.
    func echoOn(_ c: TalkConfig) -> Bool {
        echoReference != nil && (c.echoCancel ?? !c.headset) && !echoFailed
    }

    /// A capture gap: the detectors start a fresh stream with the next frame they hear.
    func gap() {
        wake?.detector?.reset()
        wake?.lookback.removeAll()
        cleaner?.gap()
    }

    /// The microphone frame with the speaker's echo taken out, when echo cancellation is on, for
    /// the uplink and for the detectors (the frame itself for both when it is off).
    func clean(_ frame: PCMBuffer, at t: ContinuousClock.Instant, echo: Bool, config: TalkConfig) -> (uplink: PCMBuffer, detector: PCMBuffer?) {
        guard echo, let reference = echoReference, frame.format == .voice else { return (frame, nil) }
        if cleaner == nil {
            do { cleaner = try CaptureCleaner(reference: reference, delayMs: config.echoDelayMs) } catch {
                log.log(.warning, "audio", "echo cancellation unavailable: \(error)")
                echoFailed = true
                return (frame, nil)
            }
        }
        guard let both = cleaner?.clean(frame, at: t) else { return (frame, nil) }
        let out = both.uplink
        cleanedFrames += 1
        if cleanedFrames % 25 == 0 {
            log.log(.debug, "audio", String(format: "echo canceller: in %.1f dBFS, out %.1f dBFS", Endpointer.dbfs(rms: frame.rms), Endpointer.dbfs(rms: out.rms)))
        }
        return (out, both.detector)
    }

    /// The voice detector's probability for the frame (nil: the level rule decides, because it
    /// is off or its model is missing, which `loadVoiceDetector` said once). Only a capture's
    /// endpointer reads it, so it runs only then (issue 25: idle, it was CPU spent on nothing); a
    /// detector that missed frames starts from the last frames kept in `voiceContext`, which hold
    /// its whole window, so its probabilities are the ones it would have given having heard every frame.
    func voiceProbability(_ frame: PCMBuffer, followsGap: Bool, muted: Bool, capturing: Bool, config: TalkConfig) -> Double? {
        if followsGap { voiceContext.removeAll(); voiceCurrent = false }
        guard config.voiceDetector == .model, !muted, frame.format == .voice, let voice else { voiceCurrent = false; return nil }
        defer { voiceContext.append(frame) }
        guard capturing else { voiceCurrent = false; return nil }
        if !voiceCurrent {
            voice.reset()
            for f in voiceContext.drain() { voice.probability(f.samples) }
            voiceCurrent = true
        }
        return voice.probability(frame.samples)
    }

    /// Reads the voice detector's model (and the end-of-turn model) once, before the loop takes
    /// its first frame. True when the machine's settings change with them.
    func loadVoiceDetector(_ config: TalkConfig) -> Bool {
        guard config.voiceDetector == .model, voice == nil else { return false }
        let dir = config.modelsDirectory ?? WakeModelCatalog.defaultDirectory()
        do {
            let model = try VoiceDetectorModel.load(directory: dir)
            voice = VoiceDetector(model: model)
            voiceContext = PreRollBuffer(milliseconds: VoiceDetector.contextFrames(model) * 20)
            voiceModelThreshold = model.manifest.threshold
            if config.endOfTurn {
                do { turnModel = try TurnModel.load(directory: dir) } catch {
                    log.log(.warning, "audio", "end-of-turn model unavailable (\(error)); turns end on the silence window")
                }
            }
            return true
        } catch {
            log.log(.warning, "audio", "voice detector unavailable (\(error)); the end of speech is judged by level")
            return false
        }
    }

    // MARK: the machine's listen actions

    /// The frame goes to the pre-roll and, when the machine says so, to the wake detector
    /// (`detectorFrame`: the linear canceller's copy). A trigger heard is returned.
    func listen(_ frame: PCMBuffer, forWake listensForWake: Bool, detectorFrame: PCMBuffer?) -> Heard? {
        preRoll.append(frame)
        guard let w = wake, w.config.enabled else { return nil }
        guard listensForWake else { w.lookback.append(frame); wakeHeardLast = false; return nil }
        // Frames it did not hear (push-to-talk, speech, debounce) are a gap to the detector.
        if !wakeHeardLast { w.detector?.reset() }
        wakeHeardLast = true
        guard let d = w.feed(detectorFrame ?? frame) else { return nil }
        w.detections += 1
        w.lastPhrase = d.phrase
        log.log(.info, "wake", "heard \"\(d.phrase)\" (score \(String(format: "%.2f", d.score)))")
        return Heard(phrase: d.phrase, score: d.score, triggers: w.triggers, routed: w.session(for: d.phrase))
    }

    /// The frame goes to the stop head (the node speaks); its score when it heard "stop".
    func listenForStop(_ frame: PCMBuffer, detectorFrame: PCMBuffer?) -> Double? {
        guard let sw = stopWord else { return nil }
        stopFed = true
        guard let d = sw.feed(detectorFrame ?? frame) else { return nil }
        log.log(.info, "talk", "heard the stop word (score \(String(format: "%.2f", d.score)))")
        return d.score
    }

    /// After each frame: a stop head that was not fed it has a gap (and says how close it came).
    func endOfFrame() {
        if !stopFed, let sw = stopWord, sw.gap() {
            log.log(.debug, "talk", String(format: "stop word: highest score while speaking %.3f (threshold %.3f)", sw.peak, sw.threshold))
        }
    }

    func resetWake() { wake?.detector?.reset() }
    func wakeRelief(_ logits: Double) { wake?.detector?.thresholdRelief = Float(logits) }
    func wakeOutcome(_ outcome: String) { wake?.lastOutcome = outcome }

    func clearPreRoll() {
        preRoll.removeAll()
        wake?.lookback.removeAll()
    }

    /// A capture's leading audio: the pre-roll (push-to-talk) or the wake lookback (which holds the trigger).
    func leading(_ leading: TalkMachine.Leading) -> [PCMBuffer] {
        let first: [PCMBuffer]
        switch leading {
        case .preRoll:
            first = preRoll.drain()
        case .wakeLookback:
            first = wake?.lookback.drain() ?? []
            preRoll.removeAll()
        }
        wake?.lookback.removeAll()
        return first
    }

    // MARK: wake settings

    var wakeConfig: WakeConfig? { wake?.config }
    var wakeStatus: WakeStatus? { wake?.status }
    /// The chime a detection plays (nil: wake off or no sound).
    var wakeChime: PCMBuffer? { wake?.chimeSound }
    /// The chime `playChime` plays: the configured sound, the generated one when wake is off.
    var chimeSound: PCMBuffer? { wake.map { $0.chimeSound } ?? WakeListener.chime() }

    func enableWake(_ wakeConfig: WakeConfig, triggers: [String]?) {
        let w = WakeListener(config: wakeConfig, triggers: triggers ?? knownTriggers ?? VoiceWakeTriggers.defaults)
        if let r = knownRouting { w.setRouting(r) }
        wake = w
        logWakeModels(w)
        if let problem = w.chimeProblem { log.log(.warning, "wake", problem) }
    }

    func disableWake() { wake = nil }

    func setRouting(_ r: JSONValue?) {
        knownRouting = r
        wake?.setRouting(r)
    }

    func setTriggers(_ list: [String]) {
        knownTriggers = list
        if let w = wake, w.setTriggers(list) {
            log.log(.info, "wake", "triggers now \(w.triggers)")
            logWakeModels(w)
        }
    }

    private func logWakeModels(_ w: WakeListener) {
        for m in w.missing { log.log(.warning, "wake", m.description) }
        if let e = w.loadError { log.log(.error, "wake", e) }
    }
}
