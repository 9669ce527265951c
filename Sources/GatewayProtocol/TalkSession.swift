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

/// `talk.session.create` result: the session id and the input contract.
public struct TalkSessionInfo: Sendable, Equatable {
    public var sessionId: String
    public var inputEncoding: RelayInputEncoding
    public var inputSampleRateHz: Int

    public init(sessionId: String, inputEncoding: RelayInputEncoding, inputSampleRateHz: Int) {
        self.sessionId = sessionId
        self.inputEncoding = inputEncoding
        self.inputSampleRateHz = inputSampleRateHz
    }

    /// Reads `sessionId` (or `relaySessionId`/`transcriptionSessionId`) and `audio.inputEncoding`/`inputSampleRateHz`.
    /// A relay that names no encoding gets the documented transcription default, G.711 µ-law at 8 kHz.
    public init?(payload: JSONValue?) {
        guard let p = payload,
              let id = p["sessionId"]?.stringValue ?? p["relaySessionId"]?.stringValue ?? p["transcriptionSessionId"]?.stringValue,
              !id.isEmpty else { return nil }
        sessionId = id
        let audio = p["audio"]
        inputEncoding = RelayInputEncoding(audio?["inputEncoding"]?.stringValue ?? "g711_ulaw")
        let defaultRate = inputEncoding == .g711MuLaw ? 8_000 : (inputEncoding == .oggOpus ? 16_000 : 24_000)
        inputSampleRateHz = Int(audio?["inputSampleRateHz"]?.intValue ?? Int64(defaultRate))
    }

    public var payload: JSONValue {
        ["sessionId": .string(sessionId), "transcriptionSessionId": .string(sessionId),
         "mode": "transcription", "transport": "gateway-relay", "brain": "none",
         "audio": ["inputEncoding": .string(inputEncoding.wireName), "inputSampleRateHz": .number(Double(inputSampleRateHz))]]
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
