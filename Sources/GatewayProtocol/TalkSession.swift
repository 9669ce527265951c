// talk.session.*: the transcription relay a node streams captured audio into, and the
// talk.event frames that carry its transcript back.

import Foundation

/// `talk.session.create` params for the transcription relay (mode, transport and brain are fixed).
public struct TalkSessionCreateParams: Sendable, Equatable, Codable {
    public var sessionKey: String?
    public var mode: String = "transcription"
    public var transport: String = "gateway-relay"
    public var brain: String = "none"
    public var language: String?
    public init(sessionKey: String?, language: String? = nil) {
        self.sessionKey = sessionKey
        self.language = language
    }
}

/// The audio encodings a relay may ask for in `audio.inputEncoding`.
public enum RelayInputEncoding: Sendable, Equatable {
    /// An Ogg Opus stream: every append carries whole Ogg pages.
    case oggOpus
    case pcm16
    case g711MuLaw
    case unknown(String)

    public init(_ name: String) {
        switch name.lowercased() {
        case "opus", "ogg_opus", "ogg-opus": self = .oggOpus
        case "pcm16", "pcm_s16le", "pcm": self = .pcm16
        case "g711_ulaw", "g711-ulaw", "mulaw", "ulaw", "pcmu": self = .g711MuLaw
        default: self = .unknown(name)
        }
    }

    public var wireName: String {
        switch self {
        case .oggOpus: return "ogg_opus"
        case .pcm16: return "pcm16"
        case .g711MuLaw: return "g711_ulaw"
        case .unknown(let n): return n
        }
    }
}

/// `talk.session.create` result: the session ids and the input contract. The newest gateway
/// (`src/gateway/talk/handlers/session.ts`) answers a transcription create with
/// `{provider, mode:"transcription", transport:"gateway-relay", transcriptionSessionId, sessionId,
/// brain, audio:{inputEncoding:"g711_ulaw", inputSampleRateHz:8000}, expiresAt}`, and a realtime
/// one with `sessionId` = `relaySessionId` = `voiceSessionId`.
public struct TalkSessionInfo: Sendable, Equatable {
    /// The id every later call names (`sessionId`, else the first of the older spellings).
    public var sessionId: String
    public var transcriptionSessionId: String?
    public var voiceSessionId: String?
    public var inputEncoding: RelayInputEncoding
    public var inputSampleRateHz: Int
    public var provider: String?
    /// `expiresAt` as the gateway sent it (epoch ms or an ISO string), for the log.
    public var expiresAt: JSONValue?

    public init(sessionId: String, inputEncoding: RelayInputEncoding, inputSampleRateHz: Int,
                transcriptionSessionId: String? = nil, voiceSessionId: String? = nil, provider: String? = nil,
                expiresAt: JSONValue? = nil) {
        self.sessionId = sessionId
        self.inputEncoding = inputEncoding
        self.inputSampleRateHz = inputSampleRateHz
        self.transcriptionSessionId = transcriptionSessionId
        self.voiceSessionId = voiceSessionId
        self.provider = provider
        self.expiresAt = expiresAt
    }

    /// Reads `sessionId` (else `transcriptionSessionId`, `relaySessionId`, `voiceSessionId`) and
    /// `audio.inputEncoding`/`inputSampleRateHz`. A relay that names no encoding gets the
    /// transcription contract, G.711 µ-law at 8 kHz; unknown keys are ignored.
    public init?(payload: JSONValue?) {
        guard let p = payload else { return nil }
        func id(_ k: String) -> String? { p[k]?.stringValue.flatMap { $0.isEmpty ? nil : $0 } }
        guard let sid = id("sessionId") ?? id("transcriptionSessionId") ?? id("relaySessionId") ?? id("voiceSessionId") else { return nil }
        sessionId = sid
        transcriptionSessionId = id("transcriptionSessionId")
        voiceSessionId = id("voiceSessionId")
        provider = p["provider"]?.stringValue
        expiresAt = p["expiresAt"]
        let audio = p["audio"]
        inputEncoding = RelayInputEncoding(audio?["inputEncoding"]?.stringValue ?? "g711_ulaw")
        let defaultRate = inputEncoding == .g711MuLaw ? 8_000 : (inputEncoding == .oggOpus ? 16_000 : 24_000)
        inputSampleRateHz = Int(audio?["inputSampleRateHz"]?.intValue ?? Int64(defaultRate))
    }

    /// The transcription result as the newest gateway shapes it.
    public var payload: JSONValue {
        var o: [String: JSONValue] = [
            "sessionId": .string(sessionId), "transcriptionSessionId": .string(transcriptionSessionId ?? sessionId),
            "mode": "transcription", "transport": "gateway-relay", "brain": "none",
            "audio": ["inputEncoding": .string(inputEncoding.wireName), "inputSampleRateHz": .number(Double(inputSampleRateHz))]]
        if let provider { o["provider"] = .string(provider) }
        if let expiresAt { o["expiresAt"] = expiresAt }
        if let voiceSessionId { o["voiceSessionId"] = .string(voiceSessionId) }
        return .object(o)
    }
}

/// `details.talkIssue` of a failed `talk.*` call: `{code, message, phase}`, e.g.
/// `UNAVAILABLE` with `{code:"realtime_unavailable", message, phase:"request"}`.
public struct TalkIssue: Sendable, Equatable, CustomStringConvertible {
    public var code: String
    public var message: String
    public var phase: String?

    public init(code: String, message: String, phase: String? = nil) {
        self.code = code
        self.message = message
        self.phase = phase
    }

    public init?(details: JSONValue?) {
        guard let t = details?["talkIssue"], let code = t["code"]?.stringValue, !code.isEmpty else { return nil }
        self.init(code: code, message: t["message"]?.stringValue ?? "", phase: t["phase"]?.stringValue)
    }

    public var json: JSONValue {
        var o: [String: JSONValue] = ["code": .string(code), "message": .string(message)]
        if let phase { o["phase"] = .string(phase) }
        return .object(o)
    }

    /// One line: "realtime_unavailable: no provider (phase request)".
    public var description: String {
        "\(code)\(message.isEmpty ? "" : ": \(message)")\(phase.map { " (phase \($0))" } ?? "")"
    }
}

/// `talk.session.appendAudio` params: base64 audio and an integer-millisecond timestamp.
public struct TalkAppendAudioParams: Sendable, Equatable, Codable {
    public var sessionId: String
    public var audioBase64: String
    public var timestamp: Int64
    public init(sessionId: String, audioBase64: String, timestamp: Int64) {
        self.sessionId = sessionId
        self.audioBase64 = audioBase64
        self.timestamp = timestamp
    }
}

/// A transcript carried by `talk.event`, in either shape the relay uses: a flat
/// `{transcriptionSessionId, type:"transcript"|"partial", text}` or a `talkEvent`
/// envelope of type `transcript.done`/`transcript.delta` with `payload.text`.
public struct TalkTranscriptEvent: Sendable, Equatable {
    public var sessionId: String?
    public var text: String
    public var isFinal: Bool

    public init(sessionId: String?, text: String, isFinal: Bool) {
        self.sessionId = sessionId
        self.text = text
        self.isFinal = isFinal
    }

    public init?(payload: JSONValue?) {
        guard let p = payload else { return nil }
        let sid = p["transcriptionSessionId"]?.stringValue ?? p["sessionId"]?.stringValue ?? p["relaySessionId"]?.stringValue
            ?? p["talkEvent"]?["sessionId"]?.stringValue
        if let type = p["type"]?.stringValue, type == "transcript" || type == "partial",
           let text = p["text"]?.stringValue ?? p["transcript"]?.stringValue {
            self.init(sessionId: sid, text: text, isFinal: type == "transcript" || p["final"]?.boolValue == true)
            return
        }
        if let te = p["talkEvent"], let type = te["type"]?.stringValue, type.hasPrefix("transcript."),
           let text = te["payload"]?["text"]?.stringValue {
            self.init(sessionId: sid, text: text, isFinal: type == "transcript.done")
            return
        }
        return nil
    }

    public var payload: JSONValue {
        ["transcriptionSessionId": sessionId.map { .string($0) } ?? .null, "type": .string(isFinal ? "transcript" : "partial"),
         "text": .string(text), "final": .bool(isFinal),
         "talkEvent": ["type": .string(isFinal ? "transcript.done" : "transcript.delta"),
                       "sessionId": sessionId.map { .string($0) } ?? .null, "payload": ["text": .string(text)]]]
    }
}

extension GatewayMethod {
    public static let talkSessionCreate = "talk.session.create"
    public static let talkSessionAppendAudio = "talk.session.appendAudio"
    public static let talkSessionClose = "talk.session.close"
}

extension GatewayEvent {
    public static let talkEvent = "talk.event"
}
