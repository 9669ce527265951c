// What the frame tests share: decoding a fixture to the frame kind a test expects, a value's
// wire object and its null paths, and the gateway schema's closed key sets.

import Foundation
import Testing
import GatewayProtocol

// MARK: - Helpers

func decode(_ text: String) throws -> GatewayFrame { try GatewayFrame.decode(text) }

/// A fixture decoded to a different kind of frame than the test expects.
struct WrongFrameKind: Error, CustomStringConvertible {
    var frame: GatewayFrame
    var description: String { "unexpected frame kind: \(frame)" }
}

func event(_ text: String) throws -> EventFrame {
    let frame = try GatewayFrame.decode(text)
    guard case .event(let e) = frame else { throw WrongFrameKind(frame: frame) }
    return e
}

func response(_ text: String) throws -> ResponseFrame {
    let frame = try GatewayFrame.decode(text)
    guard case .response(let r) = frame else { throw WrongFrameKind(frame: frame) }
    return r
}

/// The JSON object a value encodes to, as the gateway would see it.
func wireObject<T: Encodable>(_ value: T) throws -> [String: JSONValue] {
    let json = try JSONCoding.decode(JSONValue.self, from: JSONCoding.encode(value))
    return try #require(json.objectValue, "\(T.self) did not encode to a JSON object")
}

/// Every JSON path whose value is null, so a test can say there are none.
func nullPaths(_ value: JSONValue, _ path: String = "$") -> [String] {
    switch value {
    case .null: return [path]
    case .array(let a): return a.enumerated().flatMap { nullPaths($1, "\(path)[\($0)]") }
    case .object(let o): return o.flatMap { nullPaths($1, "\(path).\($0)") }
    default: return []
    }
}

// MARK: - Closed schemas
//
// Key lists copied from OpenClaw's generated JSON Schema, `dist/protocol.schema.json` at commit
// 018c5c90e8686488aad1cc5540229a11fe13d52e (kept for reference as spec/protocol.schema.json in the
// design notes; not part of a clone, so it is not read here). Each object below is
// `additionalProperties: false` there: the gateway rejects any key not listed.
enum Schema {
    /// definitions.ConnectParams.properties
    static let connectParams: Set<String> = ["minProtocol", "maxProtocol", "client", "caps", "commands", "permissions",
                                             "pathEnv", "role", "scopes", "device", "auth", "locale", "userAgent"]
    static let connectParamsRequired: Set<String> = ["minProtocol", "maxProtocol", "client"]
    /// definitions.ConnectParams.properties.client.properties
    static let connectClient: Set<String> = ["id", "displayName", "version", "platform", "deviceFamily",
                                             "modelIdentifier", "mode", "instanceId"]
    /// definitions.ConnectParams.properties.device.properties
    static let connectDevice: Set<String> = ["id", "publicKey", "signature", "signedAt", "nonce"]
    /// definitions.ConnectParams.properties.auth.properties
    static let connectAuth: Set<String> = ["token", "bootstrapToken", "deviceToken", "password"]
    /// definitions.NodeInvokeResultParams.properties (error: only code and message)
    static let nodeInvokeResult: Set<String> = ["id", "nodeId", "ok", "payload", "payloadJSON", "error"]
    static let nodeInvokeResultError: Set<String> = ["code", "message"]
    /// definitions.NodeEventParams.properties
    static let nodeEvent: Set<String> = ["event", "payload", "payloadJSON"]
    /// definitions.ChatSendParams.properties
    static let chatSend: Set<String> = ["sessionKey", "message", "thinking", "deliver", "attachments", "timeoutMs",
                                        "systemInputProvenance", "systemProvenanceReceipt", "originatingChannel",
                                        "originatingTo", "originatingAccountId", "originatingThreadId", "idempotencyKey"]
    /// definitions.TalkSpeakParams.properties
    static let talkSpeak: Set<String> = ["text", "voiceId", "modelId", "outputFormat", "speed", "rateWpm", "stability",
                                         "similarity", "style", "speakerBoost", "seed", "normalize", "language",
                                         "latencyTier"]
}
