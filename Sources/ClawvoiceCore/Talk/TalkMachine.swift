// Every decision of the talk turn, as a pure value: push-to-talk and wake captures, the
// loudspeaker gate and barge-in, the replies being followed, the session switch and the
// timers. Inputs are events (commands, microphone frames with the speaker's state, relay and
// outbox results, chat events, session changes, ticks) with the time as a number; outputs
// are actions that TalkController carries out. No I/O, no clock reads, no tasks: every
// interleaving of start/stop/cancel/once with the relay's results is a sequence of inputs, and
// so is the gateway giving up on an invoked command (its cancel or its timeout).

import Foundation
import GatewayProtocol

/// The status strings the gateway and the official clients know.
public enum PTTStatus: String, Sendable, Codable, Equatable {
    case queued, empty, idle, cancelled, busy
    case notQueued = "not_queued"
}

/// The payload of a finished PTT command: `{captureId, transcript?, status}`.
public struct PTTResult: Sendable, Equatable, Codable {
    public var captureId: String
    public var transcript: String?
    public var status: PTTStatus
    public init(captureId: String, transcript: String? = nil, status: PTTStatus) {
        self.captureId = captureId
        self.transcript = transcript
        self.status = status
    }
}

/// A PTT failure for the gateway: `UNAVAILABLE` with a `CODE: message` text.
public struct PTTError: Error, Sendable, Equatable, CustomStringConvertible {
    public var code: String
    public var message: String
    public init(code: String, message: String) { self.code = code; self.message = message }
    public var description: String { "\(code): \(message)" }

    public static let alreadyStarting = PTTError(code: "ALREADY_STARTING", message: "push-to-talk is already starting")
    public static func gatewayNotConnected(_ detail: String) -> PTTError {
        PTTError(code: "GATEWAY_NOT_CONNECTED", message: "the operator session is not connected (\(detail))")
    }
    public static func microphone(_ detail: String) -> PTTError {
        PTTError(code: "MICROPHONE_UNAVAILABLE", message: detail)
    }
    public static let muted = PTTError(code: "MUTED", message: "the microphone is muted (clawvoice unmute)")
    public static let inCall = PTTError(code: "BUSY", message: "a call holds the room (clawvoice hangup ends it)")
}

/// What the microphone looks like right now, for refusing a start with a reason.
public enum MicrophoneState: Sendable, Equatable {
    case live
    case unavailable(String)
}

/// The speaker as the capture loop saw it when a frame arrived.
public struct SpeakerState: Sendable, Equatable {
    /// Something is coming out of the speaker now.
    public var playing: Bool
    /// How long ago it last stopped (nil: never played).
    public var msSinceStopped: Int64?
    public init(playing: Bool = false, msSinceStopped: Int64? = nil) {
        self.playing = playing
        self.msSinceStopped = msSinceStopped
    }
    public static let silent = SpeakerState()

    /// Playing, or stopped less than `tailMs` ago (the room's echo and the sink's buffer).
    public func audible(tailMs: Int) -> Bool {
        if playing { return true }
        guard let ms = msSinceStopped else { return false }
        return ms < Int64(tailMs)
    }
}

/// What the endpointer counts as speech (audio.voiceDetector).
public enum VoiceDetectorChoice: String, Sendable, Equatable, CaseIterable {
    /// The trained voice detector (models/voice.json): loud noise is not speech.
    case model
    /// The frame's level against the noise floor (the iOS rule): anything loud is speech.
    case level
}

public struct TalkMachine: Sendable {
    /// The settings the machine decides with (TalkConfig and WakeConfig, minus the executors' parts).
    public struct Settings: Sendable, Equatable {
        public var silenceTimeoutMs = 900
        /// What ends an utterance (audio.voiceDetector): the voice detector's probability per
        /// frame, at `voiceThreshold`, or the level against the noise floor.
        public var voiceDetector: VoiceDetectorChoice = .model
        public var voiceThreshold = 0.5
        /// The end-of-turn model for push-to-talk (`once`), wake and follow-up turns (nil: the
        /// silence window alone); the window stays its ceiling.
        public var turnModel: TurnModel?
        public var onceMaxMs = 12_000
        public var captureMaxMs = 60_000
        public var headset = false
        /// The capture is echo-cancelled against the speaker: a loudspeaker then needs no gate,
        /// and barge-in and wake words work while it speaks, as on a headset.
        public var echoCancelled = false
        public var interruptOnSpeech = true
        public var bargeInMs = 300
        public var bargeInLevelDbfs = -35.0
        /// The bar on an echo-cancelled loudspeaker: what is left of the echo sits near −50 dBFS,
        /// and the canceller's suppressor takes the edge off the user's voice in double talk.
        public var echoBargeInLevelDbfs = -45.0
        /// Voice that barges in over an echo-cancelled loudspeaker (shorter than on a headset: the
        /// canceller's suppressor already swallowed the first syllable).
        public var echoBargeInMs = 120
        /// Wake thresholds lower by this many logits while an echo-cancelled loudspeaker plays
        /// and `wakeReliefTailMs` after (0 turns it off): at 0 dB under the node's own voice a
        /// trigger scored 0.76–0.80 against computer's 0.82 (WakeOverReplyTests).
        public var wakeReliefOverSpeech = 0.6
        public var wakeReliefTailMs = 1000
        public var speakerTailMs = 300
        public var speakReplies = true
        public var replyTimeoutMs: Int64 = 120_000
        /// A command that arrives while the microphone or the operator session is still coming
        /// up waits this long for them before it fails.
        public var partsWaitMs: Int64 = 3_000
        /// The capture's own cap is backed by a timer this much later (the microphone may stop).
        public var capSlackMs: Int64 = 500
        // Wake turns.
        public var wakeEnabled = false
        public var wakeSilenceAfterSpeechMs = 2000
        public var wakeTriggerOnlyMs = 5000
        public var wakeMaxCaptureMs = 30_000
        public var wakeDebounceMs: Int64 = 350
        public var wakeMinCommandCharacters = 2
        /// After a reply has been spoken, listen this long for a next turn without the wake word
        /// (talk.followUpMs; 0: off, as by default).
        public var followUpMs = 0
        /// The stop word (issue 14): a stop head hears the microphone while the node speaks on a
        /// channel without its echo (headset or echo-cancelled loudspeaker), and "stop" then
        /// stops the speech as a barge-in does, even with voice barge-in off. Ignored otherwise.
        public var stopWordEnabled = false
        /// The wake phrase that starts a realtime call instead of a turn (talk.callWakeWord).
        public var callWakePhrase: String?
        public init() {}
    }

    public enum Command: Sendable, Equatable {
        case start, stop, cancel, once
    }

    public enum Kind: Sendable, Equatable {
        case hold
        case once
        /// Started by a wake word; `triggers` are stripped from the transcript.
        case wake(phrase: String, triggers: [String])
        /// Opened by itself after a reply (talk.followUpMs): the next turn without the wake word;
        /// dropped quietly when nothing is said in the window.
        case followUp

        var isHold: Bool { self == .hold }
    }

    public struct Capture: Sendable {
        public var id: String
        public var kind: Kind
        public var sessionKey: String?
        public var startedAtMs: Int64
        public var endpointer: Endpointer
        public var capAtMs: Int64
    }

    public enum Phase: Sendable {
        case idle
        case capturing(Capture)
        /// The relay is being closed (transcript, voice note); its result is on its way.
        case ending(Capture)
        /// The turn is being written to the outbox (`deliver` issued, `delivered` not yet in).
        /// A cancel here cannot simply drop the capture: the turn may be committed already.
        case delivering(Capture, Delivery)

        public var captureId: String? { capture?.id }

        public var capture: Capture? {
            switch self {
            case .idle: return nil
            case .capturing(let c), .ending(let c), .delivering(let c, _): return c
            }
        }
    }

    /// The turn being delivered.
    public struct Delivery: Sendable, Equatable {
        public var idempotencyKey: String
        /// What the result reports (nil for a voice note).
        public var transcript: String?
        /// A cancel asked for the turn back (`withdrawTurn` is out; `withdrawn` decides).
        public var withdrawing = false
    }

    /// How a finished relay stream came out (RelayUplink.Outcome plus what the executor kept).
    public struct Finished: Sendable, Equatable {
        public var outcome: RelayOutcome
        /// Milliseconds of audio captured, and whether a voice note could be encoded.
        public var audioMs: Double
        public var hasVoiceNote: Bool
        public init(outcome: RelayOutcome, audioMs: Double, hasVoiceNote: Bool) {
            self.outcome = outcome
            self.audioMs = audioMs
            self.hasVoiceNote = hasVoiceNote
        }
    }

    public enum Input: Sendable {
        /// `session`: the session the gateway stamped on the invoke (nil: the current one).
        case command(Command, token: Int, freshId: String, session: String? = nil)
        /// The gateway stopped waiting for the command behind `token` (node.invoke.cancel, its
        /// timeoutMs, the node's socket gone). A turn no one waits for any more is not sent.
        case invokeEnded(token: Int, InvokeEnd)
        /// The outbox's answer to `withdrawTurn`: `removed` when the turn will not be sent.
        case withdrawn(id: String, removed: Bool)
        /// A microphone frame; `voice`: the voice detector's probability for it (nil: not run,
        /// the endpointer then judges by level).
        case frame(PCMBuffer, speaker: SpeakerState, voice: Double? = nil)
        case microphone(MicrophoneState)
        case operatorState(connected: Bool, mainSessionKey: String?)
        /// A wake word was heard in the last frame; `routedSession` is its route, if any.
        case wakeHeard(phrase: String, triggers: [String], routedSession: String?, freshId: String)
        case relayFinished(id: String, Finished)
        case delivered(id: String, PTTStatus, idempotencyKey: String)
        case switchSession(String, reason: String)
        /// Another gateway's remembered session (nil: its main one) becomes current.
        case restoreSession(String?)
        case interrupt(reason: String)
        /// The reply's position when a barge-in stopped it.
        case bargeInPosition(ms: Double)
        /// The stop head heard "stop" in the last frame it was given.
        case stopWordHeard
        case chat(runId: String, final: Bool)
        /// A followed reply has been spoken (`stopped`: cut off by a stop, barge-in or switch).
        case replyDone(stopped: Bool)
        case turnSent(idempotencyKey: String, runId: String)
        /// Speak the reply of this run as it streams in.
        case followReply(runId: String)
        /// `clawvoice stop` or its key: stop speaking now, as a barge-in would. `speaking`:
        /// the speaker was playing (then the next prompt says where it was cut).
        case stopSpeaking(speaking: Bool)
        /// `clawvoice mute|unmute`: the microphone and the wake word off (on). `announce`: play
        /// its sound (not when the muted state is restored at start).
        case setMuted(Bool, announce: Bool)
        /// A realtime call holds the room from its start to its end (TalkMachine+Call.swift).
        case callStarted(id: String)
        case callEnded(id: String)
        case tick
    }

    public enum Answer: Sendable, Equatable {
        case captureId(String)
        case result(PTTResult)
        case failed(PTTError)
    }

    /// Where a capture's first audio comes from.
    public enum Leading: Sendable, Equatable {
        /// The pre-roll ring (push-to-talk).
        case preRoll
        /// The wake lookback, which holds the trigger.
        case wakeLookback
    }

    public enum Action: Sendable {
        case answer(token: Int, Answer)
        /// Silence the speaker (a new capture, a barge-in, a session switch).
        case stopSpeech
        /// Open a relay stream for this capture and start it with the leading audio.
        case openCapture(id: String, sessionKey: String?, leading: Leading)
        case appendFrame(id: String, PCMBuffer)
        /// Close the relay stream and report `relayFinished`.
        case finishCapture(id: String)
        /// Drop the stream and close its relay session.
        case cancelCapture(id: String)
        /// Put the turn in the outbox (text, or the voice note when `voiceNote`) and follow its reply.
        case deliver(id: String, message: String, voiceNote: Bool, sessionKey: String?, idempotencyKey: String)
        /// Take the turn back out of the outbox unless it is on the wire or sent (answers `withdrawn`).
        case withdrawTurn(id: String, idempotencyKey: String)
        case followReply(runId: String)
        case feedReply(runId: String)
        case closeReply(runId: String)
        case rekeyReply(from: String, to: String)
        /// The frame belongs to the pre-roll (and, with `wake`, to the wake detector).
        case listen(PCMBuffer, wake: Bool)
        /// The frame goes to the stop-word head (the node is speaking).
        case listenForStop(PCMBuffer)
        case resetWake
        /// The wake detector's thresholds relax by this many logits (0: none) while a trigger
        /// may be said over the node's own, cancelled voice (settings.wakeReliefOverSpeech).
        case wakeRelief(Double)
        case playChime
        /// Ask the reply executor where the reply was cut (answers `bargeInPosition`).
        case measureBargeIn
        case persistSession(String)
        case wakeOutcome(String)
        case log(LogLevel, String, String)
        /// Call back with `.tick` at this time (or earlier).
        case wakeAt(Int64)
        /// The muted state changed: remember it, say so (sound when `announce`), publish it.
        case mutedChanged(Bool, announce: Bool)
        /// Forget the pre-roll and wake lookback (audio from before a mute).
        case clearPreRoll
        /// A sound for the user: the end of listening, an error.
        case cue(TalkCue)
        /// End the realtime call (a session or gateway switch).
        case endCall(reason: String)
        /// Start a realtime call (the call's wake phrase was heard).
        case startCall(phrase: String)
    }

    public private(set) var settings: Settings
    public private(set) var phase: Phase = .idle
    public private(set) var microphone: MicrophoneState = .unavailable("the microphone has not started yet")
    public private(set) var operatorConnected = false
    /// The chat session chosen here (nil: the gateway's main session).
    public private(set) var chosenSession: String?
    public private(set) var mainSessionKey: String?
    /// Bumped by cancels and session switches: results of an older generation are dropped.
    public private(set) var generation = 0
    public private(set) var pendingInterruption: String?
    /// Microphone and wake word off (`clawvoice mute`): frames are dropped before anything hears them.
    public private(set) var muted = false
    public private(set) var gatedFrames = 0
    public private(set) var bargeIns = 0
    /// Speech stopped by the stop word.
    public private(set) var stopWords = 0
    /// The realtime call holding the room: captures and wake are refused BUSY, frames go to the call.
    public internal(set) var call: String?
    /// The last frame arrived while the node was speaking, idle, on a clean channel.
    private var speakingNow = false
    /// What the last `wakeOverSpeech` action said.
    private var wakeOverSpeech = false
    private var bargeVoiceMs = 0
    private var lastWakeSendAtMs: Int64?
    private var wasConnected = false
    /// Tokens waiting for a capture's result.
    private var waiters: [String: [Int]] = [:]
    /// Commands that wait for the microphone or the operator session.
    private var deferred: [(token: Int, command: Command, freshId: String, session: String?, deadlineMs: Int64)] = []
    /// Replies being followed, with the time they are given up.
    public private(set) var replies: [String: Int64] = [:]
    /// Captures whose relay is still finishing after a cancel: their results are ignored.
    private var abandoned: Set<String> = []

    public init(settings: Settings = Settings(), chosenSession: String? = nil) {
        self.settings = settings
        self.chosenSession = chosenSession
    }

    public var activeCaptureId: String? { phase.captureId }
    /// The session turns go to now (the chosen one, else the gateway's main).
    public var currentSession: String? { chosenSession ?? mainSessionKey }
    public var isIdle: Bool { if case .idle = phase { return true }; return false }

    /// The earliest time a tick has something to do.
    public var nextDeadlineMs: Int64? {
        var d: [Int64] = deferred.map(\.deadlineMs) + Array(replies.values)
        if case .capturing(let c) = phase { d.append(c.capAtMs) }
        return d.min()
    }

    /// New settings (config reload, the gateway's silence timeout, wake on or off); a capture
    /// in progress keeps the endpointer it started with.
    public mutating func replaceSettings(_ s: Settings) { settings = s }

    // MARK: the step

    public mutating func handle(_ input: Input, nowMs: Int64) -> [Action] {
        var out: [Action] = []
        switch input {
        case .command(let command, let token, let freshId, let session):
            command_(command, token: token, freshId: freshId, session: session, nowMs: nowMs, out: &out)
        case .invokeEnded(let token, let why):
            invokeEnded(token: token, why, out: &out)
        case .withdrawn(let id, let removed):
            withdrawn(id: id, removed: removed, out: &out)
        case .frame(let frame, let speaker, let voice):
            frame_(frame, speaker: speaker, voice: voice, nowMs: nowMs, out: &out)
        case .microphone(let state):
            if case .unavailable(let why) = state, let id = activeCaptureId, microphone == .live {
                out.append(.log(.warning, "talk", "microphone lost during capture \(id): \(why)"))
            }
            microphone = state
            retryDeferred(nowMs: nowMs, out: &out)
        case .operatorState(let connected, let main):
            operator_(connected: connected, main: main, nowMs: nowMs, out: &out)
        case .wakeHeard(let phrase, let triggers, let routed, let freshId):
            wake_(phrase: phrase, triggers: triggers, routed: routed, freshId: freshId, nowMs: nowMs, out: &out)
        case .relayFinished(let id, let finished):
            relayFinished(id: id, finished, nowMs: nowMs, out: &out)
        case .delivered(let id, let status, let key):
            delivered(id: id, status, key: key, nowMs: nowMs, out: &out)
        case .switchSession(let key, let reason):
            if call != nil { out.append(.endCall(reason: "session switched")) }
            interrupt(reason: reason, out: &out)
            chosenSession = key
            out.append(.persistSession(key))
        case .restoreSession(let key):
            if call != nil { out.append(.endCall(reason: "gateway switched")) }
            interrupt(reason: "gateway switched", out: &out)
            chosenSession = key
            mainSessionKey = nil
        case .interrupt(let reason):
            interrupt(reason: reason, out: &out)
        case .stopWordHeard:
            // Only while speaking: a "stop" said to a quiet node starts and stops nothing.
            guard settings.stopWordEnabled, speakingNow, isIdle, !muted else {
                out.append(.log(.debug, "talk", "stop word heard while not speaking: ignored"))
                break
            }
            stopWords += 1
            bargeVoiceMs = 0
            speakingNow = false
            stopSpeaking(reason: "stop word", measure: true, out: &out)
        case .bargeInPosition(let ms):
            pendingInterruption = String(format: "Assistant speech interrupted at %.1fs.", ms / 1000)
            out.append(.log(.info, "talk", "barge-in: \(pendingInterruption ?? "")"))
        case .replyDone(let stopped):
            // A reply heard to its end (not cut off): listen a moment for the next turn.
            if settings.followUpMs > 0, !stopped, isIdle, deferred.isEmpty, notReady() == nil {
                open(id: "followup-\(nowMs)-\(generation)", kind: .followUp, session: currentSession, nowMs: nowMs,
                     leading: .preRoll, out: &out)
            }
        case .chat(let runId, let final):
            guard replies[runId] != nil else { break }
            out.append(.feedReply(runId: runId))
            if final { replies.removeValue(forKey: runId) }
        case .followReply(let runId):
            follow(runId: runId, nowMs: nowMs, out: &out)
        case .stopSpeaking(let speaking):
            stopSpeaking(reason: "stop", measure: speaking, out: &out)
        case .setMuted(let on, let announce):
            setMuted(on, announce: announce, out: &out)
        case .callStarted(let id):
            callStarted(id, out: &out)
        case .callEnded(let id):
            callEnded(id, out: &out)
        case .turnSent(let key, let runId):
            if key != runId, let deadline = replies.removeValue(forKey: key) {
                replies[runId] = deadline
                out.append(.rekeyReply(from: key, to: runId))
            }
        case .tick:
            tick(nowMs: nowMs, out: &out)
        }
        if let d = nextDeadlineMs { out.append(.wakeAt(d)) }
        return out
    }

    // MARK: commands

    private mutating func command_(_ command: Command, token: Int, freshId: String, session: String?, nowMs: Int64, out: inout [Action]) {
        if refusedInCall(command, token: token, freshId: freshId, out: &out) { return }
        switch command {
        case .start:
            switch phase {
            case .capturing(let c), .ending(let c), .delivering(let c, _):
                out.append(.answer(token: token, .captureId(c.id)))
            case .idle:
                if muted {
                    out.append(.answer(token: token, .failed(.muted)))
                } else if deferred.contains(where: { $0.command == .start || $0.command == .once }) {
                    out.append(.answer(token: token, .failed(.alreadyStarting)))
                } else {
                    begin(.start, token: token, freshId: freshId, session: session, nowMs: nowMs, out: &out)
                }
            }
        case .once:
            switch phase {
            case .capturing(let c), .ending(let c), .delivering(let c, _):
                out.append(.answer(token: token, .result(PTTResult(captureId: c.id, status: .busy))))
            case .idle:
                if muted {
                    out.append(.answer(token: token, .failed(.muted)))
                } else if let d = deferred.first(where: { $0.command == .start || $0.command == .once }) {
                    out.append(.answer(token: token, .result(PTTResult(captureId: d.freshId, status: .busy))))
                } else {
                    begin(.once, token: token, freshId: freshId, session: session, nowMs: nowMs, out: &out)
                }
            }
        case .stop:
            switch phase {
            case .idle:
                // Stopped before it could start: nothing was captured.
                endDeferred(token: token, freshId: freshId, status: .empty, out: &out)
            case .capturing(let c):
                waiters[c.id, default: []].append(token)
                end(c, reason: "stop", out: &out)
            case .ending(let c), .delivering(let c, _):
                waiters[c.id, default: []].append(token)
            }
        case .cancel:
            switch phase {
            case .idle:
                endDeferred(token: token, freshId: freshId, status: .cancelled, out: &out)
            case .capturing(let c), .ending(let c):
                discard(c, reason: "cancelled", out: &out)
                out.append(.answer(token: token, .result(PTTResult(captureId: c.id, status: .cancelled))))
            case .delivering(let c, let d):
                // The answer waits for the outbox: `cancelled` only if the turn really stays unsent.
                waiters[c.id, default: []].append(token)
                withdraw(c, d, reason: "cancelled", out: &out)
            }
        }
    }

    // MARK: cancellation while delivering

    /// The gateway gave up on a command. One still waiting for its parts ends unstarted; one
    /// waiting for a turn cancels that turn if no other command waits for it too (then it
    /// keeps waiting, and gets the turn's real result). An already answered one changes nothing.
    private mutating func invokeEnded(token: Int, _ why: InvokeEnd, out: inout [Action]) {
        let reason = why == .disconnected ? "the node's gateway connection was lost" : "the gateway's invoke \(why.rawValue)"
        if let i = deferred.firstIndex(where: { $0.token == token }) {
            let d = deferred.remove(at: i)
            out.append(.answer(token: token, d.command == .once ? .result(PTTResult(captureId: d.freshId, status: .cancelled))
                                                                 : .failed(PTTError(code: "CANCELLED", message: reason))))
            out.append(.log(.info, "talk", "\(d.command) \(d.freshId) not started: \(reason)"))
            return
        }
        guard let c = phase.capture, waiters[c.id] == [token] else { return }
        switch phase {
        case .capturing, .ending: discard(c, reason: "cancelled: \(reason)", out: &out)
        case .delivering(_, let d): withdraw(c, d, reason: "cancelled: \(reason)", out: &out)
        case .idle: break
        }
    }

    /// A cancel while the turn is being written. The outbox is asked for it back, and the
    /// waiters are answered with what really happened: `cancelled` when it is taken back
    /// (or was never written), `queued` when chat.send already has it. Answering `cancelled`
    /// at once would tell the gateway a turn was dropped that then goes out with its reply spoken.
    private mutating func withdraw(_ c: Capture, _ d: Delivery, reason: String, out: inout [Action]) {
        guard !d.withdrawing else { return }
        var d = d
        d.withdrawing = true
        phase = .delivering(c, d)
        out.append(.withdrawTurn(id: c.id, idempotencyKey: d.idempotencyKey))
        out.append(.log(.info, "talk", "capture \(c.id) \(reason) while its turn was being queued: taking it back"))
    }

    private mutating func delivered(id: String, _ status: PTTStatus, key: String, nowMs: Int64, out: inout [Action]) {
        guard case .delivering(let c, let d) = phase, c.id == id else {
            // A turn no longer followed here: only its reply needs closing.
            if status != .queued, replies.removeValue(forKey: key) != nil { out.append(.closeReply(runId: key)) }
            if status == .notQueued { out.append(.cue(.error)) }
            return
        }
        if d.withdrawing {
            // Committed: the outbox's answer to withdrawTurn decides.
            if status == .queued { return }
            // Not written (failed, or refused because it was taken back first): nothing went out.
            taken(c, d, out: &out)
            return
        }
        if status == .notQueued {
            if replies.removeValue(forKey: key) != nil { out.append(.closeReply(runId: key)) }
            out.append(.cue(.error))
        }
        if case .wake = c.kind { lastWakeSendAtMs = nowMs }
        // The transcript was recorded with the delivery; resolve with it.
        resolve(id, PTTResult(captureId: id, transcript: d.transcript, status: status), out: &out)
    }

    private mutating func withdrawn(id: String, removed: Bool, out: inout [Action]) {
        guard case .delivering(let c, let d) = phase, c.id == id, d.withdrawing else { return }
        if removed {
            taken(c, d, out: &out)
        } else {
            // Too late: chat.send has it. Say so; its reply is followed as any sent turn's.
            out.append(.log(.info, "talk", "capture \(id): the cancel came too late, its turn is already sent"))
            resolve(id, PTTResult(captureId: id, transcript: d.transcript, status: .queued), out: &out)
        }
    }

    /// The turn stays unsent: no reply to follow, every waiter hears `cancelled`.
    private mutating func taken(_ c: Capture, _ d: Delivery, out: inout [Action]) {
        if replies.removeValue(forKey: d.idempotencyKey) != nil { out.append(.closeReply(runId: d.idempotencyKey)) }
        out.append(.log(.info, "talk", "capture \(c.id) cancelled: its turn was not sent"))
        resolve(c.id, PTTResult(captureId: c.id, status: .cancelled), out: &out)
    }

    /// A stop or cancel with nothing live: it ends a start that is still waiting for its parts
    /// (both answer with `status`), else it answers `idle` with a fresh id.
    private mutating func endDeferred(token: Int, freshId: String, status: PTTStatus, out: inout [Action]) {
        guard let i = deferred.firstIndex(where: { $0.command == .start || $0.command == .once }) else {
            out.append(.answer(token: token, .result(PTTResult(captureId: freshId, status: .idle))))
            return
        }
        let d = deferred.remove(at: i)
        let r = PTTResult(captureId: d.freshId, status: status)
        out.append(.answer(token: d.token, d.command == .start ? .captureId(d.freshId) : .result(r)))
        out.append(.answer(token: token, .result(r)))
    }

    /// Why a capture cannot open now, or nil.
    private func notReady() -> PTTError? {
        if !operatorConnected { return .gatewayNotConnected("reconnecting") }
        if case .unavailable(let why) = microphone { return .microphone(why) }
        return nil
    }

    private mutating func begin(_ command: Command, token: Int, freshId: String, session: String?, nowMs: Int64, out: inout [Action]) {
        if notReady() != nil {
            // The microphone or the operator session may be a moment behind the node session.
            deferred.append((token, command, freshId, session, nowMs + settings.partsWaitMs))
            return
        }
        let once = command == .once
        // An invoked turn goes to the session the gateway stamped on it; others to the current one.
        open(id: freshId, kind: once ? .once : .hold, session: session ?? currentSession, nowMs: nowMs, leading: .preRoll, out: &out)
        if once { waiters[freshId, default: []].append(token) } else { out.append(.answer(token: token, .captureId(freshId))) }
    }

    private mutating func retryDeferred(nowMs: Int64, out: inout [Action]) {
        guard !deferred.isEmpty, notReady() == nil, isIdle else { return }
        let d = deferred.removeFirst()
        begin(d.command, token: d.token, freshId: d.freshId, session: d.session, nowMs: nowMs, out: &out)
    }

    private mutating func open(id: String, kind: Kind, session: String?, nowMs: Int64, leading: Leading, out: inout [Action]) {
        let capMs: Int, silenceMs: Int
        switch kind {
        case .hold: (capMs, silenceMs) = (settings.captureMaxMs, settings.silenceTimeoutMs)
        case .once: (capMs, silenceMs) = (settings.onceMaxMs, settings.silenceTimeoutMs)
        case .wake: (capMs, silenceMs) = (settings.wakeMaxCaptureMs, settings.wakeSilenceAfterSpeechMs)
        case .followUp: (capMs, silenceMs) = (settings.onceMaxMs, settings.silenceTimeoutMs)
        }
        var endpointer = Endpointer(silenceTimeoutMs: silenceMs, maxCaptureMs: capMs,
                                    voiceThreshold: settings.voiceDetector == .model ? settings.voiceThreshold : nil)
        if !kind.isHold, settings.voiceDetector == .model { endpointer.turnModel = settings.turnModel }
        let c = Capture(id: id, kind: kind, sessionKey: session, startedAtMs: nowMs, endpointer: endpointer,
                        capAtMs: nowMs + Int64(capMs) + settings.capSlackMs)
        phase = .capturing(c)
        // A new capture silences the assistant; no interruption is recorded (iPhone behaviour).
        out.append(.stopSpeech)
        out.append(.openCapture(id: id, sessionKey: session, leading: leading))
        out.append(.resetWake)
        let what: String
        switch kind {
        case .hold: what = ""
        case .once: what = " (once)"
        case .wake(let phrase, _): what = " (wake: \(phrase))"
        case .followUp: what = " (follow-up)"
        }
        out.append(.log(.info, "talk", "capture \(id) started\(what)"))
    }

    private mutating func end(_ c: Capture, reason: String, out: inout [Action]) {
        phase = .ending(c)
        out.append(.finishCapture(id: c.id))
        out.append(.cue(.endOfListening))
        if reason != "stop" { out.append(.log(.info, "talk", "capture \(c.id) ends: \(reason)")) }
    }

    private mutating func discard(_ c: Capture, reason: String, out: inout [Action]) {
        // An ending capture's relay result is still on its way: it is ignored when it comes.
        if case .ending = phase { abandoned.insert(c.id) }
        out.append(.cancelCapture(id: c.id))
        if case .wake = c.kind { out.append(.wakeOutcome("cancelled")) }
        phase = .idle
        resolveWaiters(c.id, PTTResult(captureId: c.id, status: .cancelled), out: &out)
        out.append(.log(.info, "talk", "capture \(c.id) \(reason)"))
    }

    private mutating func resolve(_ id: String, _ result: PTTResult, out: inout [Action]) {
        if let c = phase.capture, c.id == id, case .wake = c.kind { out.append(.wakeOutcome(result.status.rawValue)) }
        if phase.captureId == id { phase = .idle }
        resolveWaiters(id, result, out: &out)
    }

    private mutating func resolveWaiters(_ id: String, _ result: PTTResult, out: inout [Action]) {
        for t in waiters.removeValue(forKey: id) ?? [] { out.append(.answer(token: t, .result(result))) }
    }

    // MARK: frames

    private mutating func frame_(_ frame: PCMBuffer, speaker: SpeakerState, voice: Double?, nowMs: Int64, out: inout [Action]) {
        // Muted: nothing hears the frame (no capture, pre-roll, wake or barge-in).
        speakingNow = false
        // During a call the microphone belongs to the call: no capture, wake or barge-in here.
        if muted || call != nil { return }
        switch phase {
        case .capturing(var c):
            // On a loudspeaker the wake chime reaches the microphone: the endpointer hears silence instead.
            // (So does the reply's tail before a follow-up.)
            let unsolicited: Bool
            switch c.kind { case .wake, .followUp: unsolicited = true; default: unsolicited = false }
            let chimeAudible = unsolicited && !settings.headset && !settings.echoCancelled && speaker.audible(tailMs: settings.speakerTailMs)
            let heard = chimeAudible ? PCMBuffer(format: frame.format, samples: [Int16](repeating: 0, count: frame.samples.count)) : frame
            var event = c.endpointer.feed(heard, voice: chimeAudible ? voice.map { _ in 0 } : voice)
            if case .wake = c.kind, event == nil, !c.endpointer.speechHeard,
               c.endpointer.elapsedMilliseconds >= Double(settings.wakeTriggerOnlyMs) {
                event = .endOfUtterance(reason: .silence)  // only the trigger was heard
            }
            phase = .capturing(c)
            out.append(.appendFrame(id: c.id, frame))
            if case .followUp = c.kind, !c.endpointer.speechHeard,
               c.endpointer.elapsedMilliseconds >= Double(settings.followUpMs) {
                discard(c, reason: "follow-up: nothing was said", out: &out)  // no turn, no answer
                return
            }
            if case .endOfUtterance(let reason)? = event, !c.kind.isHold || reason == .maxDuration {
                // `once` and wake end on silence after speech; a held capture only at its hard cap.
                end(c, reason: "\(reason)", out: &out)
            }
        case .ending, .delivering:
            out.append(.listen(frame, wake: false))  // pre-roll only: no wake until the turn is out
        case .idle:
            let clean = settings.headset || settings.echoCancelled
            let audible = speaker.audible(tailMs: clean ? 0 : settings.speakerTailMs)
            if audible {
                if clean {
                    speakingNow = true
                    if settings.stopWordEnabled { out.append(.listenForStop(frame)) }
                    if settings.interruptOnSpeech { bargeIn(frame, out: &out) }
                } else {
                    // Loudspeaker: the microphone hears the assistant; keep that out of pre-roll and wake.
                    gatedFrames += 1
                    return
                }
            } else {
                bargeVoiceMs = 0
            }
            let listens = wakeListens(speaking: audible, nowMs: nowMs)
            // Relief while the node speaks and for the echo's tail after: a trigger begun over
            // the reply and finished after a barge-in stopped it is still one word.
            let over = listens && settings.wakeReliefOverSpeech > 0 && settings.echoCancelled && !settings.headset
                && speaker.audible(tailMs: settings.wakeReliefTailMs)
            if over != wakeOverSpeech { wakeOverSpeech = over; out.append(.wakeRelief(over ? settings.wakeReliefOverSpeech : 0)) }
            out.append(.listen(frame, wake: listens))
        }
    }

    /// Whether the wake detector hears this idle frame.
    private func wakeListens(speaking: Bool, nowMs: Int64) -> Bool {
        guard settings.wakeEnabled, deferred.isEmpty else { return false }
        if speaking && !((settings.headset || settings.echoCancelled) && settings.interruptOnSpeech) { return false }
        if let t = lastWakeSendAtMs, nowMs - t < settings.wakeDebounceMs { return false }
        return true
    }

    /// Sustained voice while the assistant speaks into a headset stops it, and the next prompt says where.
    private mutating func bargeIn(_ frame: PCMBuffer, out: inout [Action]) {
        let dbfs = 20 * log10(max(frame.rms, 1e-5))
        let ms = Int(frame.durationMilliseconds.rounded())
        let bar = settings.headset ? settings.bargeInLevelDbfs : settings.echoBargeInLevelDbfs
        bargeVoiceMs = dbfs >= bar ? bargeVoiceMs + ms : max(0, bargeVoiceMs - ms)
        guard bargeVoiceMs >= (settings.headset ? settings.bargeInMs : settings.echoBargeInMs) else { return }
        bargeVoiceMs = 0
        bargeIns += 1
        speakingNow = false
        stopSpeaking(reason: nil, measure: true, out: &out)
    }

    /// A barge-in's effect (also `clawvoice stop`): the replies being followed are closed, the
    /// speaker stops, and, when it was playing, the next prompt says where it was cut.
    /// A capture in progress is left alone.
    private mutating func stopSpeaking(reason: String?, measure: Bool, out: inout [Action]) {
        generation += 1
        if measure { out.append(.measureBargeIn) }
        out.append(contentsOf: closeAllReplies())
        out.append(.stopSpeech)
        if let reason { out.append(.log(.info, "talk", "\(reason): speech stopped")) }
    }

    private mutating func setMuted(_ on: Bool, announce: Bool, out: inout [Action]) {
        guard on != muted else { return }
        muted = on
        if on {
            // The capture in progress and the commands waiting for the microphone end now.
            switch phase {
            case .capturing(let c), .ending(let c): discard(c, reason: "cancelled: muted", out: &out)
            case .delivering, .idle: break  // a turn being queued finishes (see interrupt)
            }
            for d in deferred { out.append(.answer(token: d.token, .failed(.muted))) }
            deferred.removeAll()
            bargeVoiceMs = 0
            out.append(.clearPreRoll)
            out.append(.resetWake)
        }
        out.append(.mutedChanged(on, announce: announce))
        out.append(.log(.info, "talk", on ? "muted: microphone and wake word off" : "unmuted"))
    }

    private mutating func closeAllReplies() -> [Action] {
        let runs = replies.keys.sorted()
        replies.removeAll()
        return runs.map { .closeReply(runId: $0) }
    }

    // MARK: wake

    private mutating func wake_(phrase: String, triggers: [String], routed: String?, freshId: String, nowMs: Int64, out: inout [Action]) {
        guard isIdle, deferred.isEmpty, !muted, call == nil else {
            out.append(.wakeOutcome("busy"))
            return
        }
        if callWakeStarts(phrase: phrase, out: &out) { return }
        if let e = notReady() {
            out.append(.cue(.error))
            out.append(.wakeOutcome("failed: \(e)"))
            out.append(.resetWake)
            out.append(.log(.warning, "wake", "no capture after \"\(phrase)\": \(e)"))
            return
        }
        out.append(.wakeOutcome("capturing"))
        open(id: freshId, kind: .wake(phrase: phrase, triggers: triggers), session: routed ?? currentSession,
             nowMs: nowMs, leading: .wakeLookback, out: &out)
        out.append(.playChime)
    }

    // MARK: results

    private mutating func relayFinished(id: String, _ f: Finished, nowMs: Int64, out: inout [Action]) {
        if abandoned.remove(id) != nil { return }
        guard case .ending(let c) = phase, c.id == id else { return }
        switch f.outcome {
        case .transcript(let text?) where !text.isEmpty:
            var message = text
            if case .wake(let phrase, let triggers) = c.kind {
                // The trigger words are not part of the command; too little left is no command.
                message = WakeTranscript.command(from: text, triggers: [phrase] + triggers)
                guard message.count >= settings.wakeMinCommandCharacters else {
                    out.append(.log(.info, "talk", "wake capture \(id): nothing after the trigger in \"\(text)\""))
                    resolve(id, PTTResult(captureId: id, transcript: message, status: .empty), out: &out)
                    return
                }
            }
            deliver(c, message: message, transcript: message, voiceNote: false, nowMs: nowMs, out: &out)
        case .transcript:
            resolve(id, PTTResult(captureId: id, status: .empty), out: &out)
        case .unavailable(let why):
            // No transcription here or at the gateway: the voice note is the whole message.
            guard f.audioMs >= 200, f.hasVoiceNote else {
                resolve(id, PTTResult(captureId: id, status: .empty), out: &out)
                return
            }
            out.append(.log(.info, "talk", "sending capture \(id) as a voice note: \(why)"))
            deliver(c, message: "", transcript: nil, voiceNote: true, nowMs: nowMs, out: &out)
        }
    }

    private mutating func deliver(_ c: Capture, message: String, transcript: String?, voiceNote: Bool, nowMs: Int64, out: inout [Action]) {
        var message = message
        if let prefix = pendingInterruption {
            // The iPhone's TalkPromptBuilder: tell the agent where it was cut off.
            message = message.isEmpty ? prefix : prefix + "\n\n" + message
            pendingInterruption = nil
        }
        // The idempotency key doubles as the run id until chat.send names another.
        let key = "turn-" + c.id.lowercased()
        // Follow the run before it is sent: its first deltas may arrive before the acknowledgement.
        follow(runId: key, nowMs: nowMs, out: &out)
        phase = .delivering(c, Delivery(idempotencyKey: key, transcript: transcript))
        out.append(.deliver(id: c.id, message: message, voiceNote: voiceNote, sessionKey: c.sessionKey ?? currentSession,
                            idempotencyKey: key))
    }

    private mutating func follow(runId: String, nowMs: Int64, out: inout [Action]) {
        guard settings.speakReplies else { return }
        replies[runId] = nowMs + settings.replyTimeoutMs
        out.append(.followReply(runId: runId))
    }

    // MARK: sessions

    private mutating func operator_(connected: Bool, main: String?, nowMs: Int64, out: inout [Action]) {
        defer { wasConnected = connected }
        operatorConnected = connected
        if wasConnected && !connected {
            interrupt(reason: "connection to the gateway lost", out: &out)
            return
        }
        if connected, let key = main {
            if let previous = mainSessionKey, previous != key, chosenSession == nil {
                interrupt(reason: "the gateway's main session changed to \(key)", out: &out)
            }
            mainSessionKey = key
        }
        if connected { retryDeferred(nowMs: nowMs, out: &out) }
    }

    /// A session switch, gateway switch or lost connection: cancel the capture, drop late results, stop speaking.
    mutating func interrupt(reason: String, out: inout [Action]) {
        generation += 1
        switch phase {
        case .capturing(let c), .ending(let c): discard(c, reason: "cancelled: \(reason)", out: &out)
        // A turn being written to the durable outbox is not the capture any more: it finishes
        // (it survives a lost connection by design) and its waiters get its real status. Its
        // reply is closed below with the others.
        case .delivering, .idle: break
        }
        for d in deferred {
            out.append(.answer(token: d.token, .failed(PTTError(code: "CANCELLED", message: reason))))
        }
        deferred.removeAll()
        out.append(contentsOf: closeAllReplies())
        out.append(.stopSpeech)
    }

    // MARK: time

    private mutating func tick(nowMs: Int64, out: inout [Action]) {
        if case .capturing(let c) = phase, nowMs >= c.capAtMs {
            end(c, reason: "reached its time cap", out: &out)
        }
        let (due, waiting) = deferred.partitioned { $0.deadlineMs <= nowMs }
        deferred = waiting
        for d in due {
            let e = notReady() ?? .gatewayNotConnected("timed out")
            out.append(.answer(token: d.token, .failed(e)))
        }
        if !due.isEmpty { out.append(.cue(.error)) }
        for (runId, deadline) in replies where deadline <= nowMs {
            replies.removeValue(forKey: runId)
            out.append(.closeReply(runId: runId))
        }
    }
}

extension Array {
    /// (matching, rest), each in order.
    func partitioned(_ matches: (Element) -> Bool) -> ([Element], [Element]) {
        var a: [Element] = [], b: [Element] = []
        for e in self { if matches(e) { a.append(e) } else { b.append(e) } }
        return (a, b)
    }
}
