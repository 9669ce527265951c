// What a connected session cannot do on this gateway, as lines for `status` and `doctor`
// (issue 26): a protocol-3 gateway is served in a degraded mode instead of refused, and the
// user is told what that mode lacks; a malformed Talk target config is said too. Pure.

public import GatewayProtocol

public enum SessionLimits {
    /// The lines for one role's hello-ok (and, for the operator, its Talk target). Empty on a
    /// protocol-4 gateway with a usable config.
    public static func lines(role: SessionRole, hello: HelloOk, target: TalkTargetResolution?) -> [String] {
        var out: [String] = []
        if hello.protocolVersion == 3 {
            switch role {
            case .operator:
                out.append("protocol 3 gateway: replies are read from whole-message snapshots (it sends no deltaText)")
                if !hello.capabilities.contains(TalkTarget.capability) {
                    out.append("protocol 3 gateway: no talk-session-target-v1, so Talk requests never carry agentId (agent-scoped keys only)")
                }
                // An empty list means "not stated": then nothing is known to be missing.
                if !hello.methods.isEmpty {
                    if !hello.methods.contains("talk.session.create") {
                        out.append("protocol 3 gateway: no transcription relay (talk.session.create), so spoken turns go as voice notes")
                    }
                    if !hello.methods.contains("talk.speak") {
                        out.append("protocol 3 gateway: no talk.speak, so replies are spoken by espeak-ng on this device")
                    }
                    if !hello.methods.contains("talk.config") {
                        out.append("protocol 3 gateway: no talk.config, so the gateway's Talk settings (silence timeout, talk.agentId) are not read")
                    }
                }
            case .node:
                out.append("protocol 3 gateway: it withholds plugin-owned node commands, and invokes name no session (turns go to the current one)")
            }
        }
        if role == .operator, case .invalid(let why)? = target {
            out.append("Talk target: \(why); turns go to the gateway's main session meanwhile")
        }
        return out
    }
}
