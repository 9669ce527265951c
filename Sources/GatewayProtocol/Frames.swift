// The three frame shapes of the gateway protocol, and decoding of raw WebSocket payloads.

public import Foundation

/// `{"type":"req","id","method","params"}`: a call, in either direction.
public struct RequestFrame: Sendable, Equatable, Codable {
    public var type: String = "req"
    public var id: String
    public var method: String
    public var params: JSONValue?

    public init(id: String, method: String, params: JSONValue? = nil) {
        self.id = id
        self.method = method
        self.params = params
    }
}

/// The error shape of a failed response: branch on `code` and `details.code`, never on `message`.
public struct ErrorShape: Sendable, Equatable, Codable, Error, CustomStringConvertible {
    public var code: String
    public var message: String
    public var details: JSONValue?
    public var retryable: Bool?
    public var retryAfterMs: Int64?

    public init(code: String, message: String, details: JSONValue? = nil, retryable: Bool? = nil, retryAfterMs: Int64? = nil) {
        self.code = code
        self.message = message
        self.details = details
        self.retryable = retryable
        self.retryAfterMs = retryAfterMs
    }

    /// `details.code`, the machine-readable reason (`PAIRING_REQUIRED`, `AUTH_TOKEN_MISMATCH`, …).
    public var detailCode: String? { details?["code"]?.stringValue }
    public var description: String {
        if let d = detailCode { return "\(code) (\(d)): \(message)" }
        return "\(code): \(message)"
    }
}

/// `{"type":"res","id","ok","payload"|"error"}`.
public struct ResponseFrame: Sendable, Equatable, Codable {
    public var type: String = "res"
    public var id: String
    public var ok: Bool
    public var payload: JSONValue?
    public var error: ErrorShape?

    public init(id: String, ok: Bool, payload: JSONValue? = nil, error: ErrorShape? = nil) {
        self.id = id
        self.ok = ok
        self.payload = payload
        self.error = error
    }

    public static func success(_ id: String, _ payload: JSONValue = .object([:])) -> ResponseFrame {
        ResponseFrame(id: id, ok: true, payload: payload)
    }
    public static func failure(_ id: String, _ error: ErrorShape) -> ResponseFrame {
        ResponseFrame(id: id, ok: false, error: error)
    }
}

public struct StateVersion: Sendable, Equatable, Codable {
    public var presence: Int64
    public var health: Int64
    public init(presence: Int64, health: Int64) { self.presence = presence; self.health = health }
}

/// `{"type":"event","event","payload","seq"?,"stateVersion"?}`. Node-targeted events carry no `seq`.
public struct EventFrame: Sendable, Equatable, Codable {
    public var type: String = "event"
    public var event: String
    public var payload: JSONValue?
    public var seq: Int64?
    public var stateVersion: StateVersion?

    public init(event: String, payload: JSONValue? = nil, seq: Int64? = nil, stateVersion: StateVersion? = nil) {
        self.event = event
        self.payload = payload
        self.seq = seq
        self.stateVersion = stateVersion
    }
}

/// Any frame that can arrive on a gateway socket.
public enum GatewayFrame: Sendable, Equatable {
    case request(RequestFrame)
    case response(ResponseFrame)
    case event(EventFrame)
    /// `{"type":"cancel","id"}` from newer schemas; nothing here needs it, so it is only recognised.
    case cancel(id: String)

    /// Why a payload is not a frame; one line, fit for a log.
    public struct DecodingFailure: Error, Sendable, Equatable, CustomStringConvertible {
        public var reason: String
        public var description: String { "malformed frame: \(reason)" }
    }

    /// Decodes text or binary WebSocket payloads alike: both carry UTF-8 JSON.
    public static func decode(_ bytes: some Collection<UInt8>) throws(DecodingFailure) -> GatewayFrame {
        let data = Data(bytes)
        do throws(JSONDepth.TooDeep) { try JSONDepth.check(data) } catch { throw DecodingFailure(reason: "\(error)") }
        let value: JSONValue
        do { value = try JSONDecoder().decode(JSONValue.self, from: data) } catch {
            throw DecodingFailure(reason: "not JSON (\(data.count) bytes)")
        }
        return try decode(value)
    }

    public static func decode(_ text: String) throws(DecodingFailure) -> GatewayFrame {
        try decode(Array(text.utf8))
    }

    public static func decode(_ value: JSONValue) throws(DecodingFailure) -> GatewayFrame {
        guard case .object(let o) = value else { throw DecodingFailure(reason: "not a JSON object") }
        guard let type = o["type"]?.stringValue else { throw DecodingFailure(reason: "missing \"type\"") }
        func nonEmpty(_ key: String) throws(DecodingFailure) -> String {
            guard let s = o[key]?.stringValue, !s.isEmpty else {
                throw DecodingFailure(reason: "\(type) frame without a non-empty \"\(key)\"")
            }
            return s
        }
        switch type {
        case "req":
            return .request(RequestFrame(id: try nonEmpty("id"), method: try nonEmpty("method"), params: o["params"]))
        case "res":
            let id = try nonEmpty("id")
            guard let ok = o["ok"]?.boolValue else { throw DecodingFailure(reason: "res frame without a boolean \"ok\"") }
            var error: ErrorShape?
            if let e = o["error"], e != .null {
                guard let code = e["code"]?.stringValue else { throw DecodingFailure(reason: "res error without a \"code\"") }
                error = ErrorShape(code: code, message: e["message"]?.stringValue ?? "", details: e["details"],
                                   retryable: e["retryable"]?.boolValue, retryAfterMs: e["retryAfterMs"]?.intValue)
            }
            if !ok && error == nil { error = ErrorShape(code: "UNKNOWN", message: "failed response without an error") }
            return .response(ResponseFrame(id: id, ok: ok, payload: o["payload"], error: error))
        case "event":
            var sv: StateVersion?
            if let p = o["stateVersion"]?["presence"]?.intValue, let h = o["stateVersion"]?["health"]?.intValue {
                sv = StateVersion(presence: p, health: h)
            }
            return .event(EventFrame(event: try nonEmpty("event"), payload: o["payload"], seq: o["seq"]?.intValue, stateVersion: sv))
        case "cancel":
            return .cancel(id: try nonEmpty("id"))
        default:
            throw DecodingFailure(reason: "unknown frame type \"\(type)\"")
        }
    }

    /// UTF-8 JSON for the wire.
    public func encoded() throws -> Data {
        switch self {
        case .request(let r): return try JSONCoding.encode(r)
        case .response(let r): return try JSONCoding.encode(r)
        case .event(let e): return try JSONCoding.encode(e)
        case .cancel(let id): return try JSONCoding.encode(["type": "cancel", "id": id])
        }
    }

    public func encodedString() throws -> String { String(decoding: try encoded(), as: UTF8.self) }
}
