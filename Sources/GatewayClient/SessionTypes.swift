// The values a gateway session is configured with and reports: endpoint, options, status, errors.

public import ClawvoiceCore
import Foundation
public import GatewayProtocol

/// Where a gateway lives and how far to trust the route to it.
public struct GatewayEndpoint: Sendable, Equatable {
    public var name: String
    public var url: String
    /// SHA-256 of the leaf certificate, 64 lowercase hex; when set, only that certificate is accepted.
    public var tlsFingerprint: String?
    /// Permits plain ws:// to a host that is not loopback.
    public var allowInsecure: Bool

    public init(name: String, url: String, tlsFingerprint: String? = nil, allowInsecure: Bool = false) {
        self.name = name
        self.url = url
        self.tlsFingerprint = tlsFingerprint
        self.allowInsecure = allowInsecure
    }
}

/// Credentials as the user configured them; the stored device token is looked up per attempt.
public struct GatewayCredentials: Sendable, Equatable {
    public var sharedToken: String?
    public var password: String?
    public var bootstrapToken: String?
    public init(sharedToken: String? = nil, password: String? = nil, bootstrapToken: String? = nil) {
        self.sharedToken = sharedToken
        self.password = password
        self.bootstrapToken = bootstrapToken
    }
}

/// How this node presents itself. Platform and family are pinned at pairing: never change them.
public struct SessionOptions: Sendable {
    public var displayName: String
    public var version: String
    public var modelIdentifier: String?
    public var locale: String?
    public var caps: [String] = ["talk", "voiceWake"]
    public var commands: [String] = []
    public var permissions: [String: Bool]? = nil
    public var operatorScopes: [String] = ["operator.read", "operator.write", "operator.talk"]
    /// `cli`/`cli` is accepted by every gateway version; `openclaw-linux`/`ui` only by the newest.
    public var operatorClientId: String = "cli"
    public var operatorClientMode: String = "cli"
    public var timing = ConnectionTiming()
    public var requestTimeoutMs: Int64 = 15_000
    public var maxMessageBytes: Int = 16 << 20
    public var pingIntervalSeconds: Int = 15
    /// Operator: resolve the default Talk target from `talk.config` after each connect (issue
    /// 26, D2) before reporting the session connected. Off: hello-ok's main session, as before.
    public var resolveTalkTarget = true
    /// Keep the shared gateway token/password in the store after both roles signed in with
    /// their device tokens (config `gateway.keepSharedSecret`). Off: they are removed.
    public var keepSharedSecret = false

    public static let platform = "linux"
    public static let deviceFamily = "Linux"

    public init(displayName: String, version: String) {
        self.displayName = displayName
        self.version = version
    }
}

/// What a session is doing, for `status`, the pairing progress and the log.
public struct SessionStatus: Sendable, Equatable, Codable, Error {
    public enum State: String, Sendable, Codable {
        case stopped, connecting, connected, pairing, waiting, paused
    }
    public var role: String
    public var gateway: String
    public var state: State
    /// One line: what is happening or what went wrong.
    public var detail: String
    public var requestId: String?
    public var nextStep: String?
    public var serverVersion: String?
    /// The session the node names by default: the resolved Talk target on the operator
    /// (TalkTarget), hello-ok's main session on the node.
    public var mainSessionKey: String?
    public var connectedAtMs: Int64?
    /// The problem code behind a waiting or paused state (`OPERATOR_ACCESS_DENIED`, …).
    public var code: String?
    /// The protocol the connected session speaks.
    public var protocolVersion: Int?
    /// What this session cannot do on this gateway (SessionLimits), one line each.
    public var limits: [String]?

    public init(role: String, gateway: String, state: State, detail: String) {
        self.role = role
        self.gateway = gateway
        self.state = state
        self.detail = detail
    }
}

/// Why a request did not get a successful response.
public enum GatewayRequestError: Error, Sendable, Equatable, CustomStringConvertible {
    case notConnected(String)
    case timedOut(method: String, ms: Int64)
    case failed(ErrorShape)
    case tooLarge(bytes: Int, limit: Int)
    case disconnected

    public var description: String {
        switch self {
        case .notConnected(let s): return "not connected to the gateway (\(s))"
        case .timedOut(let m, let ms): return "\(m) got no answer within \(formatSeconds(ms))"
        case .failed(let e): return e.description
        case .tooLarge(let b, let l): return "request of \(b) bytes exceeds the gateway's limit of \(l) bytes"
        case .disconnected: return "the connection dropped before the gateway answered"
        }
    }
}
