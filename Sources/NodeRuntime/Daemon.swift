// `clawvoice run`: keeps both sessions to the active gateway up and serves the control socket.

import Audio
import Buttons
import Foundation
import GatewayClient
import GatewayProtocol
import Store
import Talk
import WakeWord

/// The node commands this build declares. Talk and notification land in later parts; until then
/// they are declared (so pairing approves them once) and answer UNAVAILABLE with the reason.
public enum NodeCommands {
    public static let ptt = ["talk.ptt.start", "talk.ptt.stop", "talk.ptt.cancel", "talk.ptt.once"]
    public static let all = ptt + ["system.notify"]

    public static func registry(talk: TalkController? = nil, notifications: NotificationSpeaker? = nil) -> NodeCommandRegistry {
        let r = NodeCommandRegistry()
        if let talk {
            // The turn (and its reply) goes to the session the gateway stamped on the invoke
            // (TurnSession: top-level sessionKey), else the current one.
            r.register("talk.ptt.start") { req, _ in
                let session = TurnSession.resolve(invoke: req.session, current: nil, main: nil)
                do { return ["captureId": .string(try await talk.start(session: session))] } catch { throw pttFailure(error) }
            }
            r.register("talk.ptt.stop") { _, _ in try JSONValue(encoding: await talk.stop()) }
            r.register("talk.ptt.cancel") { _, _ in try JSONValue(encoding: await talk.cancel()) }
            r.register("talk.ptt.once") { req, _ in
                let session = TurnSession.resolve(invoke: req.session, current: nil, main: nil)
                do { return try JSONValue(encoding: try await talk.once(session: session)) } catch { throw pttFailure(error) }
            }
        } else {
            for c in ptt { r.registerUnavailable(c, reason: "AUDIO_UNAVAILABLE: this node runs without audio") }
        }
        if let notifications {
            r.register("system.notify", notifications.handler)
        } else {
            r.registerUnavailable("system.notify", reason: "AUDIO_UNAVAILABLE: spoken notifications need the daemon's speaker")
        }
        return r
    }

    static func pttFailure(_ error: any Error) -> NodeInvokeError {
        NodeInvokeError(code: .unavailable, message: (error as? PTTError)?.description ?? "\(error)")
    }
}

/// Opens the store, making sure the state directory exists with the right modes.
/// Where recordings of captures go when talk.voiceNotes is on (`clawvoice forget` empties it).
public func voiceNotesDirectory(stateDir: String) -> String { stateDir + "/voice-notes" }

public func openStore(_ paths: RuntimePaths) throws -> ClawStore {
    try ClawStore(directory: paths.stateDir)
}

/// What the daemon keeps for the active gateway: both sessions, the outbox and the transcript
/// cache. Switching or forgetting a gateway replaces this in place; everything else runs on.
final class GatewayScope: Sendable {
    let record: GatewayRecord
    let link: GatewayLink
    let outbox: OutboxSender
    let transcripts: TranscriptSync

    init(record: GatewayRecord, link: GatewayLink, outbox: OutboxSender, transcripts: TranscriptSync) {
        self.record = record
        self.link = link
        self.outbox = outbox
        self.transcripts = transcripts
    }
}

/// The running node. Each long-lived part is a service run under one supervisor (a task
/// group): the talk loop, the microphone, the gateway scope, the event pump, the button.
/// SIGTERM/SIGINT cancel them together (2 s at most); SIGHUP reloads the config; a gateway
/// switch rebuilds the gateway scope in place.
public final class NodeDaemon: Sendable {
    let paths: RuntimePaths
    let config: ClawConfig
    let log: LogSink
    let store: ClawStore
    let startedAtMs = nowMs()
    private let identity: DeviceIdentity
    private let instanceId: String
    private let timing: ConnectionTiming
    private let reload: (@Sendable () throws -> ClawConfig)?
    private let control: Mutex<ControlSocketServer?> = Mutex(nil)
    public let audio: LiveAudio
    public let talk: TalkController
    public let speech: SpeechOutput
    public let listen: ListenPlayer
    public let notifications: NotificationSpeaker
    let button: PTTButtonService?
    let headsetKnown: Bool
    private let operatorSession: Mutex<GatewaySession?>
    /// Set in init and replaced on each switch; never nil after init.
    private let scope = Mutex<GatewayScope?>(nil)
    /// Whether a gateway is active (false after `gateways forget` of the active one).
    private let active = Mutex(true)
    private let events: AsyncStream<(SessionRole, EventFrame)>
    private let eventSink: AsyncStream<(SessionRole, EventFrame)>.Continuation
    private let switches: AsyncStream<String>
    private let switchSink: AsyncStream<String>.Continuation
    private let supervisor = Mutex<Task<Void, Never>?>(nil)
    /// `clawvoice events` subscribers and the config's event commands.
    let bus: EventBus
    /// Each role's last state, so connected/disconnected are published once per change.
    private let roleStates = Mutex<[String: Bool]>([:])

    /// The active gateway's link, outbox and transcript cache (the last one, when none is active).
    private var currentScope: GatewayScope { scope.withLock { $0! } }
    public var link: GatewayLink { currentScope.link }
    public var outbox: OutboxSender { currentScope.outbox }
    public var transcripts: TranscriptSync { currentScope.transcripts }

    public init(paths: RuntimePaths, config: ClawConfig, log: LogSink, timing: ConnectionTiming = ConnectionTiming(),
                pulseServer: String? = nil, reload: (@Sendable () throws -> ClawConfig)? = nil) throws {
        self.paths = paths
        self.config = config
        self.log = log
        self.timing = timing
        self.reload = reload
        // One store for the life of the process: every part shares its one connection.
        store = try openStore(paths)
        (identity, instanceId) = try store.loadOrCreateIdentity()
        guard let record = try resolveActiveGateway(config: config, store: store, remember: true) else {
            throw ConfigError("no gateway paired yet: run `clawvoice pair <setup-code>` or `clawvoice pair --url ws://HOST:18789 --token-file FILE` first")
        }
        let operatorSession = Mutex<GatewaySession?>(nil)
        self.operatorSession = operatorSession
        bus = EventBus(commands: config.events.commands, log: log)
        audio = LiveAudio(source: config.audio.source, sink: config.audio.sink, server: pulseServer, log: log)
        let channel = LateOperatorChannel(box: operatorSession)
        // What the speaker plays is the echo canceller's reference.
        let echo = EchoReference()
        let speech = SpeechOutput(channel: channel, sink: PulseSpeechSink(playback: audio.playback, reference: echo),
                                  config: NodeDaemon.speechConfig(config), log: log)
        self.speech = speech
        // `session use` is remembered per gateway; the talk loop persists each switch there.
        var talkConfig = NodeDaemon.talkConfig(config, stateDir: paths.stateDir)
        talkConfig.sessionKey = (try? store.currentSession(gateway: record.name)) ?? config.talk.sessionKey
        // Recordings the settings no longer allow go at start, not only at the next capture; with
        // recordings off, the ones an older version kept are pointed out (`clawvoice forget`).
        let notesDir = voiceNotesDirectory(stateDir: paths.stateDir)
        if config.talk.voiceNotes {
            let gone = VoiceNotes.prune(directory: notesDir, keep: talkConfig.keepVoiceNotes,
                                        maxAgeMs: talkConfig.voiceNotesMaxAgeMs, nowMs: nowMs())
            if gone > 0 { log.log(.info, "talk", "removed \(gone) recording\(gone == 1 ? "" : "s") past talk.voiceNotesKeep/voiceNotesMaxAgeDays") }
        } else if case let n = VoiceNotes.list(directory: notesDir).count, n > 0 {
            log.log(.info, "talk", "\(n) recording\(n == 1 ? "" : "s") of earlier captures in \(notesDir) (talk.voiceNotes is off); `clawvoice forget` removes them")
        }
        // What `mute` left: a muted node comes back muted (silently), already in its first status.
        talkConfig.startsMuted = (try? store.setting("muted")) == "1"
        let (store, activeGateway) = (self.store, Mutex<String>(record.name))
        let talk = TalkController(channel: channel, speech: speech, config: talkConfig, log: log, outbox: nil,
                                  onSessionChange: { key in
                                      let gateway = activeGateway.withLock { $0 }
                                      do { try store.setCurrentSession(gateway: gateway, key: key) } catch {
                                          log.log(.warning, "talk", "could not remember session \(key): \(error)")
                                      }
                                  },
                                  onMuteChange: { on in
                                      // Kept across restarts: a muted node comes back muted.
                                      do { try store.setSetting("muted", on ? "1" : nil) } catch {
                                          log.log(.warning, "talk", "could not remember muted=\(on): \(error)")
                                      }
                                  }, echoReference: echo)
        self.activeName = activeGateway
        latestConfig = Mutex(config)
        self.talk = talk
        self.listen = ListenPlayer(speech: speech)
        // Spoken notifications (config talk.speakNotifications); a passive one waits for the user to finish.
        let notifications = NotificationSpeaker(speech: speech, enabled: config.talk.speakNotifications,
                                                userTalking: { talk.phase != .idle })
        self.notifications = notifications
        headsetKnown = config.audio.headset != nil
        (events, eventSink) = AsyncStream.makeStream(of: (SessionRole, EventFrame).self, bufferingPolicy: .bufferingNewest(1024))
        (switches, switchSink) = AsyncStream.makeStream(of: String.self)
        (statuses, statusSink) = AsyncStream.makeStream(of: (SessionStatus, GatewayScope?).self)
        let (presses, pressSink) = AsyncStream.makeStream(of: PTTKeyAction.self)
        self.presses = presses
        if let device = config.ptt.device {
            do {
                // Key presses go in order to the button service, which waits for each answer.
                button = try PTTButtonService(device: device, key: config.ptt.key,
                                              mode: PTTKeyMachine.Mode(rawValue: config.ptt.mode) ?? .hold) { pressSink.yield($0) }
            } catch {
                throw ConfigError("ptt: \(error)")
            }
        } else {
            button = nil
        }
        let (controlPresses, controlSink) = AsyncStream.makeStream(of: NodeControl.self)
        self.controlPresses = controlPresses
        do { controlKeys = try ControlKeys.services(config.ptt) { controlSink.yield($0) } } catch {
            throw ConfigError("ptt: \(error)")
        }
        // The first scope, built now so `link` is there before `start` returns.
        scope.withLock { $0 = makeScope(record) }
        log.log(.info, "daemon", "device \(identity.deviceId.prefix(16))…, gateway \(record.name) (\(record.url))")
    }

    private let activeName: Mutex<String>
    /// The config as last read (SIGHUP reloads it): its gateway.url picks the gateway on a rebuild.
    private let latestConfig: Mutex<ClawConfig>
    private let statuses: AsyncStream<(SessionStatus, GatewayScope?)>
    private let statusSink: AsyncStream<(SessionStatus, GatewayScope?)>.Continuation
    private let presses: AsyncStream<PTTKeyAction>
    private let controlPresses: AsyncStream<NodeControl>
    let controlKeys: [PTTButtonService]

    /// Link, outbox and transcript cache for one gateway, wired to the talk loop.
    private func makeScope(_ record: GatewayRecord) -> GatewayScope {
        let channel = LateOperatorChannel(box: operatorSession)
        let outbox = OutboxSender(store: store, gateway: record.name, channel: channel, log: log)
        let transcripts = TranscriptSync(store: store, gateway: record.name, channel: channel, log: log)
        let link = GatewayLink(record: record, store: store, identity: identity, instanceId: instanceId, config: config,
                               commands: NodeCommands.registry(talk: talk, notifications: notifications),
                               log: log, timing: timing)
        let (sink, statusSink) = (eventSink, self.statusSink)
        link.onEvent { role, e in sink.yield((role, e)) }
        let made = GatewayScope(record: record, link: link, outbox: outbox, transcripts: transcripts)
        let (bus, roleStates) = (self.bus, self.roleStates)
        link.onStatus { [weak made] s in
            if s.role == "operator" { statusSink.yield((s, made)) }
            let up = s.state == .connected
            if roleStates.withLock({ states in defer { states[s.role] = up }; return states[s.role] != up && (up || states[s.role] == true) }) {
                bus.publish(up ? "connected" : "disconnected", ["role": s.role, "gateway": s.gateway, "detail": s.detail])
            }
        }
        return made
    }

    static func speechConfig(_ c: ClawConfig) -> SpeechConfig {
        var s = SpeechConfig()
        s.voice = VoiceSettings(voice: c.speech.voice, rateWpm: c.speech.rateWpm, pitch: c.speech.pitch)
        s.talkOutputFormat = c.talk.outputFormat
        return s
    }

    static func talkConfig(_ c: ClawConfig, stateDir: String) -> TalkConfig {
        var t = TalkConfig()
        t.silenceTimeoutMs = c.talk.silenceTimeoutMs
        t.onceMaxMs = c.talk.onceMaxMs
        t.captureMaxMs = c.talk.captureMaxMs
        t.preRollMs = c.audio.preRollMs
        t.opusBitrate = c.talk.opusBitrate
        t.opusComplexity = c.talk.opusComplexity
        t.sessionKey = c.talk.sessionKey
        t.speakReplies = c.talk.speakReplies
        t.interruptOnSpeech = c.talk.interruptOnSpeech
        t.followUpMs = c.talk.followUpMs
        t.stopWordSensitivity = c.talk.stopWordSensitivity
        t.stopWordModelsDirectory = c.talk.stopWord ? c.wake.modelsDirectory ?? WakeModelCatalog.defaultDirectory() : nil
        t.headset = c.audio.headset ?? false
        t.echoCancel = c.audio.echoCancel
        t.echoDelayMs = c.audio.echoDelayMs
        t.voiceDetector = c.audio.voiceDetector
        t.modelsDirectory = c.wake.modelsDirectory
        t.voiceNoteDirectory = c.talk.voiceNotes ? voiceNotesDirectory(stateDir: stateDir) : nil
        t.keepVoiceNotes = c.talk.voiceNotesKeep
        t.voiceNotesMaxAgeMs = Int64(c.talk.voiceNotesMaxAgeDays) * 86_400_000
        t.cues = c.sounds.cues
        return t
    }

    /// `clawvoice run`: everything until SIGINT or SIGTERM; SIGHUP reloads the config.
    public func run() async throws {
        try await start()
        let signals = SignalStream([SIGINT, SIGTERM, SIGHUP])
        for await number in signals.stream {
            if number == SIGHUP { await reloadConfig(); continue }
            log.log(.info, "daemon", "\(number == SIGTERM ? "SIGTERM" : "SIGINT"): stopping")
            break
        }
        signals.cancel()
        await stop()
    }

    /// Starts the control socket and the supervisor with every service.
    public func start(controlSocket: Bool = true) async throws {
        if controlSocket {
            let bus = self.bus
            let server = try ControlSocketServer(path: paths.controlSocket, streamer: { request in
                guard request["cmd"]?.stringValue == "events" else { return nil }
                let (id, lines) = bus.subscribe()
                return (lines, { bus.unsubscribe(id) })
            }) { [weak self] request in
                guard let self else { return ["ok": false, "error": "daemon stopping"] }
                return await self.handle(request)
            }
            control.withLock { $0 = server }
            log.log(.info, "daemon", "control socket at \(paths.controlSocket)")
        }
        let task = Task { await self.supervise() }
        supervisor.withLock { $0 = task }
        // After the supervisor: the talk loop takes the handler.
        let bus = self.bus
        await talk.observeEvents { e in bus.publish(e.name, e.fields) }
        await speech.observeSpeaking { on in bus.publish("speaking", ["state": on ? "started" : "stopped"]) }
        // After the supervisor: enabling waits for the talk loop to take it.
        if config.wake.enabled {
            var wake = WakeConfig(modelsDirectory: config.wake.modelsDirectory ?? WakeModelCatalog.defaultDirectory())
            wake.sensitivity = config.wake.sensitivity
            wake.chime = config.wake.chime
            await talk.enableWake(wake)
        }
        // What `volume` left: our stream comes back at its level (muting is restored at init).
        if let v = try? store.setting("volume"), let n = Int(v) { audio.playback.setVolume(percent: n) }
    }

    /// The services, started and cancelled together.
    private func supervise() async {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.talk.run() }
            group.addTask { await self.audio.run(feeding: self.talk) }
            group.addTask { await self.pumpEvents() }
            group.addTask { await self.followOperator() }
            group.addTask { await self.gatewayService() }
            if !headsetKnown { group.addTask { await self.probeHeadset() } }
            if let button { group.addTask { await self.runButton(button) } }
            if !controlKeys.isEmpty { group.addTask { await self.runControlKeys() } }
            if let notifier = SystemdNotifier(environment: ProcessInfo.processInfo.environment) {
                group.addTask { await self.systemdService(notifier) }
            }
        }
    }

    /// Stops every service (2 s at most), then the control socket. The outbox is SQLite: what
    /// was queued stays queued for the next start.
    public func stop() async {
        log.log(.info, "daemon", "stopping")
        await talk.interrupt(reason: "daemon stopping")
        log.log(.debug, "daemon", "talk interrupted")
        guard let task = supervisor.withLock({ $0 }) else { control.withLock { $0?.stop() }; return }
        task.cancel()
        // A task group would wait for the slow service too: race the two instead.
        let finished = await answers(within: .seconds(2)) { await task.value }
        if !finished { log.log(.warning, "daemon", "a service did not stop within 2 s; exiting anyway") }
        bus.finishAll()
        control.withLock { $0?.stop() }
    }

    // MARK: services

    /// Gateway events in order to the talk loop (chat deltas, transcripts); voicewake.* arrive on
    /// both sessions (the node session gets them first on connect).
    private func pumpEvents() async {
        for await (role, e) in events where role == .operator || e.event.hasPrefix("voicewake.") { talk.handle(e) }
    }

    /// The active gateway's scope, rebuilt in place on every switch request until cancelled.
    private func gatewayService() async {
        var requests = switches.makeAsyncIterator()
        var current: GatewayScope? = scope.withLock { $0 }
        while !Task.isCancelled {
            if let s = current {
                activeName.withLock { $0 = s.record.name }
                operatorSession.withLock { $0 = s.link.operator }
                talk.use(outbox: s.outbox)
                // Replies of an outbox turn arrive under the run id its chat.send returned.
                let talk = self.talk
                let bus = self.bus
                await s.outbox.observe { event in
                    if case .sent(let item, let runId) = event {
                        talk.turnSent(idempotencyKey: item.idempotencyKey, runId: runId)
                        bus.publish("turnSent", ["idempotencyKey": item.idempotencyKey, "runId": runId, "sessionKey": item.sessionKey])
                    }
                }
                await s.outbox.start()
                await s.link.start()
            }
            guard let reason = await requests.next() else { break }
            log.log(.info, "daemon", "\(reason): rebuilding the gateway link")
            await talk.interrupt(reason: reason)
            if let s = current {
                await s.outbox.stop()
                await s.link.stop()
            }
            do {
                if let record = try resolveActiveGateway(config: latestConfig.withLock({ $0 }), store: store, remember: true) {
                    let next = makeScope(record)
                    scope.withLock { $0 = next }
                    current = next
                    active.withLock { $0 = true }
                    await talk.restoreSession((try? store.currentSession(gateway: record.name)) ?? config.talk.sessionKey)
                    log.log(.info, "daemon", "gateway \(record.name) (\(record.url))")
                } else {
                    current = nil
                    active.withLock { $0 = false }
                    operatorSession.withLock { $0 = nil }
                    log.log(.warning, "daemon", "no active gateway: pair one with `clawvoice pair` or pick one with `clawvoice gateways use NAME`")
                }
            } catch {
                log.log(.error, "daemon", "the gateway list cannot be read: \(error)")
            }
        }
        if let s = current {
            await s.outbox.stop()
            await s.link.stop()
        }
    }

    /// Barge-in needs to know whether the speaker is a headset: ask PulseAudio about the sink.
    private func probeHeadset() async {
        guard (try? await audio.connection.waitUntilReady(timeout: .seconds(10))) != nil,
              let sinks = try? await audio.connection.sinks(),
              let sink = sinks.first(where: { config.audio.sink == nil ? $0.isDefault : $0.name == config.audio.sink }) else { return }
        talk.setHeadset(sink.isHeadset)
        log.log(.info, "audio", "speaker \(sink.name) is \(sink.isHeadset ? "a headset: barge-in on" : (config.audio.echoCancel ?? true) ? "a loudspeaker: its echo is cancelled, so barge-in and wake words work while it speaks" : "a loudspeaker: the microphone mutes while it speaks")")
    }

    /// The headset or keyboard key: each press is a PTT command, in order.
    private func runButton(_ button: PTTButtonService) async {
        do { try button.start() } catch { log.log(.warning, "ptt", "\(error)"); return }
        for await action in presses {
            switch action {
            case .start:
                do { _ = try await talk.start() } catch { log.log(.warning, "ptt", "button: \(error)") }
            case .stop:
                let r = await talk.stop()
                log.log(.info, "ptt", "button: capture \(r.captureId) \(r.status.rawValue)")
            }
        }
        button.stop()
    }

    /// Type=notify: READY=1, STATUS= and the watchdog, every half watchdog interval (2 s without
    /// one). The watchdog is kicked only while the talk loop answers within 2 s.
    private func systemdService(_ notifier: SystemdNotifier) async {
        let watchdog = notifier.watchdogMicroseconds
        let periodMs = Int64(watchdog.map { max($0 / 2_000, 100) } ?? 2_000)
        var state = SystemdState()
        while !Task.isCancelled {
            let node = await link.node.currentStatus()
            let op = await link.operator.currentStatus()
            let facts = SystemdState.Facts(node: node.state.rawValue, nodeDetail: node.detail, operatorState: op.state.rawValue,
                                           microphone: audio.captureStatus, muted: talk.muted,
                                           loopResponsive: await answers(within: .seconds(2)) { await self.talk.barrier() })
            notifier.send(state.step(facts, watchdog: watchdog != nil))
            try? await Task.sleep(for: .milliseconds(periodMs))
        }
        notifier.send(["STOPPING=1"])
    }

    /// Whether `body` finishes within `limit` (it keeps running either way).
    private func answers(within limit: Duration, _ body: @escaping @Sendable () async -> Void) async -> Bool {
        await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
            let once = Mutex(false)
            let finish: @Sendable (Bool) -> Void = { v in if once.withLock({ d in defer { d = true }; return !d }) { c.resume(returning: v) } }
            Task { await body(); finish(true) }
            Task { try? await Task.sleep(for: limit); finish(false) }
        }
    }

    /// The keys bound to stop, mute and volume: each press one control, in order.
    private func runControlKeys() async {
        for k in controlKeys {
            do { try k.start() } catch { log.log(.warning, "ptt", "\(error)") }
        }
        for await c in controlPresses {
            let r = await control(c)
            log.log(.info, "ptt", "key: \(c) → \(r.description)")
        }
        for k in controlKeys { k.stop() }
    }

    /// Carries out one control (from the socket or a key).
    func control(_ c: NodeControl) async -> JSONValue {
        switch c {
        case .stop:
            let speaking = await talk.stopSpeaking()
            return ["ok": true, "stopped": .bool(speaking)]
        case .mute(let on):
            await talk.setMuted(on)
            return ["ok": true, "muted": .bool(talk.muted)]
        case .toggleMute:
            await talk.setMuted(!talk.muted)
            return ["ok": true, "muted": .bool(talk.muted)]
        case .volume(let set, let change):
            if set != nil || change != nil {
                let level = NodeControl.level(current: audio.playback.volumePercent, set: set, change: change)
                audio.playback.setVolume(percent: level)
                do { try store.setSetting("volume", level == 100 ? nil : String(level)) } catch {
                    log.log(.warning, "audio", "could not remember volume \(level): \(error)")
                }
                log.log(.info, "audio", "volume \(level)%")
            }
            return ["ok": true, "volume": .number(Double(audio.playback.volumePercent))]
        }
    }

    /// The operator session's status changes, in order: losing it, or the gateway naming another
    /// main session, is a session switch; on (re)connect queued turns go out at once and the
    /// gateway's Talk settings, wake triggers and the current history are read anew.
    private func followOperator() async {
        for await (s, owner) in statuses {
            guard let owner, owner === scope.withLock({ $0 }) else { continue }  // a replaced scope's last words
            await talk.operatorChanged(connected: s.state == .connected, mainSessionKey: s.mainSessionKey)
            guard s.state == .connected else { continue }
            await owner.outbox.nudge()
            await talk.syncGatewayConfig()
            await talk.syncWake()
            let key = await historySessionKey(nil)
            _ = try? await owner.transcripts.refresh(sessionKey: key)
        }
    }

    /// SIGHUP: read the config again and apply what can change while running.
    private func reloadConfig() async {
        guard let reload else { log.log(.info, "daemon", "SIGHUP: no config file to reload"); return }
        do {
            let c = try reload()
            talk.update(config: NodeDaemon.talkConfig(c, stateDir: paths.stateDir))
            bus.setCommands(c.events.commands)
            await speech.update(config: NodeDaemon.speechConfig(c))
            latestConfig.withLock { $0 = c }
            log.log(.info, "daemon", "SIGHUP: config reloaded")
        } catch {
            log.log(.error, "daemon", "SIGHUP: config not reloaded: \(error)")
            return
        }
        // A new pairing, another gateway.url or a paused session: rebuild the gateway link.
        do {
            let wanted = try resolveActiveGateway(config: latestConfig.withLock({ $0 }), store: store)
            let current = active.withLock({ $0 }) ? scope.withLock({ $0?.record }) : nil
            let roles = [await link.node.currentStatus(), await link.operator.currentStatus()]
            func address(_ r: GatewayRecord?) -> [String?] { [r?.name, r?.url, r?.tlsFingerprint, r.map { "\($0.allowInsecure)" }] }
            if address(wanted) != address(current) || roles.contains(where: { $0.state != .connected }) {
                switchSink.yield("SIGHUP")
            }
        } catch {
            log.log(.error, "daemon", "SIGHUP: the gateway stays as it was: \(error)")
        }
    }

    func handle(_ request: JSONValue) async -> JSONValue {
        switch request["cmd"]?.stringValue {
        case "ping":
            return ["ok": true]
        case "status":
            return await statusJSON()
        case "session":
            if let key = request["use"]?.stringValue, !key.isEmpty {
                await talk.switchSession(to: key)
                return ["ok": true, "sessionKey": .string(key)]
            }
            return ["ok": true, "sessionKey": .string(await historySessionKey(nil))]
        case "restart":
            // The active gateway changed (`gateways use|forget`): rebuild its scope in place.
            switchSink.yield(request["reason"]?.stringValue ?? "gateway switched")
            return ["ok": true]
        case "ptt":
            return await ptt(request["action"]?.stringValue ?? "")
        case "stop", "mute", "unmute", "volume":
            guard let c = NodeControl.parse(request) else { return ["ok": false, "error": "bad control request"] }
            return await control(c)
        case "say":
            return await say(request)
        case "audio-devices":
            return await devicesJSON(connection: audio.connection)
        case "history-refresh":
            return await historyRefresh(request)
        case "listen":
            return await listenJSON(request)
        default:
            return ["ok": false, "error": .string("unknown command \(request["cmd"]?.stringValue ?? "(none)")")]
        }
    }

    func statusJSON() async -> JSONValue {
        var sessions: [String: JSONValue] = [:]
        for role in SessionRole.allCases {
            let s = role == .node ? await link.node.currentStatus() : await link.operator.currentStatus()
            sessions[role.rawValue] = (try? JSONValue(encoding: s)) ?? .null
        }
        let key: String? = await historySessionKey(nil)
        return ["ok": true, "version": .string(ClawvoiceVersion.current), "pid": .number(Double(getpid())),
                "uptimeMs": .number(Double(nowMs() - startedAtMs)),
                "gateway": ["name": .string(link.record.name), "url": .string(link.record.url)],
                "sessions": .object(sessions), "sessionKey": key.map { .string($0) } ?? .null,
                "capture": .string(audio.captureStatus), "ptt": .string(talk.activeCaptureId.map { "capturing \($0)" } ?? "idle"),
                "playback": .string(audio.playback.isPlaying ? "playing" : "idle"),
                "button": button.map { .string($0.status.description) } ?? "off",
                "muted": .bool(talk.muted), "volume": .number(Double(audio.playback.volumePercent)), "wake": await talk.wakeStatus?.json ?? "off",
                "outbox": .number(Double((try? store.outboxCount(gateway: link.record.name)) ?? 0))]
    }

    func ptt(_ action: String) async -> JSONValue {
        do {
            switch action {
            case "start": return ["ok": true, "result": ["captureId": .string(try await talk.start())]]
            case "stop": return ["ok": true, "result": try JSONValue(encoding: await talk.stop())]
            case "cancel": return ["ok": true, "result": try JSONValue(encoding: await talk.cancel())]
            case "once": return ["ok": true, "result": try JSONValue(encoding: try await talk.once())]
            default: return ["ok": false, "error": .string("unknown ptt action '\(action)' (start, stop, cancel, once)")]
            }
        } catch {
            return ["ok": false, "error": .string("\(error)")]
        }
    }

    func say(_ request: JSONValue) async -> JSONValue {
        guard let text = request["text"]?.stringValue, !text.isEmpty else { return ["ok": false, "error": "say needs text"] }
        let route: SpeechRoute = request["local"]?.boolValue == true ? .local : .talkSpeak
        let report = await speech.speak(text, route: route)
        return ["ok": .bool(report.outcome != .failed), "engine": .string(report.engine),
                "fallbackReason": report.fallbackReason.map { .string($0) } ?? .null,
                "outcome": .string(report.outcome.rawValue), "durationMs": .number(report.durationMs.rounded()),
                "error": report.error.map { .string($0) } ?? .null]
    }
}

/// The operator session, resolved after the link exists (the link needs the registry, the registry the controller).
struct LateOperatorChannel: OperatorChannel {
    let box: Mutex<GatewaySession?>
    func request(_ method: String, params: JSONValue?, timeoutMs: Int64?) async throws -> JSONValue {
        guard let s = box.withLock({ $0 }) else { throw GatewayRequestError.notConnected("starting") }
        return try await s.request(method, params: params, timeoutMs: timeoutMs)
    }
    func connected() async -> Bool { await box.withLock({ $0 })?.isConnected ?? false }
    func advertisedMethods() async -> [String] { await box.withLock({ $0 })?.advertisedMethods() ?? [] }
    func mainSessionKey() async -> String? { await box.withLock({ $0 })?.mainSessionKey() }
    func send(_ method: String, params: JSONValue?, timeoutMs: Int64?) async throws -> PendingResponse {
        guard let s = box.withLock({ $0 }) else { throw GatewayRequestError.notConnected("starting") }
        return try await s.send(method, params: params, timeoutMs: timeoutMs)
    }
}

/// `audio devices` as JSON: sources and sinks with their names.
func devicesJSON(connection: PulseConnection) async -> JSONValue {
    do {
        try await connection.waitUntilReady(timeout: .seconds(3))
        let sources = try await connection.sources()
        let sinks = try await connection.sinks()
        func list(_ ds: [AudioDevice]) -> JSONValue {
            .array(ds.map { d in
                ["name": .string(d.name), "description": .string(d.description), "spec": .string(d.sampleSpec),
                 "monitor": .bool(d.isMonitor), "default": .bool(d.isDefault), "headset": .bool(d.isHeadset),
                 "port": d.activePortName.map { .string($0) } ?? .null]
            })
        }
        return ["ok": true, "sources": list(sources), "sinks": list(sinks)]
    } catch {
        return ["ok": false, "error": .string("no sound server: \(error)")]
    }
}

/// Signals as a stream: the default action is off while it lives, so SIGTERM no longer kills
/// the process before the services stop.
final class SignalStream: Sendable {
    let stream: AsyncStream<Int32>
    private let sources: Mutex<[any DispatchSourceSignal]>

    init(_ numbers: [Int32]) {
        let (stream, sink) = AsyncStream.makeStream(of: Int32.self)
        self.stream = stream
        signal(SIGPIPE, SIG_IGN)
        var made: [any DispatchSourceSignal] = []
        for n in numbers {
            signal(n, SIG_IGN)
            let s = DispatchSource.makeSignalSource(signal: n, queue: .global())
            s.setEventHandler { sink.yield(n) }
            s.resume()
            made.append(s)
        }
        sources = Mutex(made)
    }

    func cancel() { sources.withLock { for s in $0 { s.cancel() }; $0 = [] } }
}

/// Suspends until the task is cancelled.
func untilCancelled() async {
    while !Task.isCancelled { try? await Task.sleep(for: .seconds(3600)) }
}
