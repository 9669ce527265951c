// The talk turn's executor: one loop over one inbox. Every command, microphone frame, gateway
// event and executor result is an item in the inbox; the loop feeds each to TalkMachine and
// carries out the actions it returns, one item at a time. Work that takes long (closing the
// relay, encoding the voice note, the outbox write, a reply's speech) runs as a child task of
// the loop and posts its result back into the same inbox, so nothing races the machine and
// nothing re-enters it while it is suspended. The public methods only post and wait.

import Audio
import ClawvoiceCore
import Foundation
import GatewayClient
import GatewayProtocol
import WakeWord
import WebSocketTransport

public struct TalkConfig: Sendable, Equatable {
    /// Silence after speech that ends a `once` capture (talk.silenceTimeoutMs; the gateway's value wins).
    /// 900 ms: the shortest of 400/700/900 that cuts ≤ 2 % of sentences early (clawvoice-bench --endpoint).
    public var silenceTimeoutMs = 900
    /// `once` ends here at the latest, as on the iPhone.
    public var onceMaxMs = 12_000
    /// A node muted before a restart starts muted, before anything can read its status (read at
    /// init only; `setMuted` changes it later).
    public var startsMuted = false
    /// Hard cap for a held capture.
    public var captureMaxMs = 60_000
    /// Audio from before the command that the capture starts with (0–2000 ms).
    public var preRollMs = 300
    public var opusBitrate = 20_000
    public var opusComplexity = 5
    /// Where recordings (voice notes) of recent captures are kept (nil, the default: not written
    /// to disk), how many, and for how long (nil: no age limit).
    public var voiceNoteDirectory: String?
    public var keepVoiceNotes = 20
    public var voiceNotesMaxAgeMs: Int64? = 7 * 86_400_000
    /// The chat session turns go to; nil means the gateway's main session.
    public var sessionKey: String?
    public var replyTimeoutMs: Int64 = 120_000
    public var speakReplies = true
    /// Stop speaking when the user talks over the assistant (only on a headset: no echo).
    public var interruptOnSpeech = true
    /// Whether the speaker is a headset; on loudspeakers the microphone is muted while speaking.
    public var headset = false
    /// Voice that barges in: at least this much speech above the level while the assistant talks.
    public var bargeInMs = 300
    public var bargeInLevelDbfs = -35.0
    /// Loudspeaker mode mutes the microphone while speaking and for this long after.
    public var speakerTailMs = 300
    /// After a reply, listen this long for a next turn without the wake word (0: off).
    public var followUpMs = 0
    /// The wake phrase that starts a realtime call instead of a turn (talk.callWakeWord).
    public var callWakeWord: String?
    /// A command arriving while the microphone or the operator session is still starting waits this long.
    public var partsWaitMs: Int64 = 3_000
    /// Echo cancellation against the speaker (config audio.echoCancel): nil means on for
    /// loudspeakers and off for headsets; it needs the speech sink's EchoReference.
    public var echoCancel: Bool?
    /// How late the speaker's sound reaches the microphone (playback and capture buffering).
    public var echoDelayMs = 60
    /// Where the stop word's model (`stop.json`) is looked for; nil: no stop word (config
    /// talk.stopWord false). It listens only while the node speaks on a headset or an
    /// echo-cancelled loudspeaker.
    public var stopWordModelsDirectory: String?
    /// 0…1 as wake.sensitivity: 0.5 is the stop head's trained threshold, higher stops more
    /// easily. 0.7 by default: the head listens only while the node speaks, where a missed
    /// "stop" costs more than a reply cut short (README, "Full duplex, measured").
    public var stopWordSensitivity = 0.7
    /// Feedback sounds (end of listening, error, mute, unmute); none by default.
    public var cues: [TalkCue: WakeChime] = [:]
    /// What ends an utterance (audio.voiceDetector): the voice detector (models/voice.json in
    /// `modelsDirectory`, nil: where the wake models are found) or the level rule.
    public var voiceDetector: VoiceDetectorChoice = .model
    public var modelsDirectory: String?
    /// The detector's threshold; replaced by the model's own when it loads.
    public var voiceThreshold = 0.5
    /// Whether push-to-talk and wake turns end when the end-of-turn model (models/turn.json)
    /// hears the turn end, the silence window being the ceiling (issue 25); false: the window alone.
    public var endOfTurn = TalkConfig.endOfTurnDefault
    public static let endOfTurnDefault = false
    /// The end-of-turn model, once read (by the talk loop, next to the voice detector).
    public var turnModel: TurnModel?
    public init() {}
}

/// Something the talk turn did, for `clawvoice events` and event commands: a name
/// (wake, listeningStarted, listeningStopped, replyStarted, replyFinished, muted, unmuted, error)
/// and its fields (captureId, sessionKey, runId, phrase, reason …).
public struct TalkEvent: Sendable, Equatable {
    public var name: String
    public var fields: [String: String]
    public init(_ name: String, _ fields: [String: String] = [:]) { self.name = name; self.fields = fields }
}

/// The talk turn as `status` and tests see it.
public enum TalkPhase: Sendable, Equatable {
    case idle
    case capturing(String)
    case ending(String)
}

public actor TalkController {
    /// Latency marks of the last capture, for the bench.
    public struct CaptureTiming: Sendable {
        public var startToFirstFrame: Duration?
        public var stopToLastUplinkCall: Duration?
    }

    /// What the loop publishes after every item: status reads it without waiting for the loop.
    struct Snapshot: Sendable {
        var phase = TalkPhase.idle
        var sessionKey: String?
        var pendingInterruption: String?
        var gatedFrames = 0
        var bargeIns = 0
        var stopWords = 0
        var silenceTimeoutMs = 900
        var wake: WakeStatus?
        var lastVoiceNote: [UInt8]?
        var lastTiming: CaptureTiming?
        var lastSpeech: SpeechReport?
        var lastReply: ReplyStream?
        var muted = false
    }

    enum Item: Sendable {
        case input(TalkMachine.Input)
        /// `token`: drawn by the caller, so its cancellation can name the command (`invokeEnded`).
        case command(TalkMachine.Command, session: String?, token: Int, CheckedContinuation<TalkMachine.Answer, Never>)
        case frame(PCMBuffer, at: ContinuousClock.Instant, followsGap: Bool)
        case event(EventFrame)
        /// Runs on the loop, between two items.
        case call(@Sendable (TalkController) async -> Void)
        case captureDone(id: String, TalkMachine.Finished, note: [UInt8]?, timing: CaptureTiming)
        case replySpoken(SpeechReport)
        case timerFired
    }

    private let channel: any OperatorChannel
    private let speech: SpeechOutput
    private let log: LogSink
    private var outbox: OutboxSender?
    private let onSessionChange: (@Sendable (String) -> Void)?
    private let echoReference: EchoReference?
    private var cleaner: CaptureCleaner?
    private let onMuteChange: (@Sendable (Bool) -> Void)?
    private var onEvent: (@Sendable (TalkEvent) -> Void)?
    /// Ends the realtime call (TalkController+Call.swift).
    var onEndCall: (@Sendable (String) -> Void)?
    /// Where a call's wake phrase goes (the call service's start).
    var onStartCall: (@Sendable (String) -> Void)?
    /// Where the microphone goes while a call holds the room (echo-cancelled when that is on).
    var onCallFrame: (@Sendable (PCMBuffer) -> Void)?
    private var startedReplies: Set<String> = []
    private var sounds: FeedbackSounds
    private let inbox: AsyncStream<Item>
    private let post: AsyncStream<Item>.Continuation
    private let published: Locked<Snapshot>
    private let tokens = Locked(0)
    private let origin = ContinuousClock.now

    // Loop state: touched only by the loop (run) and what it calls.
    private var machine: TalkMachine
    private var config: TalkConfig
    private var preRoll: PreRollBuffer
    private var wake: WakeListener?
    private var stopWord: StopWordListener?
    /// Whether the stop head was fed the frame being processed (else its stream has a gap).
    private var stopFed = false
    private var knownTriggers: [String]?
    private var knownRouting: JSONValue?
    private struct CaptureIO {
        var uplink: RelayUplink
        var pcm: [Int16] = []
        var startedAt = ContinuousClock.now
        var firstFrameAt: ContinuousClock.Instant?
        var stoppedAt: ContinuousClock.Instant?
    }
    private var captures: [String: CaptureIO] = [:]
    /// Voice notes of finished captures, until their turn is delivered (bytes, milliseconds).
    private var notes: [String: ([UInt8], Double)] = [:]
    private var streams: [String: ReplyStream] = [:]
    private var answers: [Int: CheckedContinuation<TalkMachine.Answer, Never>] = [:]
    /// The turn being delivered and the outbox it went to (a withdrawal asks the same one).
    private var delivery: (id: String, outbox: OutboxSender?)?
    private var armedAtMs: Int64?
    private var currentChat: ChatEvent?
    private var jobs: [@Sendable () async -> Void] = []

    public init(channel: any OperatorChannel, speech: SpeechOutput, config: TalkConfig, log: LogSink,
                outbox: OutboxSender? = nil, onSessionChange: (@Sendable (String) -> Void)? = nil,
                onMuteChange: (@Sendable (Bool) -> Void)? = nil, echoReference: EchoReference? = nil) {
        self.echoReference = echoReference
        self.onMuteChange = onMuteChange
        self.sounds = FeedbackSounds(config.cues)
        for problem in sounds.problems { log.log(.warning, "talk", problem) }
        self.channel = channel
        self.speech = speech
        self.config = config
        self.log = log
        self.outbox = outbox
        self.onSessionChange = onSessionChange
        self.preRoll = PreRollBuffer(milliseconds: config.preRollMs)
        self.machine = TalkMachine(settings: Self.settings(config, wake: nil, echo: Self.echoOn(config, echoReference)),
                                   chosenSession: config.sessionKey)
        if let dir = config.stopWordModelsDirectory {
            let (listener, problem) = StopWordListener.load(directory: dir, sensitivity: config.stopWordSensitivity)
            stopWord = listener
            if let problem { log.log(.warning, "talk", problem) }
        }
        // Idle and with nothing waiting, muting has nothing to end, and no one observes events yet.
        if config.startsMuted { _ = machine.handle(.setMuted(true, announce: false), nowMs: 0) }
        (inbox, post) = AsyncStream.makeStream(of: Item.self)
        var s = Snapshot()
        s.muted = machine.muted
        s.sessionKey = config.sessionKey
        s.silenceTimeoutMs = config.silenceTimeoutMs
        published = Locked(s)
    }

    static func echoOn(_ c: TalkConfig, _ reference: EchoReference?) -> Bool {
        reference != nil && (c.echoCancel ?? !c.headset)
    }

    static func settings(_ c: TalkConfig, wake: WakeConfig?, echo: Bool = false) -> TalkMachine.Settings {
        var s = TalkMachine.Settings()
        s.echoCancelled = echo
        s.silenceTimeoutMs = c.silenceTimeoutMs
        s.voiceDetector = c.voiceDetector
        s.voiceThreshold = c.voiceThreshold
        s.turnModel = c.endOfTurn && c.voiceDetector == .model ? c.turnModel : nil
        s.onceMaxMs = c.onceMaxMs
        s.captureMaxMs = c.captureMaxMs
        s.headset = c.headset
        s.interruptOnSpeech = c.interruptOnSpeech
        s.bargeInMs = c.bargeInMs
        s.bargeInLevelDbfs = c.bargeInLevelDbfs
        s.speakerTailMs = c.speakerTailMs
        s.speakReplies = c.speakReplies
        s.replyTimeoutMs = c.replyTimeoutMs
        s.partsWaitMs = c.partsWaitMs
        s.followUpMs = c.followUpMs
        s.callWakePhrase = c.callWakeWord
        s.stopWordEnabled = c.stopWordModelsDirectory != nil
        if let w = wake {
            s.wakeEnabled = w.enabled
            s.wakeSilenceAfterSpeechMs = w.silenceAfterSpeechMs
            s.wakeTriggerOnlyMs = w.silenceAfterTriggerOnlyMs
            s.wakeMaxCaptureMs = w.maxCaptureMs
            s.wakeDebounceMs = Int64(w.debounceMs)
            s.wakeMinCommandCharacters = w.minCommandCharacters
        }
        return s
    }

    // MARK: the loop

    /// Runs the inbox until the task is cancelled; executor jobs are its child tasks.
    public func run() async {
        loadVoiceDetector()
        await withDiscardingTaskGroup { group in
            for await item in inbox {
                await process(item)
                for job in takeJobs() { group.addTask(operation: job) }
            }
            group.cancelAll()
        }
        log.log(.debug, "talk", "talk loop ended (cancelled: \(Task.isCancelled))")
    }

    private func takeJobs() -> [@Sendable () async -> Void] {
        defer { jobs.removeAll() }
        return jobs
    }

    private var nowMs: Int64 {
        let d = ContinuousClock.now - origin
        return d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000
    }

    private func process(_ item: Item) async {
        switch item {
        case .input(let input):
            await step(input)
        case .command(let command, let session, let token, let cont):
            await sampleOperator()
            answers[token] = cont
            await step(.command(command, token: token, freshId: UUID().uuidString, session: session))
        case .frame(let raw, let at, let gap):
            // A capture gap: the detector starts a fresh stream with the next frame it hears.
            if gap { wake?.detector?.reset(); wake?.lookback.removeAll(); cleaner?.gap() }
            stopFed = false
            let cleaned = clean(raw, at: at)
            let heard = cleaned.uplink
            if machine.callMicrophoneOpen { onCallFrame?(heard) }
            // The machine decides on the uplink's frame; its wake and stop actions for this frame
            // run their heads on the linear path's copy of it (CleanedFrame.detector).
            await step(.frame(heard, speaker: await speech.speakerState(), voice: voiceProbability(heard, followsGap: gap)),
                       detectorFrame: cleaned.detector)
            if !stopFed, let sw = stopWord, sw.gap() {
                log.log(.debug, "talk", String(format: "stop word: highest score while speaking %.3f (threshold %.3f)", sw.peak, sw.threshold))
            }
        case .event(let event):
            await gatewayEvent(event)
        case .call(let body):
            await body(self)
        case .captureDone(let id, let finished, let note, let timing):
            if captures.removeValue(forKey: id) != nil, let note { notes[id] = (note, finished.audioMs) }
            published.withLock { $0.lastVoiceNote = note; $0.lastTiming = timing }
            await step(.relayFinished(id: id, finished))
            // A capture's buffers (its PCM, the uplink's pages, the voice note) are freed now: hand
            // the heap's free pages back, or turn after turn the allocator keeps them (issue 25).
            if captures.isEmpty { ProcessMemory.trim() }
        case .replySpoken(let report):
            published.withLock { $0.lastSpeech = report }
            await step(.replyDone(stopped: report.outcome == .stopped))
        case .timerFired:
            armedAtMs = nil
            await sampleOperator()
            await step(.tick)
        }
        publish()
    }

    /// The microphone frame with the speaker's echo taken out, when echo cancellation is on, for
    /// the uplink and for the detectors (the frame itself for both when it is off).
    private func clean(_ frame: PCMBuffer, at t: ContinuousClock.Instant) -> (uplink: PCMBuffer, detector: PCMBuffer?) {
        guard machine.settings.echoCancelled, let reference = echoReference, frame.format == .voice else { return (frame, nil) }
        if cleaner == nil {
            do { cleaner = try CaptureCleaner(reference: reference, delayMs: config.echoDelayMs) } catch {
                log.log(.warning, "audio", "echo cancellation unavailable: \(error)")
                machine.replaceSettings(Self.settings(config, wake: wake?.config, echo: false))
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
    private var cleanedFrames = 0

    /// The voice detector's probability for the frame (nil: the level rule decides, because it
    /// is off or its model is missing, which `run()` said once). Only a capture's endpointer reads
    /// it, so it runs only then (issue 25: idle, it was CPU spent on nothing); a detector that
    /// missed frames starts from the last frames kept in `voiceContext`, which hold its whole
    /// window, so its probabilities are the ones it would have given having heard every frame.
    private func voiceProbability(_ frame: PCMBuffer, followsGap: Bool) -> Double? {
        if followsGap { voiceContext.removeAll(); voiceCurrent = false }
        guard config.voiceDetector == .model, !machine.muted, frame.format == .voice, let voice else { voiceCurrent = false; return nil }
        defer { voiceContext.append(frame) }
        guard case .capturing = machine.phase else { voiceCurrent = false; return nil }
        if !voiceCurrent {
            voice.reset()
            for f in voiceContext.drain() { voice.probability(f.samples) }
            voiceCurrent = true
        }
        return voice.probability(frame.samples)
    }
    /// The last frames heard (as many as the voice detector's window spans), and whether the
    /// detector heard the frame before this one.
    private var voiceContext = PreRollBuffer(milliseconds: 0)
    private var voiceCurrent = false

    /// Reads the voice detector's model once, before the loop takes its first frame.
    private func loadVoiceDetector() {
        guard config.voiceDetector == .model, voice == nil else { return }
        do {
            let model = try VoiceDetectorModel.load(directory: config.modelsDirectory ?? WakeModelCatalog.defaultDirectory())
            voice = VoiceDetector(model: model)
            voiceContext = PreRollBuffer(milliseconds: VoiceDetector.contextFrames(model) * 20)
            config.voiceThreshold = model.manifest.threshold
            var s = machine.settings
            s.voiceThreshold = model.manifest.threshold
            if config.endOfTurn {
                do {
                    config.turnModel = try TurnModel.load(directory: config.modelsDirectory ?? WakeModelCatalog.defaultDirectory())
                    s.turnModel = config.turnModel
                } catch {
                    log.log(.warning, "audio", "end-of-turn model unavailable (\(error)); turns end on the silence window")
                }
            }
            machine.replaceSettings(s)
        } catch {
            log.log(.warning, "audio", "voice detector unavailable (\(error)); the end of speech is judged by level")
        }
    }
    private var voice: VoiceDetector?
    /// Whether the wake detector heard the previous frame.
    private var wakeHeardLast = false

    /// The operator session's state as the channel sees it now, fed to the machine when it
    /// differs (the daemon also posts every change; tools and tests may not).
    private func sampleOperator() async {
        let connected = await channel.connected()
        let main = connected ? await channel.mainSessionKey() : nil
        if connected != machine.operatorConnected || (main != nil && main != machine.mainSessionKey) {
            await step(.operatorState(connected: connected, mainSessionKey: main))
        }
    }

    private func publish() {
        let m = machine
        published.withLock { s in
            switch m.phase {
            case .idle: s.phase = .idle
            case .capturing(let c): s.phase = .capturing(c.id)
            case .ending(let c), .delivering(let c, _): s.phase = .ending(c.id)
            }
            s.sessionKey = m.chosenSession
            s.pendingInterruption = m.pendingInterruption
            s.gatedFrames = m.gatedFrames
            s.bargeIns = m.bargeIns
            s.stopWords = m.stopWords
            s.silenceTimeoutMs = config.silenceTimeoutMs
            s.wake = wake?.status
            s.wake?.muted = m.muted
            s.muted = m.muted
        }
    }

    /// Feeds one input to the machine and carries out its actions; a wake detection in a frame
    /// is fed back before the next item, so no frame slips between the detection and its capture.
    /// `detectorFrame`: the linear canceller's copy of a frame input (nil: no echo cancellation),
    /// which that frame's `listen`/`listenForStop` actions hear instead of the uplink's frame.
    private func step(_ first: TalkMachine.Input, detectorFrame: PCMBuffer? = nil) async {
        var pending = [first]
        while !pending.isEmpty {
            let input = pending.removeFirst()
            if case .wakeHeard = input { await sampleOperator() }
            for action in machine.handle(input, nowMs: nowMs) {
                if let follow = await perform(action, detectorFrame: detectorFrame) { pending.append(follow) }
            }
        }
    }

    private func perform(_ action: TalkMachine.Action, detectorFrame: PCMBuffer?) async -> TalkMachine.Input? {
        switch action {
        case .answer(let token, let answer):
            publish()  // first: the caller's next status read must show what its command did
            answers.removeValue(forKey: token)?.resume(returning: answer)
        case .stopSpeech:
            await speech.stop()
        case .openCapture(let id, let sessionKey, let leading):
            await openCapture(id, sessionKey: sessionKey, leading: leading)
            var f = ["captureId": id, "trigger": leading == .wakeLookback ? "wake" : "ptt"]
            f["sessionKey"] = sessionKey ?? machine.currentSession
            emit("listeningStarted", f)
        case .appendFrame(let id, let frame):
            wakeHeardLast = false
            guard var io = captures[id] else { break }
            if io.firstFrameAt == nil { io.firstFrameAt = .now }
            io.pcm += frame.samples
            captures[id] = io
            // Relay calls leave in the order the uplink receives frames (one loop, one order).
            await io.uplink.append(frame)
        case .finishCapture(let id):
            finishCapture(id)
            emit("listeningStopped", ["captureId": id, "reason": "ended"])
        case .cancelCapture(let id):
            // A capture already ended (finishCapture) said listeningStopped then.
            if let io = captures[id], io.stoppedAt == nil { emit("listeningStopped", ["captureId": id, "reason": "cancelled"]) }
            if let io = captures.removeValue(forKey: id) {
                let uplink = io.uplink
                jobs.append { await uplink.cancel() }
            }
            notes.removeValue(forKey: id)
        case .deliver(let id, let message, let voiceNote, let sessionKey, let key):
            deliver(id: id, message: message, voiceNote: voiceNote, sessionKey: sessionKey, idempotencyKey: key)
        case .withdrawTurn(let id, let key):
            // The outbox the turn went to. Without one it goes straight to chat.send: it cannot be taken back.
            let (outbox, post) = (delivery?.id == id ? delivery?.outbox : nil, self.post)
            jobs.append {
                let removed = await outbox?.withdraw(idempotencyKey: key) ?? false
                post.yield(.input(.withdrawn(id: id, removed: removed)))
            }
        case .followReply(let runId):
            let stream = ReplyStream(runId: runId, speech: speech, route: .talkSpeak, log: log)
            streams[runId] = stream
            published.withLock { $0.lastReply = stream }
        case .feedReply(let runId):
            guard let stream = streams[runId], let chat = currentChat else { break }
            if startedReplies.insert(runId).inserted { emit("replyStarted", ["runId": runId, "sessionKey": chat.sessionKey]) }
            await stream.feed(chat)
            if chat.state == .final || chat.state == .aborted || chat.state == .error {
                streams.removeValue(forKey: runId)
                reportWhenSpoken(stream)
                startedReplies.remove(runId)
                emit("replyFinished", ["runId": runId, "sessionKey": chat.sessionKey, "state": "\(chat.state)"])
            }
        case .closeReply(let runId):
            guard let stream = streams.removeValue(forKey: runId) else { break }
            if startedReplies.remove(runId) != nil { emit("replyFinished", ["runId": runId, "state": "closed"]) }
            await stream.close()
            reportWhenSpoken(stream)
        case .rekeyReply(let from, let to):
            if let s = streams.removeValue(forKey: from) { streams[to] = s }
        case .listen(let frame, let listensForWake):
            preRoll.append(frame)
            guard let w = wake, w.config.enabled else { break }
            guard listensForWake else { w.lookback.append(frame); wakeHeardLast = false; break }
            // Frames it did not hear (push-to-talk, speech, debounce) are a gap to the detector.
            if !wakeHeardLast { w.detector?.reset() }
            wakeHeardLast = true
            guard let d = w.feed(detectorFrame ?? frame) else { break }
            w.detections += 1
            w.lastPhrase = d.phrase
            log.log(.info, "wake", "heard \"\(d.phrase)\" (score \(String(format: "%.2f", d.score)))")
            emit("wake", ["phrase": d.phrase, "score": String(format: "%.2f", d.score)])
            return .wakeHeard(phrase: d.phrase, triggers: w.triggers, routedSession: w.session(for: d.phrase),
                              freshId: UUID().uuidString)
        case .listenForStop(let frame):
            guard let sw = stopWord else { break }
            stopFed = true
            guard let d = sw.feed(detectorFrame ?? frame) else { break }
            log.log(.info, "talk", "heard the stop word (score \(String(format: "%.2f", d.score)))")
            emit("stopWord", ["score": String(format: "%.2f", d.score)])
            return .stopWordHeard
        case .resetWake:
            wake?.detector?.reset()
        case .wakeRelief(let logits):
            wake?.detector?.thresholdRelief = Float(logits)
        case .playChime:
            if let pcm = wake?.chimeSound {
                let speech = self.speech
                jobs.append { _ = await speech.playCue(pcm) }
            }
        case .measureBargeIn:
            let position = await (published.withLock { $0.lastReply })?.positionMs ?? 0
            return .bargeInPosition(ms: position)
        case .persistSession(let key):
            onSessionChange?(key)
        case .wakeOutcome(let outcome):
            wake?.lastOutcome = outcome
        case .log(let level, let category, let message):
            log.log(level, category, message)
            if level >= .warning { lastWarning = message }
        case .wakeAt(let ms):
            armTimer(ms)
        case .mutedChanged(let on, let announce):
            onMuteChange?(on)
            emit(on ? "muted" : "unmuted")
            if announce { playCue(on ? .mute : .unmute) }
        case .clearPreRoll:
            preRoll.removeAll()
            wake?.lookback.removeAll()
        case .endCall(let reason):
            onEndCall?(reason)
        case .startCall(let phrase):
            if let onStartCall { onStartCall(phrase) } else { log.log(.warning, "wake", "\"\(phrase)\" starts a call, but calls are off: set talk.calls to true in the config and restart") }
        case .cue(let cue):
            playCue(cue)
            if cue == .error { emit("error", ["message": lastWarning ?? "the turn could not start or be queued"]) }
        }
        return nil
    }

    /// A cue never cuts speech (one playback stream at a time): while the speaker plays it is skipped.
    private var lastWarning: String?

    private func emit(_ name: String, _ fields: [String: String?] = [:]) {
        guard let onEvent else { return }
        onEvent(TalkEvent(name, fields.compactMapValues { $0 }))
    }

    func setEventHandler(_ f: (@Sendable (TalkEvent) -> Void)?) { onEvent = f }

    private func playCue(_ cue: TalkCue) {
        guard let pcm = sounds.sounds[cue] else { return }
        let speech = self.speech
        jobs.append {
            guard await !speech.speakerState().playing else { return }
            _ = await speech.playCue(pcm)
        }
    }

    private func armTimer(_ ms: Int64) {
        if let armed = armedAtMs, armed <= ms { return }
        armedAtMs = ms
        let delay = max(ms - nowMs, 0)
        let post = self.post
        jobs.append {
            try? await Task.sleep(for: .milliseconds(delay))
            if !Task.isCancelled { post.yield(.timerFired) }
        }
    }

    private func reportWhenSpoken(_ stream: ReplyStream) {
        let post = self.post
        jobs.append {
            await stream.done()
            if let last = await stream.spoken.last { post.yield(.replySpoken(last)) }
        }
    }

    // MARK: captures

    private func openCapture(_ id: String, sessionKey: String?, leading: TalkMachine.Leading) async {
        let uplink = RelayUplink(channel: channel, sessionKey: sessionKey, log: log, opusBitrate: config.opusBitrate,
                                 opusComplexity: config.opusComplexity)
        var io = CaptureIO(uplink: uplink)
        let first: [PCMBuffer]
        switch leading {
        case .preRoll:
            first = preRoll.drain()
        case .wakeLookback:
            first = wake?.lookback.drain() ?? []
            preRoll.removeAll()
        }
        wake?.lookback.removeAll()
        for f in first { io.pcm += f.samples }
        captures[id] = io
        // Inline on the loop: the leading audio is in the uplink before any later frame, in order;
        // the relay session opens in the background and the uplink holds the frames meanwhile.
        await uplink.start()
        for f in first { await uplink.append(f) }
    }

    private func finishCapture(_ id: String) {
        // The entry stays until captureDone: transcripts still reach the finishing uplink.
        guard var io = captures[id] else { return }
        io.stoppedAt = .now
        captures[id] = io
        let (uplink, pcm, bitrate, post) = (io.uplink, io.pcm, config.opusBitrate, self.post)
        let (startedAt, firstFrameAt, stoppedAt) = (io.startedAt, io.firstFrameAt, io.stoppedAt ?? .now)
        let save = saveVoiceNote
        jobs.append {
            let outcome = await uplink.finish()
            var timing = CaptureTiming(startToFirstFrame: firstFrameAt.map { $0 - startedAt })
            if let last = await uplink.lastSendAt { timing.stopToLastUplinkCall = last - stoppedAt }
            let buffer = PCMBuffer(format: .voice, samples: pcm)
            let note = buffer.isEmpty ? nil : try? OggOpusVoiceNote.encode(buffer, bitrate: bitrate)
            if let note { save(note, id) }
            post.yield(.captureDone(id: id, TalkMachine.Finished(outcome: outcome, audioMs: buffer.durationMilliseconds,
                                                                  hasVoiceNote: note != nil),
                                    note: note, timing: timing))
        }
    }

    private var saveVoiceNote: @Sendable ([UInt8], String) -> Void {
        let (dir, keep, maxAge) = (config.voiceNoteDirectory, config.keepVoiceNotes, config.voiceNotesMaxAgeMs)
        return { note, id in VoiceNotes.save(note, id: id, directory: dir, keep: keep, maxAgeMs: maxAge) }
    }

    /// Puts the turn in the durable outbox (or sends it, without one); answers `delivered`.
    /// `queued` only once the turn is committed; a failed write is `not_queued`.
    private func deliver(id: String, message: String, voiceNote: Bool, sessionKey: String?, idempotencyKey idem: String) {
        var noteAttachment: JSONValue?
        if voiceNote, let (note, ms) = notes[id] {
            noteAttachment = ["type": "audio", "mimeType": "audio/ogg", "fileName": .string("\(id).opus"),
                          "content": .string(Data(note).base64EncodedString()),
                          "sizeBytes": .number(Double(note.count)), "durationMs": .number(ms.rounded())]
        }
        notes.removeValue(forKey: id)
        delivery = (id, outbox)
        let (outbox, channel, log, post, attachment) = (self.outbox, self.channel, self.log, self.post, noteAttachment)
        jobs.append {
            let key: String
            if let k = sessionKey { key = k } else { key = await channel.mainSessionKey() ?? "main" }
            if let outbox {
                do {
                    // nil: a cancel took the turn back before it was written.
                    let item = try await outbox.enqueueTurn(sessionKey: key, message: message,
                                                            attachmentsJSON: attachment.map { JSONValue.array([$0]).description },
                                                            thinking: "low", idempotencyKey: idem)
                    post.yield(.input(.delivered(id: id, item == nil ? .cancelled : .queued, idempotencyKey: idem)))
                } catch {
                    log.log(.error, "talk", "the turn could not be queued: \(error)")
                    post.yield(.input(.delivered(id: id, .notQueued, idempotencyKey: idem)))
                }
                return
            }
            post.yield(.input(.delivered(id: id, .queued, idempotencyKey: idem)))
            do {
                let params = ChatSendParams(sessionKey: key, message: message, idempotencyKey: idem, thinking: "low",
                                            attachments: attachment.map { [$0] })
                let ack = try await channel.request(GatewayMethod.chatSend, params: try JSONValue(encoding: params), timeoutMs: 30_000)
                if let runId = ack["runId"]?.stringValue { post.yield(.input(.turnSent(idempotencyKey: idem, runId: runId))) }
            } catch {
                log.log(.error, "talk", "chat.send failed: \(error)")
            }
        }
    }

    // MARK: gateway events

    private func gatewayEvent(_ event: EventFrame) async {
        switch event.event {
        case GatewayEvent.talkEvent:
            guard let t = TalkTranscriptEvent(payload: event.payload) else { return }
            // Transcripts belong to the capture being captured or finished; the uplink filters by session id.
            for io in captures.values { await io.uplink.handle(t) }
        case GatewayEvent.chat:
            guard let c = ChatEvent(payload: event.payload) else { return }
            currentChat = c
            await step(.chat(runId: c.runId, final: c.state == .final || c.state == .aborted || c.state == .error))
            currentChat = nil
        case "voicewake.changed":
            if let t = VoiceWakeTriggers(payload: event.payload) { setWakeTriggers(t.triggers) }
        case "voicewake.routing.changed":
            knownRouting = event.payload
            wake?.setRouting(event.payload)
        default:
            break
        }
    }
}

// MARK: the public face: each call posts to the inbox and, where it answers, waits.

extension TalkController {
    /// Posts an item. Once the loop has ended (daemon stopping) nothing is left waiting: a
    /// command is refused, a call runs on its own.
    nonisolated func send(_ item: Item) {
        guard case .terminated = post.yield(item) else { return }
        switch item {
        case .command(_, _, _, let c): c.resume(returning: .failed(PTTError(code: "UNAVAILABLE", message: "the talk loop has stopped")))
        case .call(let body): Task { await body(self) }  // Unstructured: untyped .call items go with issue 27 item 4
        default: break
        }
    }

    /// Posts `body` to run on the loop and waits until it has.
    nonisolated func onLoop<T: Sendable>(_ body: @escaping @Sendable (TalkController) async -> T) async -> T {
        await withCheckedContinuation { (c: CheckedContinuation<T, Never>) in
            send(.call { talk in
                let value = await body(talk)
                await talk.publish()  // what the caller reads next reflects what it just did
                c.resume(returning: value)
            })
        }
    }

    /// Posts a command and waits for its answer. A caller that is cancelled meanwhile (the
    /// gateway's node.invoke.cancel or timeout, `InvokeSignal` says which) is an input of its
    /// own: the machine decides what it means for the turn the command waits for, and answers.
    private nonisolated func command(_ c: TalkMachine.Command, session: String? = nil) async -> TalkMachine.Answer {
        let token = tokens.withLock { $0 += 1; return $0 }
        let signal = InvokeSignal.current
        let ended: @Sendable () -> Void = { [self] in send(.input(.invokeEnded(token: token, signal?.reason ?? .cancelled))) }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { cont in
                send(.command(c, session: session, token: token, cont))
                // Cancelled before the command was posted: onCancel has run already, too early
                // for the machine to know the token. Say it again behind the command.
                if Task.isCancelled { ended() }
            }
        } onCancel: {
            ended()
        }
    }

    /// `session`: where the turn goes (the gateway-stamped key of an invoke); nil: the current session.
    public nonisolated func start(session: String? = nil) async throws(PTTError) -> String {
        switch await command(.start, session: session) {
        case .captureId(let id): return id
        case .result(let r): return r.captureId
        case .failed(let e): throw e
        }
    }

    public nonisolated func stop() async -> PTTResult { await result(of: .stop) }
    public nonisolated func cancel() async -> PTTResult { await result(of: .cancel) }

    public nonisolated func once(session: String? = nil) async throws(PTTError) -> PTTResult {
        switch await command(.once, session: session) {
        case .captureId(let id): return PTTResult(captureId: id, status: .empty)
        case .result(let r): return r
        case .failed(let e): throw e
        }
    }

    private nonisolated func result(of c: TalkMachine.Command) async -> PTTResult {
        switch await command(c) {
        case .captureId(let id): return PTTResult(captureId: id, status: .empty)
        case .result(let r): return r
        case .failed(let e): return PTTResult(captureId: "", transcript: e.description, status: .cancelled)
        }
    }

    /// One 20 ms microphone frame (16 kHz mono), in order, from the capture loop.
    /// `followsGap`: the capture lost audio before this frame (the sound server came back).
    public nonisolated func micFrame(_ frame: PCMBuffer, at: ContinuousClock.Instant = .now, followsGap: Bool = false) {
        send(.frame(frame, at: at, followsGap: followsGap))
    }
    public nonisolated func setMicrophone(_ state: MicrophoneState) { send(.input(.microphone(state))) }
    /// A gateway event for Talk: transcripts from the relay, chat for replies, voicewake changes.
    public nonisolated func handle(_ event: EventFrame) { send(.event(event)) }

    /// `clawvoice session use KEY`: talk to another chat session from now on.
    public nonisolated func switchSession(to key: String) async {
        send(.input(.switchSession(key, reason: "session switched to \(key)")))
        await barrier()
    }

    /// The operator session's state: losing it, or the gateway naming a different main session
    /// (when none was chosen here), is a session switch.
    public nonisolated func operatorChanged(connected: Bool, mainSessionKey: String?) async {
        send(.input(.operatorState(connected: connected, mainSessionKey: mainSessionKey)))
        await barrier()
    }

    /// A session switch, gateway switch or lost connection: cancel the capture, drop late results, stop speaking.
    public nonisolated func interrupt(reason: String) async {
        send(.input(.interrupt(reason: reason)))
        await barrier()
    }

    /// `clawvoice stop`: stop speaking now, as a barge-in would. True when something was playing.
    @discardableResult
    public nonisolated func stopSpeaking() async -> Bool {
        await onLoop { talk in
            let speaking = await talk.speech.speakerState().playing
            await talk.step(.stopSpeaking(speaking: speaking))
            return speaking
        }
    }

    /// `clawvoice mute|unmute`: microphone and wake word off (on). `announce`: play its sound.
    public nonisolated func setMuted(_ on: Bool, announce: Bool = true) async {
        send(.input(.setMuted(on, announce: announce)))
        await barrier()
    }

    public nonisolated var muted: Bool { published.withLock { $0.muted } }

    /// Every TalkEvent from now on, on the loop (keep it quick: hand it on).
    public nonisolated func observeEvents(_ f: @escaping @Sendable (TalkEvent) -> Void) async {
        await onLoop { await $0.setEventHandler(f) }
    }

    /// Waits until everything posted before it has been processed.
    public nonisolated func barrier() async { await onLoop { _ in () } }

    public nonisolated func followReply(runId: String) { send(.input(.followReply(runId: runId))) }
    /// The outbox sent a turn: replies come under its run id, which may differ from the key.
    public nonisolated func turnSent(idempotencyKey: String, runId: String) {
        send(.input(.turnSent(idempotencyKey: idempotencyKey, runId: runId)))
    }

    /// The durable outbox turns go through from now on (the daemon's changes with the gateway).
    public nonisolated func use(outbox: OutboxSender?) { send(.call { await $0.setOutbox(outbox) }) }
    private func setOutbox(_ o: OutboxSender?) { outbox = o }

    /// A gateway switch: the session remembered for the new gateway becomes current (not persisted again).
    public nonisolated func restoreSession(_ key: String?) async {
        send(.input(.restoreSession(key)))
        await barrier()
    }

    public nonisolated func update(config: TalkConfig) { send(.call { await $0.apply(config) }) }
    public nonisolated func setHeadset(_ headset: Bool) { send(.call { await $0.applyHeadset(headset) }) }

    // Reads: from the snapshot the loop publishes after every item.
    public nonisolated var phase: TalkPhase { published.withLock { $0.phase } }
    public nonisolated var activeCaptureId: String? {
        switch phase { case .idle: return nil; case .capturing(let id), .ending(let id): return id }
    }
    /// The chat session chosen here (nil: the gateway's main session).
    public nonisolated var sessionKey: String? { published.withLock { $0.sessionKey } }
    public nonisolated var pendingInterruption: String? { published.withLock { $0.pendingInterruption } }
    public nonisolated var gatedFrames: Int { published.withLock { $0.gatedFrames } }
    public nonisolated var bargeIns: Int { published.withLock { $0.bargeIns } }
    /// Speech stopped by the stop word.
    public nonisolated var stopWords: Int { published.withLock { $0.stopWords } }
    public nonisolated var silenceTimeoutMs: Int { published.withLock { $0.silenceTimeoutMs } }
    public nonisolated var wakeStatus: WakeStatus? { published.withLock { $0.wake } }
    public nonisolated var lastVoiceNote: [UInt8]? { published.withLock { $0.lastVoiceNote } }
    public nonisolated var lastTiming: CaptureTiming? { published.withLock { $0.lastTiming } }
    public nonisolated var lastSpeech: SpeechReport? { published.withLock { $0.lastSpeech } }
    /// The reply being spoken (or last spoken), for tests, the bench and barge-in.
    public nonisolated var lastReply: ReplyStream? { published.withLock { $0.lastReply } }

    // MARK: settings and the gateway's Talk config

    private func apply(_ c: TalkConfig) {
        config = c
        sounds = FeedbackSounds(c.cues)
        preRoll = PreRollBuffer(milliseconds: c.preRollMs)
        machine.replaceSettings(Self.settings(c, wake: wake?.config, echo: Self.echoOn(c, echoReference)))
    }

    private func applyHeadset(_ headset: Bool) {
        config.headset = headset
        machine.replaceSettings(Self.settings(config, wake: wake?.config, echo: Self.echoOn(config, echoReference)))
    }

    private func applySilenceTimeout(_ ms: Int) {
        guard ms != config.silenceTimeoutMs else { return }
        config.silenceTimeoutMs = ms
        machine.replaceSettings(Self.settings(config, wake: wake?.config, echo: Self.echoOn(config, echoReference)))
        log.log(.info, "talk", "silence timeout from the gateway: \(ms) ms")
    }

    /// Reads `talk.config` from the gateway: its `silenceTimeoutMs` wins over the local default.
    /// Gateways without the method (or without the key) leave the config as it is.
    public nonisolated func syncGatewayConfig() async {
        // As the operator session asks it (issue 26): secrets are never wanted here.
        guard let result = try? await channel.request("talk.config", params: ["includeSecrets": false], timeoutMs: 10_000) else { return }
        if let ms = result["config"]?["talk"]?["silenceTimeoutMs"]?.intValue, ms >= 200, ms <= 10_000 {
            await onLoop { await $0.applySilenceTimeout(Int(ms)) }
        }
    }

    // MARK: wake

    /// Starts listening for the gateway's trigger words (the last list heard, else `triggers`, else the defaults).
    public nonisolated func enableWake(_ wakeConfig: WakeConfig, triggers: [String]? = nil) async {
        await onLoop { await $0.enableWakeNow(wakeConfig, triggers: triggers) }
    }

    public nonisolated func disableWake() async { await onLoop { await $0.disableWakeNow() } }

    /// Reads the trigger list (and routing, when the gateway has it) after the operator session connects.
    public nonisolated func syncWake() async {
        if let r = try? await channel.request("voicewake.get", params: [:], timeoutMs: 10_000),
           let t = VoiceWakeTriggers(payload: r) {
            await onLoop { await $0.setWakeTriggers(t.triggers) }
        }
        if await channel.advertisedMethods().contains("voicewake.routing.get"),
           let r = try? await channel.request("voicewake.routing.get", params: [:], timeoutMs: 10_000) {
            await onLoop { await $0.setWakeRouting(r) }
        }
    }

    /// Plays the wake chime (on detection; also for tests and diagnostics): the configured
    /// sound, the generated one when wake is off. False when nothing played.
    @discardableResult
    public nonisolated func playChime() async -> Bool {
        let pcm = await onLoop { await $0.chimeSound() }
        guard let pcm else { return false }
        return await speech.playCue(pcm)
    }

    private func chimeSound() -> PCMBuffer? { wake.map { $0.chimeSound } ?? WakeListener.chime() }

    private func enableWakeNow(_ wakeConfig: WakeConfig, triggers: [String]?) {
        let w = WakeListener(config: wakeConfig, triggers: triggers ?? knownTriggers ?? VoiceWakeTriggers.defaults)
        if let r = knownRouting { w.setRouting(r) }
        wake = w
        machine.replaceSettings(Self.settings(config, wake: wakeConfig, echo: Self.echoOn(config, echoReference)))
        logWakeModels(w)
        if let problem = w.chimeProblem { log.log(.warning, "wake", problem) }
    }

    private func disableWakeNow() {
        wake = nil
        machine.replaceSettings(Self.settings(config, wake: nil, echo: Self.echoOn(config, echoReference)))
    }

    private func setWakeRouting(_ r: JSONValue) {
        knownRouting = r
        wake?.setRouting(r)
    }

    private func setWakeTriggers(_ list: [String]) {
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
