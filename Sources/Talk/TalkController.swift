// The talk turn for push-to-talk: a PTT command opens a capture on the live microphone
// frames (with pre-roll), streams it to the transcription relay, keeps an Ogg Opus voice
// note, and on stop turns it into `{captureId, transcript?, status}`; a queued turn goes to
// chat.send and its reply is spoken. TalkController carries out what PTTMachine decides.

import Audio
import Foundation
import GatewayClient
import GatewayProtocol

public struct TalkConfig: Sendable, Equatable {
    /// Silence after speech that ends a `once` capture (talk.silenceTimeoutMs; the gateway's value wins).
    public var silenceTimeoutMs = 900
    /// `once` ends here at the latest, as on the iPhone.
    public var onceMaxMs = 12_000
    /// Hard cap for a held capture.
    public var captureMaxMs = 60_000
    /// Audio from before the command that the capture starts with (0–2000 ms).
    public var preRollMs = 300
    public var opusBitrate = 20_000
    public var opusComplexity = 5
    /// Where voice notes of recent captures are kept (nil: not written to disk).
    public var voiceNoteDirectory: String?
    public var keepVoiceNotes = 20
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
    public init() {}
}

/// What the microphone looks like right now, for refusing a start with a reason.
public enum MicrophoneState: Sendable, Equatable {
    case live
    case unavailable(String)
}

public actor TalkController {
    private var machine = PTTMachine()
    private let channel: any OperatorChannel
    private let speech: SpeechOutput
    private let log: LogSink
    private var config: TalkConfig
    private var microphone: MicrophoneState = .unavailable("the microphone has not started yet")
    private var preRoll: PreRollBuffer

    private struct Capture {
        var id: String
        var once: Bool
        var pcm: [Int16] = []
        var uplink: RelayUplink?
        var endpointer: Endpointer
        var startedAt: ContinuousClock.Instant
        var firstFrameAt: ContinuousClock.Instant?
        var sessionKey: String?
        /// Set for a capture started by a wake word.
        var wake: WakeCapture?
    }
    private struct WakeCapture {
        var phrase: String
        var triggers: [String]
        var triggerOnlyMs: Int
        var minCommandCharacters: Int
    }
    private var capture: Capture?
    /// The wake-word listener (nil: wake is off).
    private var wake: WakeListener?
    /// The gateway's trigger list as last heard (voicewake.get / voicewake.changed).
    private var knownTriggers: [String]?
    private var knownRouting: JSONValue?
    /// Frames since a detection, until its capture opens with them.
    private var wakePending: [PCMBuffer]?
    private var lastWakeSendAt: ContinuousClock.Instant?
    private var endWaiters: [String: [CheckedContinuation<PTTResult, Never>]] = [:]
    private var replies: [String: ReplyStream] = [:]
    /// The reply being spoken (or last spoken), for tests, the bench and barge-in.
    public private(set) var lastReply: ReplyStream?
    /// Bumped by cancel and session switches: late results of an older generation are dropped.
    private var generation = 0
    public private(set) var lastVoiceNote: [UInt8]?
    public private(set) var lastTiming: CaptureTiming?
    public private(set) var lastSpeech: SpeechReport?
    /// The chat session turns go to right now.
    public private(set) var sessionKey: String?
    /// "Assistant speech interrupted at X.Xs." for the next prompt, after a barge-in.
    public private(set) var pendingInterruption: String?
    private var bargeVoiceMs = 0
    private var lastMainSessionKey: String?
    private var wasConnected = false
    /// Frames the loudspeaker gate kept from the microphone (for status and tests).
    public private(set) var gatedFrames = 0
    public private(set) var bargeIns = 0

    /// Latency marks of the last capture, for the bench.
    public struct CaptureTiming: Sendable {
        public var startToFirstFrame: Duration?
        public var stopToLastUplinkCall: Duration?
    }

    /// The durable outbox turns go through; nil sends directly (tools and tests without a store).
    private let outbox: OutboxSender?

    public init(channel: any OperatorChannel, speech: SpeechOutput, config: TalkConfig, log: LogSink, outbox: OutboxSender? = nil) {
        self.outbox = outbox
        self.channel = channel
        self.speech = speech
        self.config = config
        self.log = log
        self.preRoll = PreRollBuffer(milliseconds: config.preRollMs)
        self.sessionKey = config.sessionKey
    }

    public func update(config: TalkConfig) {
        self.config = config
        preRoll = PreRollBuffer(milliseconds: config.preRollMs)
    }

    /// Reads `talk.config` from the gateway: its `silenceTimeoutMs` wins over the local default.
    /// Gateways without the method (or without the key) leave the config as it is.
    public func syncGatewayConfig() async {
        guard let result = try? await channel.request("talk.config", params: [:], timeoutMs: 10_000) else { return }
        let talk = result["config"]?["talk"]
        if let ms = talk?["silenceTimeoutMs"]?.intValue, ms >= 200, ms <= 10_000, Int(ms) != config.silenceTimeoutMs {
            config.silenceTimeoutMs = Int(ms)
            log.log(.info, "talk", "silence timeout from the gateway: \(ms) ms")
        }
    }

    public var silenceTimeoutMs: Int { config.silenceTimeoutMs }

    public func setMicrophone(_ state: MicrophoneState) {
        microphone = state
        if case .unavailable(let why) = state, let c = capture {
            log.log(.warning, "talk", "microphone lost during capture \(c.id): \(why)")
        }
    }

    public var activeCaptureId: String? { machine.activeCaptureId }
    public var phase: PTTMachine.Phase { machine.phase }

    // MARK: commands

    public func start() async throws(PTTError) -> String {
        let fresh = UUID().uuidString
        switch machine.start(freshId: fresh) {
        case .alreadyActive(let id): return id
        case .alreadyStarting: throw .alreadyStarting
        case .begin(let id):
            try await open(id, once: false)
            return id
        }
    }

    public func stop() async -> PTTResult {
        let fresh = UUID().uuidString
        switch machine.stop(freshId: fresh) {
        case .idle(let id): return PTTResult(captureId: id, status: .idle)
        case .join(let id): return await waitEnd(id)
        case .end(let id):
            Task { await self.end(id) }
            return await waitEnd(id)
        }
    }

    public func cancel() async -> PTTResult {
        let fresh = UUID().uuidString
        switch machine.cancel(freshId: fresh) {
        case .idle(let id): return PTTResult(captureId: id, status: .idle)
        case .discard(let id):
            await discard(id)
            return PTTResult(captureId: id, status: .cancelled)
        }
    }

    public func once() async throws(PTTError) -> PTTResult {
        let fresh = UUID().uuidString
        switch machine.once(freshId: fresh) {
        case .busy(let id): return PTTResult(captureId: id, status: .busy)
        case .begin(let id):
            try await open(id, once: true)
            return await waitEnd(id)
        }
    }

    public func setHeadset(_ headset: Bool) { config.headset = headset }

    /// `clawvoice session use KEY`: talk to another chat session from now on.
    public func switchSession(to key: String) async {
        await interrupt(reason: "session switched to \(key)")
        sessionKey = key
    }

    /// The operator session's state changed: losing it, or the gateway naming a different main
    /// session (when none was chosen here), is a session switch.
    public func operatorChanged(connected: Bool, mainSessionKey: String?) async {
        defer { wasConnected = connected }
        if wasConnected && !connected {
            await interrupt(reason: "connection to the gateway lost")
            return
        }
        if connected, let key = mainSessionKey {
            if let previous = lastMainSessionKey, previous != key, config.sessionKey == nil {
                await interrupt(reason: "the gateway's main session changed to \(key)")
            }
            lastMainSessionKey = key
        }
    }

    /// A session switch, gateway switch or lost connection: cancel the capture, drop late results, stop speaking.
    public func interrupt(reason: String) async {
        generation += 1
        if let id = machine.activeCaptureId {
            _ = machine.cancel(freshId: id)
            await discard(id)
            log.log(.info, "talk", "capture \(id) cancelled: \(reason)")
        }
        for (_, r) in replies { await r.close() }
        replies.removeAll()
        await speech.stop()
    }

    private func open(_ id: String, once: Bool, wakePhrase: String? = nil) async throws(PTTError) {
        guard await channel.connected() else {
            machine.startFailed(id)
            throw .gatewayNotConnected("reconnecting")
        }
        if case .unavailable(let why) = microphone {
            machine.startFailed(id)
            throw .microphone(why)
        }
        // A new capture silences the assistant; no interruption is recorded (iPhone behaviour).
        await speech.stop()
        let key: String?
        if let phrase = wakePhrase, let routed = wake?.session(for: phrase) { key = routed }
        else if let k = sessionKey { key = k } else { key = await channel.mainSessionKey() }
        let uplink = RelayUplink(channel: channel, sessionKey: key, log: log, opusBitrate: config.opusBitrate,
                                 opusComplexity: config.opusComplexity)
        await uplink.start()
        var c = Capture(id: id, once: once, uplink: uplink,
                        endpointer: Endpointer(silenceTimeoutMs: config.silenceTimeoutMs,
                                               maxCaptureMs: once ? config.onceMaxMs : config.captureMaxMs),
                        startedAt: ContinuousClock.now, sessionKey: key)
        var leading = preRoll.drain()
        if let phrase = wakePhrase, let w = wake {
            // Wake: the lookback (with the trigger in it) and what came while opening; silence
            // 2 s after speech, 5 s if only the trigger was heard, 30 s cap (macOS, §4.2).
            c.endpointer = Endpointer(silenceTimeoutMs: w.config.silenceAfterSpeechMs, maxCaptureMs: w.config.maxCaptureMs)
            c.wake = WakeCapture(phrase: phrase, triggers: w.triggers, triggerOnlyMs: w.config.silenceAfterTriggerOnlyMs,
                                 minCommandCharacters: w.config.minCommandCharacters)
            leading = wakePending ?? []
            wakePending = nil
        }
        wake?.reset()
        for frame in leading {
            c.pcm += frame.samples
            await uplink.append(frame)
        }
        capture = c
        machine.started(id)
        log.log(.info, "talk", "capture \(id) started\(wakePhrase.map { " (wake: \($0))" } ?? (once ? " (once)" : ""))")
        // The endpointer counts frames; this cap holds even when the microphone stops delivering them.
        let capMs = (c.wake != nil ? c.endpointer.maxCaptureMs : once ? config.onceMaxMs : config.captureMaxMs) + 500
        Task {
            try? await Task.sleep(for: .milliseconds(capMs))
            await self.capReached(id)
        }
    }

    private func capReached(_ id: String) {
        guard capture?.id == id else { return }
        log.log(.info, "talk", "capture \(id) reached its time cap")
        if case .end(let endId) = machine.stop(freshId: id) {
            Task { await self.end(endId) }
        }
    }

    /// One 20 ms microphone frame (16 kHz mono), delivered in order by the daemon's capture loop.
    public func micFrame(_ frame: PCMBuffer) async {
        // On a loudspeaker the wake chime reaches the microphone: the endpointer hears silence instead.
        let chimeAudible = capture?.wake != nil && !config.headset ? await speech.isAudible(tailMs: config.speakerTailMs) : false
        guard var c = capture else {
            let audible = await speech.isAudible(tailMs: config.headset ? 0 : config.speakerTailMs)
            if audible {
                if config.headset {
                    if config.interruptOnSpeech { await listenForBargeIn(frame) }
                } else {
                    // Loudspeaker: the microphone hears the assistant; keep that out of pre-roll (and wake words).
                    gatedFrames += 1
                    return
                }
            } else {
                bargeVoiceMs = 0
            }
            preRoll.append(frame)
            wakeFrame(frame, speaking: audible)
            return
        }
        if c.firstFrameAt == nil { c.firstFrameAt = ContinuousClock.now }
        c.pcm += frame.samples
        var event = c.endpointer.feed(chimeAudible ? PCMBuffer(format: frame.format, samples: [Int16](repeating: 0, count: frame.samples.count)) : frame)
        if let w = c.wake, event == nil, !c.endpointer.speechHeard, c.endpointer.elapsedMilliseconds >= Double(w.triggerOnlyMs) {
            event = .endOfUtterance(reason: .silence)  // only the trigger was heard
        }
        capture = c
        await c.uplink?.append(frame)
        if case .endOfUtterance(let reason)? = event {
            // `once` ends on silence after speech; a held capture only at its hard cap.
            if c.once || c.wake != nil || reason == .maxDuration {
                log.log(.info, "talk", "capture \(c.id) ends: \(reason)")
                if case .end(let id) = machine.stop(freshId: c.id) {
                    Task { await self.end(id) }
                }
            }
        }
    }

    /// A gateway event for Talk: transcripts from the relay, chat for replies.
    public func handle(_ event: EventFrame) async {
        switch event.event {
        case GatewayEvent.talkEvent:
            if let t = TalkTranscriptEvent(payload: event.payload), let uplink = capture?.uplink ?? endingUplink {
                await uplink.handle(t)
            }
        case GatewayEvent.chat:
            guard let c = ChatEvent(payload: event.payload), let stream = replies[c.runId] else { return }
            await stream.feed(c)
            if c.state == .final || c.state == .aborted || c.state == .error { replies.removeValue(forKey: c.runId) }
        case "voicewake.changed":
            if let t = VoiceWakeTriggers(payload: event.payload) { setWakeTriggers(t.triggers) }
        case "voicewake.routing.changed":
            knownRouting = event.payload
            wake?.setRouting(event.payload)
        default:
            break
        }
    }

    private var endingUplink: RelayUplink?

    /// Sustained voice while the assistant speaks into a headset stops it, and the next prompt says where.
    private func listenForBargeIn(_ frame: PCMBuffer) async {
        let dbfs = 20 * log10(max(frame.rms, 1e-5))
        if dbfs >= config.bargeInLevelDbfs {
            bargeVoiceMs += Int(frame.durationMilliseconds.rounded())
        } else {
            bargeVoiceMs = max(0, bargeVoiceMs - Int(frame.durationMilliseconds.rounded()))
        }
        guard bargeVoiceMs >= config.bargeInMs else { return }
        bargeVoiceMs = 0
        let positionMs = await lastReply?.positionMs ?? 0
        pendingInterruption = String(format: "Assistant speech interrupted at %.1fs.", positionMs / 1000)
        bargeIns += 1
        log.log(.info, "talk", "barge-in: \(pendingInterruption ?? "")")
        generation += 1
        for (_, r) in replies { await r.close() }
        replies.removeAll()
        await speech.stop()
    }

    // MARK: wake

    /// Starts listening for the gateway's trigger words (the last list heard, else `triggers`, else the defaults).
    public func enableWake(_ wakeConfig: WakeConfig, triggers: [String]? = nil) {
        let w = WakeListener(config: wakeConfig, triggers: triggers ?? knownTriggers ?? VoiceWakeTriggers.defaults)
        if let r = knownRouting { w.setRouting(r) }
        wake = w
        logWakeModels(w)
        if let problem = w.chimeProblem { log.log(.warning, "wake", problem) }
    }

    public func disableWake() {
        wake = nil
        wakePending = nil
    }

    /// Wake state for `clawvoice status`; nil when wake is off.
    public var wakeStatus: WakeStatus? { wake?.status }

    /// Reads the trigger list (and routing, when the gateway has it) after the operator session connects.
    public func syncWake() async {
        if let r = try? await channel.request("voicewake.get", params: [:], timeoutMs: 10_000),
           let t = VoiceWakeTriggers(payload: r) {
            setWakeTriggers(t.triggers)
        }
        if await channel.advertisedMethods().contains("voicewake.routing.get"),
           let r = try? await channel.request("voicewake.routing.get", params: [:], timeoutMs: 10_000) {
            knownRouting = r
            wake?.setRouting(r)
        }
    }

    /// Plays the wake chime (on detection; also for tests and diagnostics): the configured
    /// sound, the generated one when wake is off. False when nothing played.
    @discardableResult
    public func playChime() async -> Bool {
        guard let pcm = wake.map({ $0.chimeSound }) ?? WakeListener.chime() else { return false }
        return await speech.playCue(pcm)
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

    /// A microphone frame while nothing captures: the detector hears it unless the assistant is
    /// speaking (on a headset with barge-in on it still listens), a turn was just sent, or a
    /// push-to-talk capture is starting.
    private func wakeFrame(_ frame: PCMBuffer, speaking: Bool) {
        guard let w = wake, w.config.enabled else { return }
        if wakePending != nil { wakePending?.append(frame); return }
        guard case .idle = machine.phase else { return }
        if speaking && !(config.headset && config.interruptOnSpeech) { return }
        if let t = lastWakeSendAt, ContinuousClock.now - t < .milliseconds(w.config.debounceMs) { return }
        guard let d = w.feed(frame) else { return }
        w.detections += 1
        w.lastPhrase = d.phrase
        w.lastOutcome = "capturing"
        wakePending = w.lookback.drain()
        log.log(.info, "wake", "heard \"\(d.phrase)\" (score \(String(format: "%.2f", d.score)))")
        Task { await self.wakeDetected(d.phrase) }
    }

    private func wakeDetected(_ phrase: String) async {
        guard case .begin(let id) = machine.once(freshId: UUID().uuidString) else {
            wakePending = nil
            wake?.lastOutcome = "busy"
            return
        }
        do {
            try await open(id, once: true, wakePhrase: phrase)
        } catch {
            wakePending = nil
            wake?.reset()
            wake?.lastOutcome = "failed: \(error)"
            log.log(.warning, "wake", "no capture after \"\(phrase)\": \(error)")
            return
        }
        if wake?.chimeSound != nil { Task { await self.playChime() } }
        let result = await waitEnd(id)
        wake?.lastOutcome = result.status.rawValue
        log.log(.info, "wake", "turn \(id): \(result.status.rawValue)\(result.transcript.map { " \"\($0)\"" } ?? "")")
    }

    // MARK: ending

    private func waitEnd(_ id: String) async -> PTTResult {
        await withCheckedContinuation { endWaiters[id, default: []].append($0) }
    }

    private func resolve(_ id: String, _ result: PTTResult) {
        machine.finished(id)
        let waiters = endWaiters.removeValue(forKey: id) ?? []
        for w in waiters { w.resume(returning: result) }
    }

    private func discard(_ id: String) async {
        let c = capture?.id == id ? capture : nil
        if c != nil { capture = nil }
        if let uplink = c?.uplink { await uplink.cancel() }
        resolve(id, PTTResult(captureId: id, status: .cancelled))
    }

    private func end(_ id: String) async {
        guard let c = capture, c.id == id else { return }
        capture = nil
        let gen = generation
        let stoppedAt = ContinuousClock.now
        endingUplink = c.uplink
        let outcome = await c.uplink?.finish() ?? .unavailable("no uplink")
        endingUplink = nil
        var timing = CaptureTiming(startToFirstFrame: c.firstFrameAt.map { $0 - c.startedAt })
        if let last = await c.uplink?.lastSendAt { timing.stopToLastUplinkCall = last - stoppedAt }
        lastTiming = timing
        let pcm = PCMBuffer(format: .voice, samples: c.pcm)
        let note = pcm.isEmpty ? nil : try? OggOpusVoiceNote.encode(pcm, bitrate: config.opusBitrate)
        lastVoiceNote = note
        if let note { saveVoiceNote(note, id: id) }
        guard gen == generation, endWaiters[id] != nil || machine.activeCaptureId == id else {
            resolve(id, PTTResult(captureId: id, status: .cancelled))
            return
        }
        switch outcome {
        case .transcript(let text?) where !text.isEmpty:
            var message = text
            if let w = c.wake {
                // The trigger words are not part of the command; too little left is no command.
                message = WakeListener.command(from: text, triggers: [w.phrase] + w.triggers)
                guard message.count >= w.minCommandCharacters else {
                    log.log(.info, "talk", "wake capture \(id): nothing after the trigger in \"\(text)\"")
                    resolve(id, PTTResult(captureId: id, transcript: message, status: .empty))
                    return
                }
            }
            let status = await deliver(message: message, attachment: nil, sessionKey: c.sessionKey, generation: gen)
            if c.wake != nil { lastWakeSendAt = ContinuousClock.now }
            resolve(id, PTTResult(captureId: id, transcript: message, status: status))
        case .transcript:
            resolve(id, PTTResult(captureId: id, status: .empty))
        case .unavailable(let why):
            // No transcription here or at the gateway: the voice note is the whole message.
            guard pcm.durationMilliseconds >= 200, let note else {
                resolve(id, PTTResult(captureId: id, status: .empty))
                return
            }
            log.log(.info, "talk", "sending capture \(id) as a voice note: \(why)")
            let attachment: JSONValue = ["type": "audio", "mimeType": "audio/ogg", "fileName": .string("\(id).opus"),
                                         "content": .string(Data(note).base64EncodedString()),
                                         "sizeBytes": .number(Double(note.count)),
                                         "durationMs": .number(pcm.durationMilliseconds.rounded())]
            let status = await deliver(message: "", attachment: attachment, sessionKey: c.sessionKey, generation: gen)
            resolve(id, PTTResult(captureId: id, status: status))
        }
    }

    private func saveVoiceNote(_ note: [UInt8], id: String) {
        guard let dir = config.voiceNoteDirectory else { return }
        let fm = FileManager.default
        try? fm.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let path = dir + "/\(id).opus"
        _ = fm.createFile(atPath: path, contents: Data(note), attributes: [.posixPermissions: 0o600])
        // Keep only the newest few: they are for debugging and for re-sending, not an archive.
        if let names = try? fm.contentsOfDirectory(atPath: dir).filter({ $0.hasSuffix(".opus") }), names.count > config.keepVoiceNotes {
            let dated = names.compactMap { n -> (String, Date)? in
                guard let d = (try? fm.attributesOfItem(atPath: dir + "/" + n))?[.modificationDate] as? Date else { return nil }
                return (n, d)
            }.sorted { $0.1 < $1.1 }
            for (n, _) in dated.prefix(names.count - config.keepVoiceNotes) { try? fm.removeItem(atPath: dir + "/" + n) }
        }
    }

    /// Puts the turn in the durable outbox (or sends it, without one) and follows its reply.
    /// Answers `queued` only once the turn is committed; a failed write is `not_queued`.
    private func deliver(message: String, attachment: JSONValue?, sessionKey: String?, generation gen: Int) async -> PTTStatus {
        let key: String
        if let k = sessionKey { key = k } else { key = await channel.mainSessionKey() ?? "main" }
        let idem = UUID().uuidString.lowercased()
        var message = message
        if let prefix = pendingInterruption {
            // The iPhone's TalkPromptBuilder: tell the agent where it was cut off.
            message = prefix + "\n\n" + message
            pendingInterruption = nil
        }
        // Follow the run before it is sent: its first deltas may arrive before the acknowledgement.
        followReply(runId: idem)
        if let outbox {
            do {
                _ = try await outbox.enqueue(sessionKey: key, message: message,
                                             attachmentsJSON: attachment.map { JSONValue.array([$0]).description },
                                             thinking: "low", idempotencyKey: idem)
                return .queued
            } catch {
                replies.removeValue(forKey: idem)
                log.log(.error, "talk", "the turn could not be queued: \(error)")
                return .notQueued
            }
        }
        let params = ChatSendParams(sessionKey: key, message: message, idempotencyKey: idem, thinking: "low",
                                    attachments: attachment.map { [$0] })
        Task {
            do {
                let ack = try await channel.request(GatewayMethod.chatSend, params: try JSONValue(encoding: params), timeoutMs: 30_000)
                if let runId = ack["runId"]?.stringValue { self.rekeyReply(from: idem, to: runId) }
            } catch {
                self.dropReply(idem)
                self.log.log(.error, "talk", "chat.send failed: \(error)")
            }
        }
        return .queued
    }

    /// The outbox sent a turn: replies come under its run id, which may differ from the key.
    public func turnSent(idempotencyKey: String, runId: String) { rekeyReply(from: idempotencyKey, to: runId) }

    private func rekeyReply(from old: String, to new: String) {
        guard old != new, let stream = replies.removeValue(forKey: old) else { return }
        replies[new] = stream
    }

    /// Speaks the reply of `runId` as it streams in (for up to `replyTimeoutMs`).
    public func followReply(runId: String) {
        guard config.speakReplies else { return }
        let stream = ReplyStream(runId: runId, speech: speech, route: .talkSpeak, log: log)
        replies[runId] = stream
        lastReply = stream
        let timeout = config.replyTimeoutMs
        Task {
            try? await Task.sleep(for: .milliseconds(timeout))
            await stream.close()
            self.dropReply(runId)
        }
        Task {
            // lastSpeech: the last sentence's report once the reply has been spoken.
            try? await Task.sleep(for: .milliseconds(50))
            while true {
                await stream.done()
                if let last = await stream.spoken.last { self.setLastSpeech(last); break }
                try? await Task.sleep(for: .milliseconds(50))
                if self.isGone(runId) { await stream.done(); if let last = await stream.spoken.last { self.setLastSpeech(last) }; break }
            }
        }
    }

    private func dropReply(_ runId: String) { replies.removeValue(forKey: runId) }
    private func isGone(_ runId: String) -> Bool { replies[runId] == nil }
    private func setLastSpeech(_ r: SpeechReport) { lastSpeech = r }

}
