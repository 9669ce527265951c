// Every decision of the talk turn, as a pure value: push-to-talk and wake captures, the
// loudspeaker gate and barge-in, the replies being followed, the speaker (+Speaker.swift), the
// session switch and the timers. Inputs are events (commands, microphone frames, relay and
// outbox results, chat events, Listen and notifications, clip ends, ticks) with the time as a
// number; outputs are actions that the talk loop's executors carry out. No I/O, no clock reads, no tasks: every
// interleaving of start/stop/cancel/once with the relay's results is a sequence of inputs, and
// so is the gateway giving up on an invoked command (its cancel or its timeout).

import Foundation
import GatewayProtocol

public struct TalkMachine: Sendable {
    // Its settings: TalkMachine+Settings.swift.

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
        /// New settings (config reload, the headset, the gateway's silence timeout, wake on or
        /// off): the only way they change. A capture in progress keeps the endpointer it started with.
        case settings(Settings)
        case tick
        /// Listen, notifications and clip ends: the speaker sub-state (TalkMachine+Speaker.swift).
        case speaker(SpeakerInput)
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
        /// The muted state changed: remember it, say so, publish it (when `announce`, a `cue` follows).
        case mutedChanged(Bool, announce: Bool)
        /// Forget the pre-roll and wake lookback (audio from before a mute).
        case clearPreRoll
        /// A sound for the user: the end of listening, an error, mute and unmute.
        case cue(TalkCue)
        /// End the realtime call (a session or gateway switch).
        case endCall(reason: String)
        /// Start a realtime call (the call's wake phrase was heard).
        case startCall(phrase: String)
        /// Play this clip; its end comes back as `.speaker(.ended(_, generation:))`.
        case play(SpeakerClip, generation: Int)
    }

    public internal(set) var settings: Settings
    public internal(set) var phase: Phase = .idle
    public internal(set) var microphone: MicrophoneState = .unavailable("the microphone has not started yet")
    public internal(set) var operatorConnected = false
    /// The chat session chosen here (nil: the gateway's main session).
    public internal(set) var chosenSession: String?
    public internal(set) var mainSessionKey: String?
    /// Bumped by cancels and session switches: results of an older generation are dropped.
    public internal(set) var generation = 0
    public internal(set) var pendingInterruption: String?
    /// Microphone and wake word off (`clawvoice mute`): frames are dropped before anything hears them.
    public internal(set) var muted = false
    public internal(set) var gatedFrames = 0
    public internal(set) var bargeIns = 0
    /// Speech stopped by the stop word.
    public internal(set) var stopWords = 0
    /// The realtime call holding the room: captures and wake are refused BUSY, frames go to the call.
    public internal(set) var call: String?
    /// The last frame arrived while the node was speaking, idle, on a clean channel.
    var speakingNow = false
    /// The speaker as the last frame found it: what the node was saying (OwnWords).
    var heardSpeaker = SpeakerState.silent
    /// Detections of a word the node itself was saying on the loudspeaker, ignored.
    public internal(set) var ownWordsIgnored = 0
    /// What the last `wakeRelief` action said.
    var wakeRelief = 0.0
    /// When voice last barged in over the speaker.
    var bargedInAtMs: Int64?
    var bargeVoiceMs = 0
    /// Whether the voice counted in `bargeVoiceMs` began in a clip's first second: such a run
    /// keeps the settling bar after the second ends (a leak from 0.9 s must not pass at 1.0 s).
    var bargeRunSettling = false
    var lastWakeSendAtMs: Int64?
    var wasConnected = false
    /// Tokens waiting for a capture's result.
    var waiters: [String: [Int]] = [:]
    /// Commands that wait for the microphone or the operator session.
    var deferred: [(token: Int, command: Command, freshId: String, session: String?, deadlineMs: Int64)] = []
    /// Replies being followed, with the time they are given up.
    public internal(set) var replies: [String: Int64] = [:]
    /// Captures whose relay is still finishing after a cancel: their results are ignored.
    var abandoned: Set<String> = []
    /// What the speaker plays and who waits for it (TalkMachine+Speaker.swift).
    public internal(set) var speaker = Speaker()

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
        var d: [Int64] = deferred.map(\.deadlineMs) + Array(replies.values) + Array(speaker.holds.values)
        if case .capturing(let c) = phase { d.append(c.capAtMs) }
        return d.min()
    }

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
            if ownWord("stop", out: &out) { break }
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
        case .settings(let new):
            settings = new
        case .tick:
            tick(nowMs: nowMs, out: &out)
        case .speaker(let s):
            speakerInput(s, nowMs: nowMs, out: &out)
        }
        if case .speaker = input {} else { speakerFollows(out) }
        advanceNotices(nowMs: nowMs, out: &out)
        if let d = nextDeadlineMs { out.append(.wakeAt(d)) }
        return out
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
