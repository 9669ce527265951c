// The handshake values: connect.challenge, connect params (closed: only spec fields), hello-ok.

import Foundation

/// `connect.challenge {nonce, ts}`. A challenge with an empty nonce or a missing ts is invalid.
public struct ConnectChallenge: Sendable, Equatable {
    public var nonce: String
    public var ts: Int64

    public init(nonce: String, ts: Int64) { self.nonce = nonce; self.ts = ts }

    public init?(payload: JSONValue?) {
        guard let nonce = payload?["nonce"]?.stringValue?.trimmingCharacters(in: .whitespacesAndNewlines),
              !nonce.isEmpty, let ts = payload?["ts"]?.intValue, ts >= 0 else { return nil }
        self.init(nonce: nonce, ts: ts)
    }
}

/// The two roles clawvoice connects as, from one device identity.
public enum SessionRole: String, Sendable, Codable, CaseIterable {
    case node
    case `operator`
}

/// `connect.client` (closed object).
public struct ClientInfo: Sendable, Equatable, Codable {
    public var id: String
    public var displayName: String?
    public var version: String
    public var platform: String
    public var deviceFamily: String?
    public var modelIdentifier: String?
    public var mode: String
    public var instanceId: String?

    public init(id: String, displayName: String? = nil, version: String, platform: String, deviceFamily: String?,
                modelIdentifier: String? = nil, mode: String, instanceId: String? = nil) {
        self.id = id
        self.displayName = displayName
        self.version = version
        self.platform = platform
        self.deviceFamily = deviceFamily
        self.modelIdentifier = modelIdentifier
        self.mode = mode
        self.instanceId = instanceId
    }
}

/// `connect.device` (closed): the signed proof of the device key.
public struct DeviceProof: Sendable, Equatable, Codable {
    public var id: String
    public var publicKey: String
    public var signature: String
    public var signedAt: Int64
    public var nonce: String

    public init(id: String, publicKey: String, signature: String, signedAt: Int64, nonce: String) {
        self.id = id
        self.publicKey = publicKey
        self.signature = signature
        self.signedAt = signedAt
        self.nonce = nonce
    }
}

/// `connect.auth` (closed). Only the four keys every gateway version accepts.
public struct ConnectAuth: Sendable, Equatable, Codable {
    public var token: String?
    public var bootstrapToken: String?
    public var deviceToken: String?
    public var password: String?

    public init(token: String? = nil, bootstrapToken: String? = nil, deviceToken: String? = nil, password: String? = nil) {
        self.token = token
        self.bootstrapToken = bootstrapToken
        self.deviceToken = deviceToken
        self.password = password
    }

    public var isEmpty: Bool { token == nil && bootstrapToken == nil && deviceToken == nil && password == nil }

    /// The token that goes into the signed payload: `token ?? deviceToken ?? bootstrapToken ?? ""`.
    public var signatureToken: String { token ?? deviceToken ?? bootstrapToken ?? "" }
}

/// `connect` params. A closed object on the gateway: never add a key the spec does not list.
public struct ConnectParams: Sendable, Equatable, Codable {
    public var minProtocol: Int
    public var maxProtocol: Int
    public var client: ClientInfo
    public var caps: [String]?
    public var commands: [String]?
    public var permissions: [String: Bool]?
    public var role: String
    public var scopes: [String]
    public var device: DeviceProof?
    public var auth: ConnectAuth?
    public var locale: String?
    public var userAgent: String?

    public init(minProtocol: Int, maxProtocol: Int, client: ClientInfo, caps: [String]? = nil, commands: [String]? = nil,
                permissions: [String: Bool]? = nil, role: String, scopes: [String], device: DeviceProof? = nil,
                auth: ConnectAuth? = nil, locale: String? = nil, userAgent: String? = nil) {
        self.minProtocol = minProtocol
        self.maxProtocol = maxProtocol
        self.client = client
        self.caps = caps
        self.commands = commands
        self.permissions = permissions
        self.role = role
        self.scopes = scopes
        self.device = device
        self.auth = auth
        self.locale = locale
        self.userAgent = userAgent
    }

    /// The protocol range a role asks for first: nodes may still speak the legacy v3, so a node
    /// offers 3…4 in one connect (accepted by v4 gateways and by released v3 ones, as the ESP32
    /// node does); an operator offers exactly 4 (current gateways refuse 3 to operators).
    /// `protocolFallback` is the 3…3 retry after a released-v3 mismatch answer, for either role
    /// (issue 26: a protocol-3 gateway still gets an operator session, degraded).
    public static func protocolRange(for role: SessionRole, protocolFallback: Bool = false) -> ClosedRange<Int> {
        if protocolFallback { return 3...3 }
        return role == .node ? 3...4 : 4...4
    }

    /// The keys a gateway accepts at the top level of connect params, for checks in tests and the loopback gateway.
    public static let allowedKeys: Set<String> = ["minProtocol", "maxProtocol", "client", "caps", "commands", "permissions",
        "pathEnv", "role", "scopes", "device", "auth", "locale", "userAgent"]
    public static let allowedClientKeys: Set<String> = ["id", "displayName", "version", "platform", "deviceFamily",
        "modelIdentifier", "mode", "instanceId"]
    public static let allowedAuthKeys: Set<String> = ["token", "bootstrapToken", "deviceToken", "password"]
    public static let allowedDeviceKeys: Set<String> = ["id", "publicKey", "signature", "signedAt", "nonce"]
}

/// `hello-ok`, the payload of a successful connect. Only what clawvoice reads is decoded.
public struct HelloOk: Sendable, Equatable {
    public struct Auth: Sendable, Equatable {
        public var role: String
        public var scopes: [String]
        public var deviceToken: String?
        public var issuedAtMs: Int64?
        /// Extra tokens from a setup-code handoff (`{deviceToken, role, scopes}`).
        public var deviceTokens: [HandoffToken]
    }
    public struct HandoffToken: Sendable, Equatable {
        public var deviceToken: String
        public var role: String
        public var scopes: [String]
    }

    public var protocolVersion: Int
    public var serverVersion: String
    public var connId: String
    public var methods: [String]
    public var events: [String]
    /// `features.capabilities` (e.g. `talk-session-target-v1`); empty when not stated.
    public var capabilities: [String]
    public var mainSessionKey: String?
    public var auth: Auth
    public var maxPayload: Int
    public var tickIntervalMs: Int
    public var raw: JSONValue

    /// Only `type` is required: the official clients' own tests answer connect with the minimal
    /// `{"type":"hello-ok","protocol":4}` (Rust `node_session.rs`) or even a bare
    /// `{"type":"hello-ok","auth":{…}}` (the ESP32 node's unit tests). A missing `protocol` is 0
    /// (not stated), a missing policy the default tick (30 s) and payload limit, a missing
    /// `auth.role` empty (the session knows which role it asked for).
    public init?(payload: JSONValue?) {
        guard let p = payload, p["type"]?.stringValue == "hello-ok" else { return nil }
        // Present but not a whole number is a malformed answer, not a minimal one.
        if let v = p["protocol"], v.intValue == nil { return nil }
        let proto = p["protocol"]?.intValue ?? 0
        let policy = p["policy"]
        let tick = policy?["tickIntervalMs"]?.intValue.flatMap { $0 > 0 ? $0 : nil } ?? 30_000
        let auth = p["auth"]
        let role = auth?["role"]?.stringValue ?? ""
        protocolVersion = Int(proto)
        serverVersion = p["server"]?["version"]?.stringValue ?? "unknown"
        connId = p["server"]?["connId"]?.stringValue ?? ""
        methods = p["features"]?["methods"]?.arrayValue?.compactMap(\.stringValue) ?? []
        events = p["features"]?["events"]?.arrayValue?.compactMap(\.stringValue) ?? []
        capabilities = p["features"]?["capabilities"]?.arrayValue?.compactMap(\.stringValue) ?? []
        mainSessionKey = p["snapshot"]?["sessionDefaults"]?["mainSessionKey"]?.stringValue
        let handoff = (auth?["deviceTokens"]?.arrayValue ?? []).compactMap { t -> HandoffToken? in
            guard let tok = t["deviceToken"]?.stringValue, let r = t["role"]?.stringValue else { return nil }
            return HandoffToken(deviceToken: tok, role: r, scopes: t["scopes"]?.arrayValue?.compactMap(\.stringValue) ?? [])
        }
        self.auth = Auth(role: role, scopes: auth?["scopes"]?.arrayValue?.compactMap(\.stringValue) ?? [],
                         deviceToken: auth?["deviceToken"]?.stringValue, issuedAtMs: auth?["issuedAtMs"]?.intValue,
                         deviceTokens: handoff)
        maxPayload = Int(policy?["maxPayload"]?.intValue ?? 26_214_400)
        tickIntervalMs = Int(tick)
        raw = p
    }
}
