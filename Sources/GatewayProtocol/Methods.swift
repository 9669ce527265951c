// Operator-side methods and events clawvoice uses: chat, voice wake, TTS, tick, shutdown.

import Foundation

/// `chat.send` params (closed). The same idempotency key on every retry of one turn.
public struct ChatSendParams: Sendable, Equatable, Codable {
    public var sessionKey: String
    public var message: String
    public var idempotencyKey: String
    public var thinking: String?
    public var attachments: [JSONValue]?

    public init(sessionKey: String, message: String, idempotencyKey: String, thinking: String? = nil, attachments: [JSONValue]? = nil) {
        self.sessionKey = sessionKey
        self.message = message
        self.idempotencyKey = idempotencyKey
        self.thinking = thinking
        self.attachments = attachments
    }
}

/// A `chat` event. `deltaText` is new in protocol v4; `message` is the cumulative snapshot.
public struct ChatEvent: Sendable, Equatable {
    public enum State: String, Sendable { case delta, final, aborted, error, status }
    public var runId: String
    public var sessionKey: String
    public var seq: Int64
    public var state: State
    public var deltaText: String?
    public var replace: Bool
    public var messageText: String?
    public var errorMessage: String?

    public init(runId: String, sessionKey: String, seq: Int64, state: State, deltaText: String? = nil,
                replace: Bool = false, messageText: String? = nil, errorMessage: String? = nil) {
        self.runId = runId
        self.sessionKey = sessionKey
        self.seq = seq
        self.state = state
        self.deltaText = deltaText
        self.replace = replace
        self.messageText = messageText
        self.errorMessage = errorMessage
    }

    public init?(payload: JSONValue?) {
        guard let p = payload, let runId = p["runId"]?.stringValue, let sk = p["sessionKey"]?.stringValue,
              let st = p["state"]?.stringValue, let state = State(rawValue: st) else { return nil }
        self.init(runId: runId, sessionKey: sk, seq: p["seq"]?.intValue ?? 0, state: state,
                  deltaText: p["deltaText"]?.stringValue, replace: p["replace"]?.boolValue ?? false,
                  messageText: ChatEvent.text(of: p["message"]), errorMessage: p["errorMessage"]?.stringValue)
    }

    /// The text of a message snapshot: a string, or `{content:[{type:"text",text}]}`.
    public static func text(of message: JSONValue?) -> String? {
        guard let message else { return nil }
        if let s = message.stringValue { return s }
        if let s = message["text"]?.stringValue { return s }
        guard let parts = message["content"]?.arrayValue else { return nil }
        let texts = parts.compactMap { $0["type"]?.stringValue == "text" ? $0["text"]?.stringValue : nil }
        return texts.isEmpty ? nil : texts.joined()
    }

    public var payload: JSONValue {
        var o: [String: JSONValue] = ["runId": .string(runId), "sessionKey": .string(sessionKey),
                                      "seq": .number(Double(seq)), "state": .string(state.rawValue)]
        if let deltaText { o["deltaText"] = .string(deltaText) }
        if let messageText {
            o["message"] = ["role": "assistant", "content": [["type": "text", "text": .string(messageText)]]]
        }
        if let errorMessage { o["errorMessage"] = .string(errorMessage) }
        return .object(o)
    }
}

/// `voicewake.get` result and `voicewake.changed` payload.
public struct VoiceWakeTriggers: Sendable, Equatable {
    public static let defaults = ["openclaw", "claude", "computer"]
    public var triggers: [String]
    public init(triggers: [String]) { self.triggers = triggers }
    public init?(payload: JSONValue?) {
        guard let list = payload?["triggers"]?.arrayValue else { return nil }
        triggers = list.compactMap(\.stringValue)
    }
    public var payload: JSONValue { ["triggers": .array(triggers.map { .string($0) })] }
}

/// `talk.speak` params (closed); only what clawvoice sets.
public struct TalkSpeakParams: Sendable, Equatable, Codable {
    public var text: String
    public var voiceId: String?
    public var outputFormat: String?
    public var speed: Double?
    public var language: String?
    public init(text: String, voiceId: String? = nil, outputFormat: String? = nil, speed: Double? = nil, language: String? = nil) {
        self.text = text
        self.voiceId = voiceId
        self.outputFormat = outputFormat
        self.speed = speed
        self.language = language
    }
}

/// `talk.speak` / `tts.speak` result: the whole clip, base64.
public struct SpeakResult: Sendable, Equatable, Codable {
    public var audioBase64: String
    public var provider: String
    public var outputFormat: String?
    public var voiceCompatible: Bool?
    public var mimeType: String?
    public var fileExtension: String?
    public init(audioBase64: String, provider: String, outputFormat: String? = nil, voiceCompatible: Bool? = nil,
                mimeType: String? = nil, fileExtension: String? = nil) {
        self.audioBase64 = audioBase64
        self.provider = provider
        self.outputFormat = outputFormat
        self.voiceCompatible = voiceCompatible
        self.mimeType = mimeType
        self.fileExtension = fileExtension
    }
}

/// `shutdown {reason, restartExpectedMs?}`, sent before the gateway closes with 1012.
public struct ShutdownEvent: Sendable, Equatable {
    public var reason: String
    public var restartExpectedMs: Int64?
    public init?(payload: JSONValue?) {
        guard let r = payload?["reason"]?.stringValue else { return nil }
        reason = r
        restartExpectedMs = payload?["restartExpectedMs"]?.intValue
    }
}

/// Well-known method and event names.
public enum GatewayMethod {
    public static let connect = "connect"
    public static let nodeInvokeResult = "node.invoke.result"
    public static let nodeEvent = "node.event"
    public static let chatSend = "chat.send"
    public static let chatHistory = "chat.history"
    public static let voicewakeGet = "voicewake.get"
    public static let talkSpeak = "talk.speak"
    public static let ttsSpeak = "tts.speak"
}

public enum GatewayEvent {
    public static let challenge = "connect.challenge"
    public static let tick = "tick"
    public static let shutdown = "shutdown"
    public static let nodeInvokeRequest = "node.invoke.request"
    public static let nodeInvokeCancel = "node.invoke.cancel"
    public static let chat = "chat"
    public static let voicewakeChanged = "voicewake.changed"
    public static let voicewakeRoutingChanged = "voicewake.routing.changed"
}
