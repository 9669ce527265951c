// `clawvoice run`: keeps both sessions to the active gateway up and serves the control socket.

public import ClawvoiceCore
import GatewayCrypto
import Synchronization
import Audio
import Buttons
import Foundation
public import GatewayClient
package import GatewayProtocol
public import NodeRuntime
import Realtime
import Store
public import Talk
import WakeWord
import WebSocketTransport

/// The running node. Each long-lived part is a service, a child of one `ServiceGroup` (a task
/// group): the talk loop, the microphone, the gateway scope, the event pump, the button.
/// SIGTERM/SIGINT cancel them together (2 s at most); SIGHUP reloads the config; a gateway
/// switch rebuilds the gateway scope in place.
public final class NodeDaemon: Sendable {
    let paths: RuntimePaths
    package let config: ClawConfig
    package let log: LogSink
    let store: ClawStore
    let startedAtMs = nowMs()
    private let identity: DeviceIdentity
    private let instanceId: String
    private let timing: ConnectionTiming
    let reload: (@Sendable () throws -> ClawConfig)?
    public let audio: LiveAudio
    public let talk: TalkController
    public let speech: SpeechOutput
    public let listen: ListenPlayer
    public let notifications: NotificationSpeaker
    let button: PTTButtonService?
    let headsetKnown: Bool
    let operatorSession: Locked<GatewaySession?>
    /// Set in init and replaced on each switch; never nil after init.
    let scope = Mutex<GatewayScope?>(nil)
    /// Whether a gateway is active (false after `gateways forget` of the active one).
    let active = Mutex(true)
    package let events: AsyncStream<(SessionRole, EventFrame)>
    private let eventSink: AsyncStream<(SessionRole, EventFrame)>.Continuation
    let switches: AsyncStream<String>
    let switchSink: AsyncStream<String>.Continuation
    /// The running group, so `stop()` can reach it (a stop asked before it exists is kept).
    private let running = Locked<(group: ServiceGroup?, stopRequested: Bool)>((nil, false))
    /// `clawvoice events` subscribers and the config's event commands.
    let bus: EventBus
    /// Each role's last state, so connected/disconnected are published once per change.
    private let roleStates = Locked<[String: Bool]>([:])
    /// Talk and speech activity, counted for the rest service (DaemonRest.swift).
    let restActivity = RestActivity()

    /// The active gateway's link, outbox and transcript cache (the last one, when none is active).
    var currentScope: GatewayScope { scope.withLock { $0! } }
    public var link: GatewayLink { currentScope.link }
    public var outbox: OutboxSender { currentScope.outbox }
    public var transcripts: TranscriptSync { currentScope.transcripts }

    public init(paths: RuntimePaths, config: ClawConfig, log: LogSink, timing: ConnectionTiming = ConnectionTiming(),
                pulseServer: String? = nil, reload: (@Sendable () throws -> ClawConfig)? = nil) throws {
        // A daemon of a few threads needs few malloc arenas; each keeps free pages of its own.
        ProcessMemory.limitArenas(2)
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
        let operatorSession = Locked<GatewaySession?>(nil)
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
        let (store, activeGateway) = (self.store, Locked<String>(record.name))
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
        let activeURL = Locked<String>(record.url)
        self.activeURL = activeURL
        let activeTLSPin = Locked<String?>(record.tlsFingerprint)
        self.activeTLSPin = activeTLSPin
        calls = config.talk.calls ? DaemonCalls(config: config, operatorSession: operatorSession, gatewayURL: activeURL, gatewayPin: activeTLSPin,
                                                playback: audio.playback, reference: echo, talk: talk, bus: bus, log: log) : nil
        latestConfig = Mutex(config)
        self.talk = talk
        // Listen and spoken notifications play through the talk loop's speaker (its machine decides).
        self.listen = ListenPlayer(talk: talk)
        // Spoken notifications (config talk.speakNotifications); a passive one waits for the user to finish.
        let notifications = NotificationSpeaker(talk: talk, enabled: config.talk.speakNotifications)
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

    let activeName: Locked<String>
    /// The config as last read (SIGHUP reloads it): its gateway.url picks the gateway on a rebuild.
    let latestConfig: Mutex<ClawConfig>
    let statuses: AsyncStream<(SessionStatus, GatewayScope?)>
    private let statusSink: AsyncStream<(SessionStatus, GatewayScope?)>.Continuation
    let presses: AsyncStream<PTTKeyAction>
    let controlPresses: AsyncStream<NodeControl>
    let controlKeys: [PTTButtonService]
    /// Realtime calls (talk.calls); nil when off.
    package let calls: DaemonCalls?
    let activeURL: Locked<String>
    /// The active gateway's TLS pin (its WebSocket's; the call's offer POST checks it too).
    let activeTLSPin: Locked<String?>

    /// Link, outbox and transcript cache for one gateway, wired to the talk loop.
    func makeScope(_ record: GatewayRecord) -> GatewayScope {
        let channel = LateOperatorChannel(box: operatorSession)
        let outbox = OutboxSender(store: store, gateway: record.name, channel: channel, log: log)
        let transcripts = TranscriptSync(store: store, gateway: record.name, channel: channel, log: log)
        let link = GatewayLink(record: record, store: store, identity: identity, instanceId: instanceId, config: config,
                               commands: NodeCommands.registry(talk: talk, notifications: notifications, calls: calls?.service),
                               log: log, timing: timing)
        let (sink, statusSink) = (eventSink, self.statusSink)
        link.onEvent { role, e in sink.yield((role, e)) }
        let made = GatewayScope(record: record, link: link, outbox: outbox, transcripts: transcripts)
        let (bus, roleStates) = (self.bus, self.roleStates)
        let calls = self.calls
        link.onStatus { [weak made] s in
            if s.role == "operator" { statusSink.yield((s, made)) }
            if s.role == "operator", let calls { calls.operatorStatus(s, session: link.operator) }
            let up = s.state == .connected
            if roleStates.withLock({ states in defer { states[s.role] = up }; return states[s.role] != up && (up || states[s.role] == true) }) {
                bus.publish(up ? "connected" : "disconnected", ["role": s.role, "gateway": s.gateway, "detail": s.detail])
            }
        }
        return made
    }

    package static func speechConfig(_ c: ClawConfig) -> SpeechConfig {
        var s = SpeechConfig()
        s.voice = VoiceSettings(voice: c.speech.voice, rateWpm: c.speech.rateWpm, pitch: c.speech.pitch)
        s.talkOutputFormat = c.talk.outputFormat
        return s
    }

    static func talkConfig(_ c: ClawConfig, stateDir: String) -> TalkConfig {
        var t = TalkConfig()
        t.silenceTimeoutMs = c.talk.silenceTimeoutMs
        t.endOfTurn = c.talk.endOfTurn
        t.onceMaxMs = c.talk.onceMaxMs
        t.captureMaxMs = c.talk.captureMaxMs
        t.preRollMs = c.audio.preRollMs
        t.opusBitrate = c.talk.opusBitrate
        t.opusComplexity = c.talk.opusComplexity
        t.sessionKey = c.talk.sessionKey
        t.speakReplies = c.talk.speakReplies
        t.interruptOnSpeech = c.talk.interruptOnSpeech
        t.followUpMs = c.talk.followUpMs
        // Only with calls on: otherwise the phrase stays an ordinary trigger.
        t.callWakeWord = c.talk.calls ? c.talk.callWakeWord : nil
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

    /// `clawvoice run`: every service until SIGINT or SIGTERM (2 s to stop, then the process
    /// exits anyway, the outbox intact in SQLite); SIGHUP reloads the config.
    public func run() async throws {
        try await run(controlSocket: true, signals: true)
    }

    /// The services as children of one `ServiceGroup` until a signal, `stop()` or a failing
    /// service ends it. Without signals (the demo) only `stop()` or the caller's cancellation does.
    public func run(controlSocket: Bool, signals handled: Bool) async throws {
        let server = controlSocket ? try makeControlSocket() : nil
        let signals = handled ? SignalStream([SIGINT, SIGTERM, SIGHUP]) : nil
        defer {
            signals?.cancel()
            server?.stop()
            bus.finishAll()
        }
        let (log, talk) = (self.log, self.talk)
        let group = ServiceGroup(services(control: server), gracePeriod: .seconds(2), signals: signals?.stream,
                                 onSignal: { [weak self] n in
                                     if n == SIGHUP { await self?.reloadConfig(); return false }
                                     log.log(.info, "daemon", "\(n == SIGTERM ? "SIGTERM" : "SIGINT"): stopping")
                                     return true
                                 },
                                 onShutdown: { why in
                                     log.log(.info, "daemon", "stopping (\(why))")
                                     await talk.interrupt(reason: "daemon stopping")
                                 },
                                 onOverdue: { names in
                                     log.log(.warning, "daemon", "\(names.joined(separator: ", ")) did not stop within 2 s; exiting anyway")
                                     // The process ends here; in-process callers (the demo) wait.
                                     if handled { exit(0) }
                                 })
        if running.withLock({ r in r.group = group; return r.stopRequested }) { group.triggerGracefulShutdown(reason: "stop requested") }
        try await group.run()
    }

    /// Asks the running group to stop (see `run`); returns at once.
    public func stop() {
        running.withLock { r in r.stopRequested = true; return r.group }?.triggerGracefulShutdown(reason: "stop requested")
    }

    private func makeControlSocket() throws -> ControlSocketServer {
        let bus = self.bus
        let server = try ControlSocketServer(path: paths.controlSocket, streamer: { request in
            guard request["cmd"]?.stringValue == "events" else { return nil }
            let (id, lines) = bus.subscribe()
            return (lines, { bus.unsubscribe(id) })
        }) { [weak self] request in
            guard let self else { return ["ok": false, "error": "daemon stopping"] }
            return await self.handle(request)
        }
        log.log(.info, "daemon", "control socket at \(paths.controlSocket)")
        return server
    }

    /// Every long-lived part, each a child of the group. The talk loop ending ends the daemon.
    private func services(control: ControlSocketServer?) -> [ServiceGroup.Entry] {
        var all: [ServiceGroup.Entry] = [
            .init("talk", endsGroup: true) { await self.talk.run() },
            .init("microphone") { await self.audio.run(feeding: self.talk) },
            .init("gateway events") { await self.pumpEvents() },
            .init("operator") { await self.followOperator() },
            .init("gateway") { await self.gatewayService() },
            .init("setup") { await self.afterStart() },
            .init("rest") { await self.restService() },
        ]
        if let control { all.append(.init("control socket", control)) }
        if !headsetKnown { all.append(.init("headset probe") { await self.probeHeadset() }) }
        if let button {
            all.append(.init("ptt button", LoggedService(button, topic: "ptt", log: log)))
            all.append(.init("ptt presses") { await self.followPresses() })
        }
        if let calls { all.append(.init("calls") { await calls.run(talk: self.talk) }) }
        for (i, key) in controlKeys.enumerated() { all.append(.init("control key \(i + 1)", LoggedService(key, topic: "ptt", log: log))) }
        if !controlKeys.isEmpty { all.append(.init("control presses") { await self.followControlPresses() }) }
        if let notifier = SystemdNotifier(environment: ProcessInfo.processInfo.environment) {
            all.append(.init("systemd") { await self.systemdService(notifier) })
        }
        return all
    }

    /// What needs the talk loop running: event reports, wake words, the remembered volume.
    private func afterStart() async {
        let bus = self.bus
        let rest = restActivity
        await talk.observeEvents { e in bus.publish(e.name, e.fields); rest.poke() }
        await speech.observeSpeaking { on in bus.publish("speaking", ["state": on ? "started" : "stopped"]); rest.poke() }
        if config.wake.enabled {
            var wake = WakeConfig(modelsDirectory: config.wake.modelsDirectory ?? WakeModelCatalog.defaultDirectory())
            wake.sensitivity = config.wake.sensitivity
            wake.chime = config.wake.chime
            wake.stateDir = paths.stateDir
            await talk.enableWake(wake)
        }
        // What `volume` left: our stream comes back at its level (muting is restored at init).
        if let v = try? store.setting("volume"), let n = Int(v) { audio.playback.setVolume(percent: n) }
    }
}

