// Speaking text: fetch a clip from the gateway (talk.speak for Talk replies, tts.speak for
// "listen to this"), decode it by format and play it; fall back to espeak-ng by the spec's
// rules; stop and flush at once on request. A generation counter drops late clips.

import Audio
import Foundation
import GatewayClient
import GatewayProtocol

/// Where the audio of a spoken text should come from.
public enum SpeechRoute: String, Sendable, Equatable, Codable {
    /// `talk.speak`: Talk replies. Falls back when the error says `fallbackEligible` (or gives no reason).
    case talkSpeak
    /// `tts.speak`: "listen to this message". Falls back on any error.
    case ttsSpeak
    /// espeak-ng only.
    case local
}

/// What played and why, for the log, `say`, tests and the bench.
public struct SpeechReport: Sendable, Equatable {
    public enum Outcome: String, Sendable, Equatable { case finished, stopped, failed, silent }
    /// "gateway" or "espeak-ng".
    public var engine: String
    public var provider: String?
    public var outputFormat: String?
    /// Why the gateway's clip was not used, when espeak-ng spoke instead.
    public var fallbackReason: String?
    public var outcome: Outcome
    public var durationMs: Double
    /// One line, when nothing could be spoken.
    public var error: String?
}

/// Plays PCM; PulsePlayback in the daemon, a WAV file for `say --out`.
public protocol SpeechSink: Sendable {
    /// Plays to the end (true) or until `stop` (false).
    func play(_ pcm: PCMBuffer) async throws -> Bool
    func stop() async
}

public struct SpeechConfig: Sendable, Equatable {
    public var voice = VoiceSettings()
    /// Requested talk.speak format; the reply's own format is authoritative.
    public var talkOutputFormat: String? = "pcm_24000"
    public var talkSpeakTimeoutMs: Int64 = 45_000
    public var ttsSpeakTimeoutMs: Int64 = 60_000
    public init() {}
}

public actor SpeechOutput {
    private let channel: (any OperatorChannel)?
    private let sink: any SpeechSink
    private var config: SpeechConfig
    private let log: LogSink
    private var generation = 0

    public init(channel: (any OperatorChannel)?, sink: any SpeechSink, config: SpeechConfig, log: LogSink) {
        self.channel = channel
        self.sink = sink
        self.config = config
        self.log = log
    }

    public func update(config: SpeechConfig) { self.config = config }

    /// Stops what is playing and drops clips still on their way. A stop never falls back.
    public func stop() async {
        generation += 1
        await sink.stop()
    }

    /// Speaks `text` (a reply's directive line is stripped and applied first).
    public func speak(_ text: String, route: SpeechRoute) async -> SpeechReport {
        generation += 1
        let gen = generation
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
                guard gen == generation else { return stoppedReport() }
                do {
                    let finished = try await sink.play(pcm)
                    return SpeechReport(engine: "gateway", provider: provider, outputFormat: format,
                                        outcome: finished && gen == generation ? .finished : .stopped,
                                        durationMs: pcm.durationMilliseconds)
                } catch {
                    if gen != generation { return stoppedReport() }
                    fallbackReason = "playback failed: \(error)"
                }
            case .fallback(let reason):
                fallbackReason = reason
            case .noFallback(let reason):
                log.log(.warning, "speech", "\(route.rawValue) failed and is not eligible for fallback: \(reason)")
                return SpeechReport(engine: "none", fallbackReason: nil, outcome: .failed, durationMs: 0, error: reason)
            }
            guard gen == generation else { return stoppedReport() }
            log.log(.info, "speech", "speaking with espeak-ng instead: \(fallbackReason ?? "")")
        }
        var voice = config.voice
        if let d = directive { voice = voice.applying(lang: d.language, speed: d.speed, rateWpm: d.rateWpm) }
        do {
            let pcm = try await Self.synthesize(spoken, voice)
            guard gen == generation else { return stoppedReport() }
            let finished = try await sink.play(pcm)
            return SpeechReport(engine: "espeak-ng", fallbackReason: fallbackReason,
                                outcome: finished && gen == generation ? .finished : .stopped, durationMs: pcm.durationMilliseconds)
        } catch {
            log.log(.error, "speech", "espeak-ng could not speak: \(error)")
            return SpeechReport(engine: "espeak-ng", fallbackReason: fallbackReason, outcome: .failed, durationMs: 0, error: "\(error)")
        }
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
        case noFallback(String)
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
            return .clip(pcm, provider: r.provider, format: r.outputFormat)
        } catch {
            return .fallback("clip not playable (\(r.outputFormat ?? r.mimeType ?? "unlabelled")): \(error)")
        }
    }

    /// talk.speak falls back only when the gateway says so (or gives no reason); tts.speak on any error.
    static func classify(_ error: any Error, route: SpeechRoute) -> ClipResult {
        guard case GatewayRequestError.failed(let shape) = error else {
            return .fallback("\(error)")  // not connected, timed out, dropped: the RPC is effectively missing
        }
        if route == .ttsSpeak { return .fallback("\(shape)") }
        if shape.code == "INVALID_REQUEST" && shape.message.lowercased().contains("unknown method") {
            return .fallback("the gateway has no talk.speak")
        }
        let eligible = shape.details?["fallbackEligible"]?.boolValue
        let reason = shape.details?["reason"]?.stringValue
        if eligible == true || (eligible == nil && reason == nil) { return .fallback("\(shape)") }
        return .noFallback("\(shape)")
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
            case .noFallback(let r):
                return (nil, SpeechReport(engine: "none", outcome: .failed, durationMs: 0, error: r))
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
