// Speaking text: fetch a clip from the gateway (talk.speak for Talk replies, tts.speak for
// "listen to this"), decode it by format and play it; when the gateway cannot give a playable
// clip for any reason, espeak-ng says it instead (the user always hears the answer); only a
// stop or a session switch is silent. The player keeps no counter of its own (the talk
// machine's speaker sub-state numbers the clips): `stop()` ends every call in flight, and a call
// that was stopped (or whose task was cancelled) plays nothing it fetched or synthesised later.

public import Audio
public import ClawvoiceCore
import Foundation
public import GatewayClient
import GatewayProtocol
import Synchronization

/// One call's claim on the speaker: a `speak`, or a reply streamed from `beginUtterance` to
/// `endUtterance`. `stop()` ends every claim in flight and a new `speak` ends the older ones
/// (the last one asked speaks); an ended claim plays nothing more and never falls back.
public final class SpeechClaim: Sendable {
    private let ended = Mutex(false)
    fileprivate init() {}
    fileprivate func end() { ended.withLock { $0 = true } }
    /// Ended by a stop or a later `speak`, or its caller's task was cancelled.
    public var isStopped: Bool { ended.withLock { $0 } || Task.isCancelled }
}

public actor SpeechOutput {
    private let channel: (any OperatorChannel)?
    private let sink: any SpeechSink
    private var config: SpeechConfig
    private let log: LogSink
    /// The claims in flight: what a stop silences.
    private var claims: [ObjectIdentifier: SpeechClaim] = [:]
    /// `speak` calls in progress (fetching or playing), and who waits for that to reach zero.
    private var active = 0
    private var idleWaiters: [CheckedContinuation<Void, Never>] = []

    /// Whether a `speak` is fetching or playing right now.
    public var isSpeaking: Bool { active > 0 }

    /// Speaks `text` once nothing else is speaking (a queued announcement), where `speak` interrupts.
    public func speakWhenIdle(_ text: String, route: SpeechRoute) async -> SpeechReport {
        // Re-check after each wake: another waiter may have started speaking first. From the last
        // check to `speak` taking its slot there is no suspension, so nothing can slip in between.
        while active > 0 { await withCheckedContinuation { idleWaiters.append($0) } }
        return await speak(text, route: route)
    }

    /// Silences what is speaking at once, then speaks `text` (Listen, urgent notifications).
    /// The slot is held across the stop, so queued `speakWhenIdle` callers keep waiting.
    /// `current`: whether the clip is still wanted when this call reaches the speaker (the talk
    /// loop asks whether the machine's speaker has moved on since its `play`); when it has,
    /// nothing is stopped, fetched or played. Its claim is taken before the stop's wait, so a stop
    /// from anyone after the check ends it.
    public func interrupt(with text: String, route: SpeechRoute,
                          if current: @Sendable () -> Bool = { true }) async -> SpeechReport {
        guard current() else { return stoppedReport() }
        acquire()
        defer { release() }
        endClaims()
        let c = claim()
        await sink.stop()
        return await speak(text, route: route, claim: c)
    }

    /// Marks a multi-part utterance (a reply streamed sentence by sentence through `play`) as
    /// speaking from its first part to its last, so queued speakers do not slip into the gaps.
    /// Every `beginUtterance` needs exactly one `endUtterance`; the claim it returns is what
    /// `play` checks, so a stop ends the whole utterance.
    public func beginUtterance() -> SpeechClaim {
        acquire()
        return claim()
    }
    public func endUtterance(_ c: SpeechClaim) {
        claims.removeValue(forKey: ObjectIdentifier(c))
        release()
    }

    private func claim() -> SpeechClaim {
        let c = SpeechClaim()
        claims[ObjectIdentifier(c)] = c
        return c
    }

    /// Ends every claim in flight (their late clips are dropped, none falls back).
    private func endClaims() {
        for c in claims.values { c.end() }
        claims.removeAll()
    }

    private func acquire() { active += 1 }

    private var playing = 0
    /// Told when the speaker starts (true) and stops (false) playing anything of ours.
    private var onSpeaking: (@Sendable (Bool) -> Void)?
    public func observeSpeaking(_ f: @escaping @Sendable (Bool) -> Void) { onSpeaking = f }
    private var lastAudibleAt: ContinuousClock.Instant?
    /// When the clip playing now (or the last one) began (the latest, when a cue plays over
    /// speech), what it says and how long it is: the talk machine knows its own words by them.
    private var clipStartedAt: ContinuousClock.Instant?
    private var clipText: String?
    private var clipMs: Double?

    /// Plays on the sink, keeping track of when audio was last coming out of the speaker.
    private func playOnSink(_ pcm: PCMBuffer, saying text: String?) async throws -> Bool {
        playing += 1
        clipStartedAt = ContinuousClock.now
        clipText = text
        clipMs = pcm.durationMilliseconds
        if playing == 1 { onSpeaking?(true) }
        defer {
            playing -= 1
            lastAudibleAt = ContinuousClock.now
            if playing == 0 { onSpeaking?(false) }
        }
        return try await sink.play(pcm)
    }

    /// Plays a short cue (the wake chime) on the speech sink, so `isAudible` covers it like speech.
    /// Skipped when `current` says the cue is late (a stop came after the machine asked for it).
    public func playCue(_ pcm: PCMBuffer, if current: @Sendable () -> Bool = { true }) async -> Bool {
        guard current() else { return false }
        return (try? await playOnSink(pcm, saying: nil)) ?? false
    }

    /// Whether the speaker is playing now, or stopped less than `tailMs` ago (the room's echo
    /// and the sink's buffer still reach the microphone for a moment).
    public func isAudible(tailMs: Int = 300) -> Bool {
        if playing > 0 { return true }
        guard let last = lastAudibleAt else { return false }
        return ContinuousClock.now - last < .milliseconds(tailMs)
    }

    /// The speaker for the talk machine: playing now, and how long since it last stopped.
    public func speakerState() -> SpeakerState {
        func ms(since t: ContinuousClock.Instant) -> Int64 {
            let d = ContinuousClock.now - t
            return d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000
        }
        return SpeakerState(playing: playing > 0, msSinceStopped: lastAudibleAt.map(ms(since:)),
                            msIntoClip: clipStartedAt.map(ms(since:)), saying: clipText, clipMs: clipMs)
    }

    private func release() {
        active -= 1
        if active == 0 { let waiters = idleWaiters; idleWaiters = []; waiters.forEach { $0.resume() } }
    }

    public init(channel: (any OperatorChannel)?, sink: any SpeechSink, config: SpeechConfig, log: LogSink) {
        self.channel = channel
        self.sink = sink
        self.config = config
        self.log = log
    }

    public func update(config: SpeechConfig) { self.config = config }

    /// A reply's directive without `once`: its voice becomes the default for what follows.
    public func adopt(_ directive: VoiceDirective) {
        guard !directive.once else { return }
        config.voice = config.voice.applying(lang: directive.language, speed: directive.speed, rateWpm: directive.rateWpm)
    }

    /// Stops what is playing and drops clips still on their way. A stop never falls back.
    public func stop() async {
        endClaims()
        await sink.stop()
    }

    /// Audio ready to play, fetched (and decoded, or synthesised) ahead of time.
    public struct Prepared: Sendable {
        public var text: String
        public var voice: VoiceSettings
        public var pcm: PCMBuffer?
        public var report: SpeechReport
    }

    /// Fetches and decodes (or synthesises) one piece of text without playing it, so the next
    /// sentence's clip can be on its way while the current one plays. Never falls back for a
    /// stop: `play` checks the caller's claim before playing.
    public func prepare(_ text: String, route: SpeechRoute, directive: VoiceDirective? = nil) async -> Prepared {
        var voice = config.voice
        if let d = directive { voice = voice.applying(lang: d.language, speed: d.speed, rateWpm: d.rateWpm) }
        var reason: String?
        if route != .local {
            switch await fetchClip(text, route: route, directive: directive) {
            case .clip(let pcm, let provider, let format):
                return Prepared(text: text, voice: voice, pcm: pcm,
                                report: SpeechReport(engine: "gateway", provider: provider, outputFormat: format,
                                                     outcome: .finished, durationMs: pcm.durationMilliseconds))
            case .fallback(let r):
                reason = r
            }
        }
        return await local(text, voice: voice, reason: reason)
    }

    private func local(_ text: String, voice: VoiceSettings, reason: String?) async -> Prepared {
        do {
            let pcm = try await Self.synthesize(text, voice)
            if let reason { log.log(.info, "speech", "speaking with espeak-ng instead: \(reason)") }
            return Prepared(text: text, voice: voice, pcm: pcm,
                            report: SpeechReport(engine: "espeak-ng", fallbackReason: reason, outcome: .finished,
                                                 durationMs: pcm.durationMilliseconds))
        } catch {
            return Prepared(text: text, voice: voice, pcm: nil,
                            report: SpeechReport(engine: "espeak-ng", fallbackReason: reason, outcome: .failed,
                                                 durationMs: 0, error: "\(error)"))
        }
    }

    /// Plays prepared audio unless `claim` has been stopped.
    public func play(_ prepared: Prepared, claim c: SpeechClaim) async -> SpeechReport {
        guard !c.isStopped else { return stoppedReport() }
        guard let pcm = prepared.pcm else { return prepared.report }
        var report = prepared.report
        do {
            let finished = try await playOnSink(pcm, saying: prepared.text)
            report.outcome = finished && !c.isStopped ? .finished : .stopped
        } catch {
            if c.isStopped { return stoppedReport() }
            // The clip would not play: say it with espeak-ng (unless it already was espeak-ng).
            guard report.engine == "gateway" else { report.outcome = .failed; report.error = "\(error)"; return report }
            let fallback = await local(prepared.text, voice: prepared.voice, reason: "playback failed: \(error)")
            guard fallback.pcm != nil else { return fallback.report }
            return await play(fallback, claim: c)
        }
        return report
    }

    /// Speaks `text` (a reply's directive line is stripped and applied first).
    public func speak(_ text: String, route: SpeechRoute) async -> SpeechReport {
        acquire()
        defer { release() }
        // The last one asked speaks: calls still on their way drop what they fetch.
        endClaims()
        return await speak(text, route: route, claim: claim())
    }

    private func speak(_ text: String, route: SpeechRoute, claim c: SpeechClaim) async -> SpeechReport {
        defer { claims.removeValue(forKey: ObjectIdentifier(c)) }
        let (directive, body) = VoiceDirective.split(text)
        if let d = directive, !d.once {
            // Persistent directive: later replies use this voice too.
            config.voice = config.voice.applying(lang: d.language, speed: d.speed, rateWpm: d.rateWpm)
        }
        let spoken = body.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !spoken.isEmpty else {
            return SpeechReport(engine: "none", outcome: .silent, durationMs: 0)
        }
        var fallbackReason: String?
        if route != .local {
            switch await fetchClip(spoken, route: route, directive: directive) {
            case .clip(let pcm, let provider, let format):
                guard !c.isStopped else { return stoppedReport() }
                do {
                    let began = ContinuousClock.now
                    let finished = try await playOnSink(pcm, saying: spoken)
                    let done = finished && !c.isStopped
                    return SpeechReport(engine: "gateway", provider: provider, outputFormat: format,
                                        outcome: done ? .finished : .stopped,
                                        durationMs: done ? pcm.durationMilliseconds : Self.played(pcm, since: began))
                } catch {
                    if c.isStopped { return stoppedReport() }
                    fallbackReason = "playback failed: \(error)"
                }
            case .fallback(let reason):
                fallbackReason = reason
            }
            guard !c.isStopped else { return stoppedReport() }
            log.log(.info, "speech", "speaking with espeak-ng instead: \(fallbackReason ?? "")")
        }
        var voice = config.voice
        if let d = directive { voice = voice.applying(lang: d.language, speed: d.speed, rateWpm: d.rateWpm) }
        do {
            let pcm = try await Self.synthesize(spoken, voice)
            guard !c.isStopped else { return stoppedReport() }
            let began = ContinuousClock.now
            let finished = try await playOnSink(pcm, saying: spoken)
            let done = finished && !c.isStopped
            return SpeechReport(engine: "espeak-ng", fallbackReason: fallbackReason, outcome: done ? .finished : .stopped,
                                durationMs: done ? pcm.durationMilliseconds : Self.played(pcm, since: began))
        } catch {
            log.log(.error, "speech", "espeak-ng could not speak: \(error)")
            return SpeechReport(engine: "espeak-ng", fallbackReason: fallbackReason, outcome: .failed, durationMs: 0, error: "\(error)")
        }
    }

    /// How much of a clip was heard when it was stopped: the time it played, at most its length.
    static func played(_ pcm: PCMBuffer, since began: ContinuousClock.Instant) -> Double {
        min((ContinuousClock.now - began) / .milliseconds(1), pcm.durationMilliseconds)
    }

    private func stoppedReport() -> SpeechReport {
        SpeechReport(engine: "none", outcome: .stopped, durationMs: 0)
    }

    /// espeak-ng is process-global and blocking: keep it off the cooperative pool's hot path.
    static func synthesize(_ text: String, _ voice: VoiceSettings) async throws -> PCMBuffer {
        try await withCheckedThrowingContinuation { cont in
            DispatchQueue.global(qos: .userInitiated).async {
                do { cont.resume(returning: try SpeechSynthesizer.synthesize(text, settings: voice)) }
                catch { cont.resume(throwing: error) }
            }
        }
    }

    enum ClipResult {
        case clip(PCMBuffer, provider: String, format: String?)
        case fallback(String)
    }

    private func fetchClip(_ text: String, route: SpeechRoute, directive: VoiceDirective?) async -> ClipResult {
        guard let channel else { return .fallback("no gateway") }
        guard await channel.connected() else { return .fallback("gateway not connected") }
        let method = route == .talkSpeak ? GatewayMethod.talkSpeak : GatewayMethod.ttsSpeak
        let methods = await channel.advertisedMethods()
        if !methods.isEmpty && !methods.contains(method) { return .fallback("the gateway does not offer \(method)") }
        let params: JSONValue
        if route == .talkSpeak {
            var p = TalkSpeakParams(text: text, outputFormat: directive?.outputFormat ?? config.talkOutputFormat)
            p.voiceId = directive?.voiceId
            p.speed = directive?.speed
            p.language = directive?.language
            params = (try? JSONValue(encoding: p)) ?? ["text": .string(text)]
        } else {
            params = ["text": .string(text)]
        }
        let result: JSONValue
        do {
            result = try await channel.request(method, params: params,
                                               timeoutMs: route == .talkSpeak ? config.talkSpeakTimeoutMs : config.ttsSpeakTimeoutMs)
        } catch {
            return Self.classify(error, route: route)
        }
        guard let r = try? result.decode(SpeakResult.self) else { return .fallback("\(method) returned no audio") }
        guard let bytes = Data(base64Encoded: r.audioBase64), !bytes.isEmpty else { return .fallback("\(method) returned empty or non-base64 audio") }
        do {
            let pcm = try ClipDecoder.decode(Array(bytes), outputFormat: r.outputFormat, mimeType: r.mimeType, fileExtension: r.fileExtension)
            guard !pcm.isEmpty else { return .fallback("the clip decoded to no audio") }
            if let why = ClipPlayability.problem(pcm, text: text) { return .fallback("clip not playable: \(why)") }
            return .clip(pcm, provider: r.provider, format: r.outputFormat)
        } catch {
            return .fallback("clip not playable (\(r.outputFormat ?? r.mimeType ?? "unlabelled")): \(error)")
        }
    }

    /// Every failed talk.speak or tts.speak falls back (issue 12's product decision: the user
    /// always hears the answer, also for `synthesis_failed` and `invalid_audio_result` with
    /// `fallbackEligible: false`); the reason names the gateway's code, `details.reason` and
    /// `fallbackEligible` for the log.
    static func classify(_ error: any Error, route: SpeechRoute) -> ClipResult {
        guard case GatewayRequestError.failed(let shape) = error else {
            return .fallback("\(error)")  // not connected, timed out, dropped: the RPC is effectively missing
        }
        if route == .talkSpeak && shape.code == "INVALID_REQUEST" && shape.message.lowercased().contains("unknown method") {
            return .fallback("the gateway has no talk.speak")
        }
        var why = "\(shape)"
        if let reason = shape.details?["reason"]?.stringValue { why += " [\(reason)]" }
        if shape.details?["fallbackEligible"]?.boolValue == false { why += " (not fallback-eligible; spoken on this device anyway)" }
        return .fallback(why)
    }

    /// Renders what `speak` would play, without playing it (for `say --out`).
    public func render(_ text: String, route: SpeechRoute) async -> (PCMBuffer?, SpeechReport) {
        let (directive, body) = VoiceDirective.split(text)
        let spoken = body.trimmingCharacters(in: .whitespacesAndNewlines)
        var reason: String?
        if route != .local {
            switch await fetchClip(spoken, route: route, directive: directive) {
            case .clip(let pcm, let provider, let format):
                return (pcm, SpeechReport(engine: "gateway", provider: provider, outputFormat: format, outcome: .finished, durationMs: pcm.durationMilliseconds))
            case .fallback(let r): reason = r
            }
        }
        var voice = config.voice
        if let d = directive { voice = voice.applying(lang: d.language, speed: d.speed, rateWpm: d.rateWpm) }
        do {
            let pcm = try await Self.synthesize(spoken, voice)
            return (pcm, SpeechReport(engine: "espeak-ng", fallbackReason: reason, outcome: .finished, durationMs: pcm.durationMilliseconds))
        } catch {
            return (nil, SpeechReport(engine: "espeak-ng", fallbackReason: reason, outcome: .failed, durationMs: 0, error: "\(error)"))
        }
    }
}
