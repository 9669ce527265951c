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
            r.register("talk.ptt.start") { _, _ in
                do { return ["captureId": .string(try await talk.start())] } catch { throw pttFailure(error) }
            }
            r.register("talk.ptt.stop") { _, _ in try JSONValue(encoding: await talk.stop()) }
            r.register("talk.ptt.cancel") { _, _ in try JSONValue(encoding: await talk.cancel()) }
            r.register("talk.ptt.once") { _, _ in
                do { return try JSONValue(encoding: try await talk.once()) } catch { throw pttFailure(error) }
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
public func openStore(_ paths: RuntimePaths) throws -> ClawStore {
    try ClawStore(directory: paths.stateDir)
}

/// Picks the gateway to run against: the config's URL (kept in the store under its host name) or the active paired one.
public func resolveActiveGateway(config: ClawConfig, store: ClawStore) throws -> GatewayRecord? {
    if let url = config.gateway.url {
        let name = GatewayNaming.name(for: url)
        var record = try store.gateway(named: name) ?? GatewayRecord(name: name, url: url, addedAtMs: nowMs())
        record.url = url
        record.sharedToken = config.gateway.token ?? record.sharedToken
        record.password = config.gateway.password ?? record.password
        record.tlsFingerprint = config.gateway.tlsFingerprint ?? record.tlsFingerprint
        record.allowInsecure = config.gateway.allowInsecure || record.allowInsecure
        try store.upsertGateway(record)
        try store.setActiveGateway(name: name)
        return try store.gateway(named: name)
    }
    return try store.activeGateway()
}

func nowMs() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

public enum GatewayNaming {
    /// `host` for the default port, else `host:port`.
    public static func name(for url: String) -> String {
        guard let c = URLComponents(string: url), let host = c.host, !host.isEmpty else { return "gateway" }
        if let p = c.port, p != 18789 { return "\(host):\(p)" }
        return host
    }
}

/// The running node: both sessions, the control socket, until SIGINT/SIGTERM.
public final class NodeDaemon: Sendable {
    let paths: RuntimePaths
    let config: ClawConfig
    let log: LogSink
    public let link: GatewayLink
    let store: ClawStore
    let startedAtMs = nowMs()
    private let control: Mutex<ControlSocketServer?> = Mutex(nil)
    /// Set when the control socket asks for a rebuild (the active gateway changed).
    public let restartRequested = Mutex(false)
    public let audio: LiveAudio
    public let talk: TalkController
    public let speech: SpeechOutput
    /// The durable outbox for this gateway: turns go out over chat.send and leave once chat.history shows them.
    public let outbox: OutboxSender
    /// The transcript cache's writer, Listen and spoken system.notify; the last two share `speech`.
    public let transcripts: TranscriptSync
    public let listen: ListenPlayer
    public let notifications: NotificationSpeaker
    let button: PTTButtonService?
    private let events: AsyncStream<(SessionRole, EventFrame)>
    private let eventSink: AsyncStream<(SessionRole, EventFrame)>.Continuation

    public init(paths: RuntimePaths, config: ClawConfig, log: LogSink, timing: ConnectionTiming = ConnectionTiming(),
                pulseServer: String? = nil) throws {
        self.paths = paths
        self.config = config
        self.log = log
        store = try openStore(paths)
        let (identity, instanceId) = try store.loadOrCreateIdentity()
        guard let record = try resolveActiveGateway(config: config, store: store) else {
            throw ConfigError("no gateway paired yet: run `clawvoice pair <setup-code>` or `clawvoice pair --url ws://HOST:18789 --token TOKEN` first")
        }
        let operatorSession = Mutex<GatewaySession?>(nil)
        audio = LiveAudio(source: config.audio.source, sink: config.audio.sink, server: pulseServer, log: log)
        let channel = LateOperatorChannel(box: operatorSession)
        let speech = SpeechOutput(channel: channel, sink: PulseSpeechSink(playback: audio.playback),
                                  config: NodeDaemon.speechConfig(config), log: log)
        // Turns go through the durable outbox: written before talk.ptt.* answers `queued`.
        let outbox = OutboxSender(store: store, gateway: record.name, channel: channel, log: log)
        self.outbox = outbox
        let talk = TalkController(channel: channel, speech: speech,
                                  config: NodeDaemon.talkConfig(config, stateDir: paths.stateDir), log: log, outbox: outbox)
        self.speech = speech
        self.talk = talk
        let transcripts = TranscriptSync(store: store, gateway: record.name, channel: channel, log: log)
        let notifications = NotificationSpeaker(speech: speech)
        self.transcripts = transcripts
        self.listen = ListenPlayer(speech: speech)
        self.notifications = notifications
        let link = GatewayLink(record: record, store: store, identity: identity, instanceId: instanceId, config: config,
                               commands: NodeCommands.registry(talk: talk, notifications: notifications), log: log, timing: timing)
        self.link = link
        operatorSession.withLock { $0 = link.operator }
        // Replies of an outbox turn arrive under the run id its chat.send returned.
        Task {
            await outbox.observe { event in
                if case .sent(let item, let runId) = event {
                    Task { await talk.turnSent(idempotencyKey: item.idempotencyKey, runId: runId) }
                }
            }
        }
        // Queued turns go out as soon as the operator session (re)connects, not at the next poll.
        link.onStatus { s in
            if s.role == "operator" && s.state == .connected { Task { await outbox.nudge() } }
        }
        let (events, sink) = AsyncStream.makeStream(of: (SessionRole, EventFrame).self, bufferingPolicy: .bufferingNewest(1024))
        self.events = events
        self.eventSink = sink
        link.onEvent { role, e in sink.yield((role, e)) }
        // Each time the operator session (re)connects, take the gateway's Talk settings.
        link.onStatus { s in
            if s.role == "operator" && s.state == .connected { Task { await talk.syncGatewayConfig(); await talk.syncWake() } }
        }
        // Losing the operator session, or the gateway naming another main session, is a session switch.
        link.onStatus { s in
            guard s.role == "operator" else { return }
            Task { await talk.operatorChanged(connected: s.state == .connected, mainSessionKey: s.mainSessionKey) }
        }
        // ... and refresh the current session's cached history (after any reconnect, per the spec).
        let historyStore = store
        link.onStatus { s in
            guard s.role == "operator" && s.state == .connected else { return }
            Task {
                let key = await talk.sessionKey ?? HistorySession.key(explicit: nil, config: config, store: historyStore, gateway: record.name)
                _ = try? await transcripts.refresh(sessionKey: key)
            }
        }
        if let device = config.ptt.device {
            do {
                button = try PTTButtonService(device: device, key: config.ptt.key,
                                              mode: PTTKeyMachine.Mode(rawValue: config.ptt.mode) ?? .hold) { action in
                    Task {
                        switch action {
                        case .start:
                            do { _ = try await talk.start() } catch { log.log(.warning, "ptt", "button: \(error)") }
                        case .stop:
                            let r = await talk.stop()
                            log.log(.info, "ptt", "button: capture \(r.captureId) \(r.status.rawValue)")
                        }
                    }
                }
            } catch {
                throw ConfigError("ptt: \(error)")
            }
        } else {
            button = nil
        }
        log.log(.info, "daemon", "device \(identity.deviceId.prefix(16))…, gateway \(record.name) (\(record.url))")
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
        t.headset = c.audio.headset ?? false
        t.voiceNoteDirectory = c.talk.voiceNotes ? stateDir + "/voice-notes" : nil
        return t
    }

    /// Runs until SIGINT/SIGTERM (returns false) or a restart request (SIGHUP; returns true).
    @discardableResult
    public func run() async throws -> Bool {
        try await start()
        let signal = await waitForSignal()
        await stop()
        return signal == SIGHUP
    }

    private let pump = Mutex<Task<Void, Never>?>(nil)

    /// Starts everything: control socket, event pump, capture, button, gateway sessions.
    public func start(controlSocket: Bool = true) async throws {
        if controlSocket {
            let server = try ControlSocketServer(path: paths.controlSocket) { [weak self] request in
                guard let self else { return ["ok": false, "error": "daemon stopping"] }
                return await self.handle(request)
            }
            control.withLock { $0 = server }
            log.log(.info, "daemon", "control socket at \(paths.controlSocket)")
        }
        // One consumer keeps gateway events in order (chat deltas, transcripts).
        let talk = self.talk
        let events = self.events
        // voicewake.* arrive on both sessions (the node session gets them first on connect).
        pump.withLock { $0 = Task { for await (role, e) in events where role == .operator || e.event.hasPrefix("voicewake.") { await talk.handle(e) } } }
        // Wake words (config `wake`); triggers without a model are reported in status.
        if config.wake.enabled {
            var wake = WakeConfig(modelsDirectory: config.wake.modelsDirectory ?? WakeModelCatalog.defaultDirectory())
            wake.sensitivity = config.wake.sensitivity
            wake.chime = config.wake.chime
            await talk.enableWake(wake)
        }
        audio.start(feeding: talk)
        if config.audio.headset == nil {
            // Barge-in needs to know whether the speaker is a headset: ask PulseAudio about the sink.
            let (connection, sinkName, talk, log) = (audio.connection, config.audio.sink, self.talk, self.log)
            Task {
                guard (try? await connection.waitUntilReady(timeout: .seconds(10))) != nil,
                      let sinks = try? await connection.sinks(),
                      let sink = sinks.first(where: { sinkName == nil ? $0.isDefault : $0.name == sinkName }) else { return }
                await talk.setHeadset(sink.isHeadset)
                log.log(.info, "audio", "speaker \(sink.name) is \(sink.isHeadset ? "a headset: barge-in on" : "a loudspeaker: the microphone mutes while it speaks")")
            }
        }
        do { try button?.start() } catch { log.log(.warning, "ptt", "\(error)") }
        await outbox.start()
        await link.start()
    }

    public func stop() async {
        log.log(.info, "daemon", "stopping")
        button?.stop()
        await talk.interrupt(reason: "daemon stopping")
        audio.stop()
        await outbox.stop()
        await link.stop()
        eventSink.finish()
        pump.withLock { $0?.cancel() }
        control.withLock { $0?.stop() }
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
            return ["ok": true, "sessionKey": (await talk.sessionKey ?? link.record.mainSessionKey).map { .string($0) } ?? .null]
        case "restart":
            await talk.interrupt(reason: request["reason"]?.stringValue ?? "gateway switched")
            restartRequested.withLock { $0 = true }
            kill(getpid(), SIGHUP)
            return ["ok": true]
        case "ptt":
            return await ptt(request["action"]?.stringValue ?? "")
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
        let key = (try? store.gateway(named: link.record.name))??.mainSessionKey
        return ["ok": true, "version": .string(ClawvoiceVersion.current), "pid": .number(Double(getpid())),
                "uptimeMs": .number(Double(nowMs() - startedAtMs)),
                "gateway": ["name": .string(link.record.name), "url": .string(link.record.url)],
                "sessions": .object(sessions), "sessionKey": key.map { .string($0) } ?? .null,
                "capture": .string(audio.captureStatus), "ptt": .string(await talk.activeCaptureId.map { "capturing \($0)" } ?? "idle"),
                "playback": .string(audio.playback.isPlaying ? "playing" : "idle"),
                "button": button.map { .string($0.status.description) } ?? "off", "wake": await talk.wakeStatus?.json ?? "off",
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

/// Suspends until SIGINT, SIGTERM or SIGHUP (a restart request) and returns which.
@discardableResult
public func waitForSignal() async -> Int32 {
    signal(SIGINT, SIG_IGN)
    signal(SIGTERM, SIG_IGN)
    signal(SIGHUP, SIG_IGN)
    signal(SIGPIPE, SIG_IGN)
    let signals = [SIGINT, SIGTERM, SIGHUP]
    let sources = signals.map { DispatchSource.makeSignalSource(signal: $0, queue: .global()) }
    let which = await withCheckedContinuation { (cont: CheckedContinuation<Int32, Never>) in
        let once = Mutex(false)
        for (s, number) in zip(sources, signals) {
            s.setEventHandler {
                let first = once.withLock { v -> Bool in defer { v = true }; return !v }
                if first { cont.resume(returning: number) }
            }
            s.resume()
        }
    }
    for s in sources { s.cancel() }
    return which
}
