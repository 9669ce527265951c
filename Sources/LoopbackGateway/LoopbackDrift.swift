// The loopback gateway's shapes from protocol-drift-2026-12b.md (issue 26): hello-ok's
// `features.capabilities` (D2), closed talk.* schemas that refuse params an older gateway does
// not know (D4: "invalid talk.client.create params: at root: unexpected property …"), the
// multi-agent owner rule for a bare "main" (D2), and OPERATOR_ACCESS_DENIED (D9).

import Foundation
import GatewayProtocol

extension LoopbackGateway {
    /// Refuses the next `connects` operator connects that would otherwise succeed with
    /// OPERATOR_ACCESS_DENIED: authenticated, but the access policy grants nothing yet (D9).
    public func denyOperatorAccess(connects: Int) { deniedOperatorConnects = connects }

    func accessPolicyRefusal(role: String) -> ErrorShape? {
        guard role == "operator", deniedOperatorConnects > 0 else { return nil }
        deniedOperatorConnects -= 1
        return ErrorShape(code: "INVALID_REQUEST", message: "operator access denied by the gateway's access policy",
                          details: ["code": "OPERATOR_ACCESS_DENIED"])
    }

    var features: JSONValue {
        var f: [String: JSONValue] = [
            "methods": .array(advertisedMethods.map { .string($0) }),
            "events": ["tick", "chat", "node.invoke.request", "voicewake.changed", "voicewake.routing.changed"]]
        if !configuration.capabilities.isEmpty { f["capabilities"] = .array(configuration.capabilities.map { .string($0) }) }
        return .object(f)
    }

    var takesAgentId: Bool { configuration.capabilities.contains("talk-session-target-v1") }

    /// The keys each talk.* method's schema allows at its root (`additionalProperties:false`);
    /// `agentId` only on a gateway that advertises `talk-session-target-v1`.
    func allowedTalkKeys(_ method: String) -> Set<String>? {
        switch method {
        case "talk.config": return ["includeSecrets"]
        case "talk.session.create":
            let base: Set<String> = ["sessionKey", "spawnedBy", "provider", "model", "voice", "mode", "transport", "brain", "language"]
            return takesAgentId ? base.union(["agentId"]) : base
        default: return nil
        }
    }

    /// The closed-schema answer for params with a key the method does not know, as the gateway's
    /// validator words it; nil when the params fit.
    func schemaRefusal(_ method: String, _ p: JSONValue) -> ErrorShape? {
        guard let allowed = allowedTalkKeys(method) else { return nil }
        guard let keys = p.objectValue?.keys else {
            return ErrorShape(code: "INVALID_REQUEST", message: "invalid \(method) params: at root: must be object")
        }
        guard let extra = keys.sorted().first(where: { !allowed.contains($0) }) else { return nil }
        return ErrorShape(code: "INVALID_REQUEST", message: "invalid \(method) params: at root: unexpected property '\(extra)'")
    }

    /// D2: on a multi-agent gateway a talk.* key that is the bare "main" names no owner.
    func ownerRefusal(_ p: JSONValue) -> ErrorShape? {
        guard configuration.multiAgentTalk, let key = p["sessionKey"]?.stringValue,
              key.trimmingCharacters(in: .whitespaces).lowercased() == "main", p["agentId"]?.stringValue == nil else { return nil }
        return ErrorShape(code: "INVALID_REQUEST",
                          message: "talk session \"main\" has no explicit owner on a multi-agent gateway; set talk.agentId or send an agent-prefixed sessionKey")
    }

    /// `talk.config`'s `config` object: Talk settings plus `session.mainKey`.
    var talkConfigPayload: JSONValue {
        var talk: [String: JSONValue] = ["interruptOnSpeech": true, "provider": "loopback-espeak"]
        if let ms = configuration.silenceTimeoutMs { talk["silenceTimeoutMs"] = .number(Double(ms)) }
        if let agent = configuration.talkAgentId { talk["agentId"] = .string(agent) }
        return ["config": ["talk": .object(talk), "session": ["mainKey": .string(configuration.talkMainKey)]]]
    }
}
