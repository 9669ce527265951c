// node.invoke: the gateway asks this node to run a command; the node answers with one result.

import Foundation

/// The gateway-stamped `sessionKey` of a `node.invoke.request`, in the three forms a gateway
/// sends (openclaw/openclaw#116792: "value/null/omitted semantics"): a session key, an explicit
/// `null` (the invoke belongs to no session), or no key at all (gateways before July 2026).
/// Only the top-level key counts: a `sessionKey` inside the command's params is never read.
public enum InvokeSessionKey: Sendable, Equatable {
    case omitted
    case null
    case value(String)

    /// Reads the payload's top-level `sessionKey`. A blank string is `null` (the gateway
    /// normalises it away the same way); a non-string value is ignored as if omitted.
    public init(_ raw: JSONValue?) {
        switch raw {
        case nil: self = .omitted
        case .null?: self = .null
        case .string(let s)?:
            let t = s.trimmingCharacters(in: .whitespacesAndNewlines)
            self = t.isEmpty ? .null : .value(t)
        default: self = .omitted
        }
    }

    /// The session to use, when the gateway named one.
    public var key: String? { if case .value(let k) = self { return k }; return nil }
}

/// `node.invoke.request` (gateway → node, no `seq`).
public struct NodeInvokeRequest: Sendable, Equatable {
    public var id: String
    public var nodeId: String
    public var command: String
    /// A string that holds JSON, or nil when the gateway sent none (absent or `null`).
    public var paramsJSON: String?
    public var timeoutMs: Int64?
    public var idempotencyKey: String?
    /// The session the gateway attributes this invoke to (top-level `sessionKey`); a `talk.ptt.*`
    /// turn goes there, else to the main session.
    public var session: InvokeSessionKey

    public init(id: String, nodeId: String, command: String, paramsJSON: String? = nil, timeoutMs: Int64? = nil,
                idempotencyKey: String? = nil, session: InvokeSessionKey = .omitted) {
        self.id = id
        self.nodeId = nodeId
        self.command = command
        self.paramsJSON = paramsJSON
        self.timeoutMs = timeoutMs
        self.idempotencyKey = idempotencyKey
        self.session = session
    }

    /// The gateway-named session key, nil when it sent `null` or nothing.
    public var sessionKey: String? { session.key }

    /// Accepts the payload as an object, or as a string holding the object (the Swift kit tolerates both).
    /// Keys it does not know are ignored (newer gateways add some).
    public init?(payload: JSONValue?) {
        var p = payload
        if let s = p?.stringValue, let v = try? JSONCoding.decode(JSONValue.self, from: Data(s.utf8)) { p = v }
        guard let id = p?["id"]?.stringValue, !id.isEmpty,
              let command = p?["command"]?.stringValue, !command.isEmpty else { return nil }
        self.init(id: id, nodeId: p?["nodeId"]?.stringValue ?? "", command: command,
                  paramsJSON: p?["paramsJSON"]?.stringValue, timeoutMs: p?["timeoutMs"]?.intValue,
                  idempotencyKey: p?["idempotencyKey"]?.stringValue, session: InvokeSessionKey(p?["sessionKey"]))
    }

    /// The id of a request that does not parse (no or empty `command`), so it can still be
    /// answered with an error instead of left to time out at the gateway.
    public static func idOfUnusable(payload: JSONValue?) -> String? {
        var p = payload
        if let s = p?.stringValue, let v = try? JSONCoding.decode(JSONValue.self, from: Data(s.utf8)) { p = v }
        guard let id = p?["id"]?.stringValue, !id.isEmpty else { return nil }
        return id
    }

    public var payload: JSONValue {
        var o: [String: JSONValue] = ["id": .string(id), "nodeId": .string(nodeId), "command": .string(command)]
        if let paramsJSON { o["paramsJSON"] = .string(paramsJSON) }
        if let timeoutMs { o["timeoutMs"] = .number(Double(timeoutMs)) }
        if let idempotencyKey { o["idempotencyKey"] = .string(idempotencyKey) }
        switch session {
        case .omitted: break
        case .null: o["sessionKey"] = .null
        case .value(let k): o["sessionKey"] = .string(k)
        }
        return .object(o)
    }

    /// The params, parsed. Absent params are an empty object; malformed JSON is an error the caller reports.
    public func params() throws(NodeInvokeError) -> JSONValue {
        guard let paramsJSON, !paramsJSON.isEmpty else { return .object([:]) }
        guard let v = try? JSONCoding.decode(JSONValue.self, from: Data(paramsJSON.utf8)) else {
            throw NodeInvokeError(code: .invalidRequest, message: "paramsJSON is not valid JSON")
        }
        return v
    }
}

/// `node.invoke.cancel`: newest gateways send `invokeId`, older ones `id`.
public struct NodeInvokeCancel: Sendable, Equatable {
    public var invokeId: String
    public init?(payload: JSONValue?) {
        guard let id = payload?["invokeId"]?.stringValue ?? payload?["id"]?.stringValue, !id.isEmpty else { return nil }
        invokeId = id
    }
}

/// Codes a node returns in `error.code`; the message starts with the code by convention.
public enum NodeErrorCode: String, Sendable {
    case invalidRequest = "INVALID_REQUEST"
    /// Params a command does not accept (`talk.start`/`talk.stop` take exactly `{}`: the room node's code).
    case invalidParams = "INVALID_PARAMS"
    case unavailable = "UNAVAILABLE"
    case unauthorized = "UNAUTHORIZED"
    case notPaired = "NOT_PAIRED"
    /// `system.notify` while notifications are switched off (the Linux node's code).
    case notificationsDisabled = "NOTIFICATIONS_DISABLED"
    /// `system.notify` when nothing can deliver it.
    case notificationsUnavailable = "NOTIFICATIONS_UNAVAILABLE"
}

/// A failed node command, as it goes back to the gateway.
public struct NodeInvokeError: Error, Sendable, Equatable, CustomStringConvertible {
    public var code: NodeErrorCode
    public var message: String
    public init(code: NodeErrorCode, message: String) { self.code = code; self.message = message }
    /// "CODE: message", the convention of the official nodes.
    public var description: String { "\(code.rawValue): \(message)" }
}

/// `node.invoke.result` params (closed: `id`, `nodeId`, `ok`, `payloadJSON`, `error{code,message}`).
public struct NodeInvokeResult: Sendable, Equatable, Codable {
    public struct Failure: Sendable, Equatable, Codable {
        public var code: String
        public var message: String
    }
    public var id: String
    public var nodeId: String
    public var ok: Bool
    public var payloadJSON: String?
    public var error: Failure?

    public static func success(id: String, nodeId: String, payload: JSONValue) -> NodeInvokeResult {
        NodeInvokeResult(id: id, nodeId: nodeId, ok: true,
                         payloadJSON: (try? JSONCoding.string(payload)) ?? "{}", error: nil)
    }
    public static func failure(id: String, nodeId: String, error: NodeInvokeError) -> NodeInvokeResult {
        NodeInvokeResult(id: id, nodeId: nodeId, ok: false, payloadJSON: nil,
                         error: Failure(code: error.code.rawValue, message: error.description))
    }

    /// The decoded payload, for tests and the loopback gateway.
    public var payload: JSONValue? {
        guard let payloadJSON else { return nil }
        return try? JSONCoding.decode(JSONValue.self, from: Data(payloadJSON.utf8))
    }
}

/// `node.event` params (closed). `payloadJSON` is always a string; never send it as null.
public struct NodeEventParams: Sendable, Equatable, Codable {
    public var event: String
    public var payloadJSON: String
    public init(event: String, payload: JSONValue) {
        self.event = event
        self.payloadJSON = (try? JSONCoding.string(payload)) ?? "{}"
    }
}
