// Which chat session a Talk request names when the user named none, resolved as the official
// room node resolves it (issue 26, D2: esp-openclaw-node PR #33, `resolve_default_session_key`):
// `talk.config {includeSecrets:false}` → `talk.agentId` and `session.mainKey`, trimmed and
// lowercased → `agent:<agentId>:<mainKey or "main">`. A gateway with no `talk.agentId` keeps its
// own default, hello-ok's `snapshot.sessionDefaults.mainSessionKey` (else the bare "main"). A
// malformed config is an error, never a guess: on a multi-agent gateway a guess talks to the
// wrong agent. `agentId` goes on the wire only where the gateway advertised
// `talk-session-target-v1` (D2, D4: closed schemas reject unknown params). A pure value: the
// operator session resolves it once per connect and a later realtime-Talk feature reuses it.

import Foundation
public import GatewayProtocol

public struct TalkTarget: Sendable, Equatable {
    /// Where the key came from.
    public enum Source: String, Sendable, Equatable {
        /// `talk.agentId` (+ `session.mainKey`) from talk.config.
        case talkConfig
        /// hello-ok's `snapshot.sessionDefaults.mainSessionKey`.
        case sessionDefaults
        /// Nothing named one: the bare "main", for the gateway to resolve or reject.
        case bare
    }

    /// The hello-ok capability that lets talk.* requests carry `agentId`.
    public static let capability = "talk-session-target-v1"

    public var sessionKey: String
    /// The agent that owns the key: `talk.agentId`, or the `<id>` of an `agent:<id>:<rest>` key.
    public var agentId: String?
    public var source: Source
    /// Whether the gateway advertised `talk-session-target-v1`.
    public var gatewayTakesAgentId: Bool

    public init(sessionKey: String, agentId: String?, source: Source, gatewayTakesAgentId: Bool) {
        self.sessionKey = sessionKey
        self.agentId = agentId
        self.source = source
        self.gatewayTakesAgentId = gatewayTakesAgentId
    }

    /// The target fields of a talk.* request that names a session (realtime create, close…):
    /// `sessionKey`, plus `agentId` only when the gateway takes it. Without the capability the
    /// agent-scoped key alone identifies the agent; nothing is downgraded or retried.
    public var requestFields: [String: JSONValue] {
        var o: [String: JSONValue] = ["sessionKey": .string(sessionKey)]
        if gatewayTakesAgentId, let agentId { o["agentId"] = .string(agentId) }
        return o
    }

    /// `[a-z0-9][a-z0-9_-]{0,63}`, the room node's (and the gateway's) agent id rule.
    public static func isAgentId(_ s: String) -> Bool {
        let b = Array(s.utf8)
        guard (1...64).contains(b.count) else { return false }
        func alnum(_ c: UInt8) -> Bool { (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) }
        return alnum(b[0]) && b.dropFirst().allSatisfy { alnum($0) || $0 == 0x5f || $0 == 0x2d }
    }

    /// The owner named by an `agent:<id>:<nonempty rest>` key, if the key is one.
    public static func owner(of key: String) -> String? {
        let parts = key.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "agent", isAgentId(String(parts[1])), !parts[2].isEmpty else { return nil }
        return String(parts[1])
    }

    /// JavaScript's `String.prototype.trim` set: Unicode spaces, line terminators and U+FEFF, not U+0085.
    static let jsWhitespace: CharacterSet = {
        var s = CharacterSet.whitespacesAndNewlines
        s.remove(Unicode.Scalar(0x85)!)
        s.insert(Unicode.Scalar(0xFEFF)!)
        return s
    }()

    static func normalise(_ s: String) -> String { s.trimmingCharacters(in: jsWhitespace).lowercased() }

    /// The longest key the room node sends.
    public static let maxKeyBytes = 256

    /// - Parameters:
    ///   - talkConfig: the result of `talk.config {includeSecrets:false}`; nil when the gateway
    ///     has no such method or refused it (then the session defaults decide).
    ///   - mainSessionKey: hello-ok's `snapshot.sessionDefaults.mainSessionKey`.
    ///   - capabilities: hello-ok's `features.capabilities`.
    public static func resolve(talkConfig: JSONValue?, mainSessionKey: String?, capabilities: [String]) -> TalkTargetResolution {
        let takes = capabilities.contains(capability)
        let config = talkConfig?["config"]
        var agent = ""
        switch config?["talk"]?["agentId"] {
        case nil, .null?: break
        case .string(let s)?: agent = normalise(s)
        case let other?: return .invalid("talk.agentId is \(other), not a string; set it to an agent id on the gateway")
        }
        if agent.isEmpty {
            let main = mainSessionKey.map { $0.trimmingCharacters(in: jsWhitespace) } ?? ""
            if main.isEmpty { return .resolved(TalkTarget(sessionKey: "main", agentId: nil, source: .bare, gatewayTakesAgentId: takes)) }
            return .resolved(TalkTarget(sessionKey: main, agentId: owner(of: main), source: .sessionDefaults, gatewayTakesAgentId: takes))
        }
        guard isAgentId(agent) else {
            return .invalid("talk.agentId \"\(agent.prefix(80))\" is not an agent id ([a-z0-9][a-z0-9_-]{0,63}); fix it in the gateway's config")
        }
        var mainKey = "main"
        switch config?["session"]?["mainKey"] {
        case nil, .null?: break
        case .string(let s)?: let k = normalise(s); if !k.isEmpty { mainKey = k }
        case let other?: return .invalid("session.mainKey is \(other), not a string; fix it in the gateway's config")
        }
        let key = "agent:\(agent):\(mainKey)"
        guard key.utf8.count <= maxKeyBytes else {
            return .invalid("the session key from talk.agentId and session.mainKey is \(key.utf8.count) bytes, over \(maxKeyBytes)")
        }
        return .resolved(TalkTarget(sessionKey: key, agentId: agent, source: .talkConfig, gatewayTakesAgentId: takes))
    }
}

/// The default Talk target, or why the gateway's config gives none.
public enum TalkTargetResolution: Sendable, Equatable {
    case resolved(TalkTarget)
    /// A malformed talk config: Talk requests that need a target must fail visibly, not guess.
    case invalid(String)

    public var target: TalkTarget? {
        if case .resolved(let t) = self { return t }
        return nil
    }
}
