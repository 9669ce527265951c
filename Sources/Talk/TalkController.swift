// The talk turn's handle: what the daemon, the CLI, the button and the tests hold. It is Sendable
// and owns only the inbox and the snapshot: every method posts one typed item (and, where it
// answers, waits for the loop to answer), every read comes from the snapshot the loop publishes
// after each item. The loop itself (TalkLoop: the machine and the executors) exists only inside
// `run()`, owned by the task of the service that runs it, and is not Sendable.

import Audio
public import ClawvoiceCore
import Foundation
public import GatewayClient
public import GatewayProtocol
import WakeWord

public final class TalkController: Sendable {
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
        /// The microphone's pace (issue 25): relaxed while nothing but the wake listener hears it
        /// (idle, speaker silent, no call): frames reach the loop 4 at a time (one hop per 80 ms).
        var pacing = MicrophonePacing.prompt
        var listening: String?
        var lastListen: (messageId: String, report: SpeechReport)?
        var speaker = TalkMachine.Playing.nothing
    }

    /// One thing for the loop to take. Every kind is named: no closures run on the loop.
    enum Item: Sendable {
        case input(TalkMachine.Input)
        /// `token`: drawn by the caller, so its cancellation can name the command (`invokeEnded`).
        case command(TalkMachine.Command, session: String?, token: Int, CheckedContinuation<TalkMachine.Answer, Never>)
        case frame(PCMBuffer, at: ContinuousClock.Instant, followsGap: Bool)
        /// Frames held back while the loop said they may wait, in order.
        case frames([HeldFrame])
        case event(EventFrame)
        /// A setting or a hook of the loop's (not a machine input).
        case setting(Setting)
        /// Answered once everything posted before it has been processed (and published).
        case barrier(CheckedContinuation<Void, Never>)
        case probe(Probe)
        /// `clawvoice stop`: answers whether the speaker was playing.
        case stopSpeaking(CheckedContinuation<Bool, Never>)
        /// The wake chime's sound (nil: none).
        case chime(CheckedContinuation<PCMBuffer?, Never>)
        // Executor results.
        case captureDone(id: String, TalkMachine.Finished, note: [UInt8]?, timing: CaptureTiming)
        /// A followed reply's stream ended; `report`: its last sentence's (nil: nothing was spoken).
        case replySpoken(runId: String, SpeechReport?)
        /// Listen and notifications (TalkController+Speaker.swift).
        case speaker(SpeakerItem)
        case timerFired
    }

    /// The loop's own settings and hooks, each an input of the loop.
    enum Setting: Sendable {
        case config(TalkConfig)
        case headset(Bool)
        /// The gateway's talk.config silenceTimeoutMs (it wins over the local default).
        case gatewaySilenceTimeout(Int)
        case enableWake(WakeConfig, triggers: [String]?)
        case disableWake
        case wakeTriggers([String])
        case wakeRouting(JSONValue?)
        case outbox(OutboxSender?)
        case events(@Sendable (TalkEvent) -> Void)
        case onCallEnd(@Sendable (String) -> Void)
        case onCallStart(@Sendable (String) -> Void)
        case onCallFrame(@Sendable (PCMBuffer) -> Void)
        /// The microphone runs as a child of the loop (tools and tests; the daemon runs it as a service).
        case microphone(LiveAudio)
    }

    /// What the loop is made of, handed to it when `run()` starts.
    struct Parts: Sendable {
        let channel: any OperatorChannel
        let speech: SpeechOutput
        let config: TalkConfig
        let log: LogSink
        let outbox: OutboxSender?
        let onSessionChange: (@Sendable (String) -> Void)?
        let onMuteChange: (@Sendable (Bool) -> Void)?
        let echoReference: EchoReference?
        let clock: any TalkClock
    }

    let parts: Parts
    let inbox: AsyncStream<Item>
    let post: AsyncStream<Item>.Continuation
    let published: Locked<Snapshot>
    private let tokens = Locked(0)
    /// Frames the capture thread holds back while they may wait (only `micFrame` touches them).
    let held = Locked<[HeldFrame]>([])
    /// Who sets the microphone's pace at the sound server (LiveAudio), and the pace it last set.
    let pacer = Locked<(hook: (@Sendable (MicrophonePacing) -> Void)?, pacing: MicrophonePacing)>((nil, .prompt))
    /// A fresh number for a command or a notification.
    func nextToken() -> Int { tokens.withLock { $0 += 1; return $0 } }

    /// `clock`: the loop's time (the continuous clock unless a test drives it).
    public init(channel: any OperatorChannel, speech: SpeechOutput, config: TalkConfig, log: LogSink,
                outbox: OutboxSender? = nil, onSessionChange: (@Sendable (String) -> Void)? = nil,
                onMuteChange: (@Sendable (Bool) -> Void)? = nil, echoReference: EchoReference? = nil,
                clock: any TalkClock = SystemTalkClock()) {
        parts = Parts(channel: channel, speech: speech, config: config, log: log, outbox: outbox, onSessionChange: onSessionChange,
                      onMuteChange: onMuteChange, echoReference: echoReference, clock: clock)
        for problem in FeedbackSounds(config.cues).problems { log.log(.warning, "talk", problem) }
        (inbox, post) = AsyncStream.makeStream(of: Item.self)
        var s = Snapshot()
        s.muted = config.startsMuted
        s.sessionKey = config.sessionKey
        s.silenceTimeoutMs = config.silenceTimeoutMs
        published = Locked(s)
    }

    /// Runs the loop until the task is cancelled; executor jobs are its child tasks. The loop
    /// (machine, executors) is made here and lives only as long as this call.
    public func run() async {
        await TalkLoop(parts, handle: self).run()
    }

    /// Posts an item. Once the loop has ended (daemon stopping) nothing is left waiting: a
    /// command is refused, a barrier passes, a probe is answered.
    func send(_ item: Item) {
        guard case .terminated = post.yield(item) else { return }
        switch item {
        case .command(_, _, _, let c): c.resume(returning: .failed(PTTError(code: "UNAVAILABLE", message: "the talk loop has stopped")))
        case .barrier(let c): c.resume()
        case .probe(let p): p.answer()
        case .stopSpeaking(let c): c.resume(returning: false)
        case .chime(let c): c.resume(returning: nil)
        case .speaker(let s): s.refuse()
        default: break
        }
    }

    /// Posts a setting and waits until the loop has taken it.
    func set(_ setting: Setting) async {
        send(.setting(setting))
        await barrier()
    }
}

// MARK: the public face: each call posts to the inbox and, where it answers, waits.

extension TalkController {
    /// Posts a command and waits for its answer. A caller that is cancelled meanwhile (the
    /// gateway's node.invoke.cancel or timeout, `InvokeSignal` says which) is an input of its
    /// own: the machine decides what it means for the turn the command waits for, and answers.
    private func command(_ c: TalkMachine.Command, session: String? = nil) async -> TalkMachine.Answer {
        let token = nextToken()
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
    public func start(session: String? = nil) async throws(PTTError) -> String {
        switch await command(.start, session: session) {
        case .captureId(let id): return id
        case .result(let r): return r.captureId
        case .failed(let e): throw e
        }
    }

    public func stop() async -> PTTResult { await result(of: .stop) }
    public func cancel() async -> PTTResult { await result(of: .cancel) }

    public func once(session: String? = nil) async throws(PTTError) -> PTTResult {
        switch await command(.once, session: session) {
        case .captureId(let id): return PTTResult(captureId: id, status: .empty)
        case .result(let r): return r
        case .failed(let e): throw e
        }
    }

    private func result(of c: TalkMachine.Command) async -> PTTResult {
        switch await command(c) {
        case .captureId(let id): return PTTResult(captureId: id, status: .empty)
        case .result(let r): return r
        case .failed(let e): return PTTResult(captureId: "", transcript: e.description, status: .cancelled)
        }
    }

    /// One 20 ms microphone frame (16 kHz mono), in order, from the capture loop.
    /// `followsGap`: the capture lost audio before this frame (the sound server came back).
    public func micFrame(_ frame: PCMBuffer, at: ContinuousClock.Instant = .now, followsGap: Bool = false) {
        let perItem = published.withLock { $0.pacing.framesPerItem }
        let batch = held.withLock { h -> [HeldFrame]? in
            h.append(HeldFrame(pcm: frame, at: at, followsGap: followsGap))
            guard h.count >= perItem else { return nil }
            defer { h.removeAll(keepingCapacity: true) }
            return h
        }
        guard let batch else { return }
        if batch.count == 1 { send(.frame(frame, at: at, followsGap: followsGap)) } else { send(.frames(batch)) }
    }

    /// A microphone frame the capture thread held back.
    struct HeldFrame: Sendable {
        let pcm: PCMBuffer
        let at: ContinuousClock.Instant
        let followsGap: Bool
    }

    /// `hook` sets the microphone's pace at the sound server: called at once with the pace of now,
    /// then on every change, in order, from the talk loop (never from the sound server's thread,
    /// so it may take the server's lock); nil removes it.
    public func onMicrophonePacing(_ hook: (@Sendable (MicrophonePacing) -> Void)?) {
        pacer.withLock { p in
            p.hook = hook
            hook?(p.pacing)
        }
    }

    /// The loop's pace changed: the sound server hears of it now (under the lock, so in order).
    func pace(_ pacing: MicrophonePacing) {
        pacer.withLock { p in
            guard p.pacing != pacing else { return }
            p.pacing = pacing
            p.hook?(pacing)
        }
    }

    public func setMicrophone(_ state: MicrophoneState) { send(.input(.microphone(state))) }
    /// A gateway event for Talk: transcripts from the relay, chat for replies, voicewake changes.
    public func handle(_ event: EventFrame) { send(.event(event)) }

    /// `clawvoice session use KEY`: talk to another chat session from now on.
    public func switchSession(to key: String) async {
        send(.input(.switchSession(key, reason: "session switched to \(key)")))
        await barrier()
    }

    /// The operator session's state: losing it, or the gateway naming a different main session
    /// (when none was chosen here), is a session switch.
    public func operatorChanged(connected: Bool, mainSessionKey: String?) async {
        send(.input(.operatorState(connected: connected, mainSessionKey: mainSessionKey)))
        await barrier()
    }

    /// A session switch, gateway switch or lost connection: cancel the capture, drop late results, stop speaking.
    public func interrupt(reason: String) async {
        send(.input(.interrupt(reason: reason)))
        await barrier()
    }

    /// `clawvoice stop`: stop speaking now, as a barge-in would. True when something was playing.
    @discardableResult
    public func stopSpeaking() async -> Bool {
        await withCheckedContinuation { send(.stopSpeaking($0)) }
    }

    /// `clawvoice mute|unmute`: microphone and wake word off (on). `announce`: play its sound.
    public func setMuted(_ on: Bool, announce: Bool = true) async {
        send(.input(.setMuted(on, announce: announce)))
        await barrier()
    }

    public var muted: Bool { published.withLock { $0.muted } }

    /// Every TalkEvent from now on, on the loop (keep it quick: hand it on).
    public func observeEvents(_ f: @escaping @Sendable (TalkEvent) -> Void) async { await set(.events(f)) }

    /// Waits until everything posted before it has been processed.
    public func barrier() async { await withCheckedContinuation { send(.barrier($0)) } }

    public func followReply(runId: String) { send(.input(.followReply(runId: runId))) }
    /// The outbox sent a turn: replies come under its run id, which may differ from the key.
    public func turnSent(idempotencyKey: String, runId: String) {
        send(.input(.turnSent(idempotencyKey: idempotencyKey, runId: runId)))
    }

    /// The durable outbox turns go through from now on (the daemon's changes with the gateway).
    public func use(outbox: OutboxSender?) { send(.setting(.outbox(outbox))) }

    /// A gateway switch: the session remembered for the new gateway becomes current (not persisted again).
    public func restoreSession(_ key: String?) async {
        send(.input(.restoreSession(key)))
        await barrier()
    }

    public func update(config: TalkConfig) { send(.setting(.config(config))) }
    public func setHeadset(_ headset: Bool) { send(.setting(.headset(headset))) }

    // Reads: from the snapshot the loop publishes after every item.
    public var phase: TalkPhase { published.withLock { $0.phase } }
    public var activeCaptureId: String? {
        switch phase { case .idle: return nil; case .capturing(let id), .ending(let id): return id }
    }
    /// The chat session chosen here (nil: the gateway's main session).
    public var sessionKey: String? { published.withLock { $0.sessionKey } }
    public var pendingInterruption: String? { published.withLock { $0.pendingInterruption } }
    public var gatedFrames: Int { published.withLock { $0.gatedFrames } }
    public var bargeIns: Int { published.withLock { $0.bargeIns } }
    /// Speech stopped by the stop word.
    public var stopWords: Int { published.withLock { $0.stopWords } }
    public var silenceTimeoutMs: Int { published.withLock { $0.silenceTimeoutMs } }
    public var wakeStatus: WakeStatus? { published.withLock { $0.wake } }
    public var lastVoiceNote: [UInt8]? { published.withLock { $0.lastVoiceNote } }
    public var lastTiming: CaptureTiming? { published.withLock { $0.lastTiming } }
    public var lastSpeech: SpeechReport? { published.withLock { $0.lastSpeech } }
    /// The reply being spoken (or last spoken), for tests, the bench and barge-in.
    public var lastReply: ReplyStream? { published.withLock { $0.lastReply } }

    /// Reads `talk.config` from the gateway: its `silenceTimeoutMs` wins over the local default.
    /// Gateways without the method (or without the key) leave the config as it is.
    public func syncGatewayConfig() async {
        // As the operator session asks it (issue 26): secrets are never wanted here.
        guard let result = try? await parts.channel.request("talk.config", params: ["includeSecrets": false], timeoutMs: 10_000) else { return }
        if let ms = result["config"]?["talk"]?["silenceTimeoutMs"]?.intValue, ms >= 200, ms <= 10_000 {
            await set(.gatewaySilenceTimeout(Int(ms)))
        }
    }

    // MARK: wake

    /// Starts listening for the gateway's trigger words (the last list heard, else `triggers`, else the defaults).
    public func enableWake(_ wakeConfig: WakeConfig, triggers: [String]? = nil) async {
        await set(.enableWake(wakeConfig, triggers: triggers))
    }

    public func disableWake() async { await set(.disableWake) }

    /// Reads the trigger list (and routing, when the gateway has it) after the operator session connects.
    public func syncWake() async {
        let channel = parts.channel
        if let r = try? await channel.request("voicewake.get", params: [:], timeoutMs: 10_000),
           let t = VoiceWakeTriggers(payload: r) {
            await set(.wakeTriggers(t.triggers))
        }
        if await channel.advertisedMethods().contains("voicewake.routing.get"),
           let r = try? await channel.request("voicewake.routing.get", params: [:], timeoutMs: 10_000) {
            await set(.wakeRouting(r))
        }
    }

    /// Plays the wake chime (on detection; also for tests and diagnostics): the configured
    /// sound, the generated one when wake is off. False when nothing played.
    @discardableResult
    public func playChime() async -> Bool {
        let pcm = await withCheckedContinuation { send(.chime($0)) }
        guard let pcm else { return false }
        return await parts.speech.playCue(pcm)
    }
}
