// The default Talk target as the room node resolves it (issue 26, D2), input by input: the
// talk.config shapes, the session-defaults fallback, malformed configs, the agentId gate; and
// the lines SessionLimits shows for a protocol-3 gateway.

import GatewayClient
import GatewayProtocol
import Testing

private func config(agent: JSONValue?, mainKey: JSONValue? = nil) -> JSONValue {
    var talk: [String: JSONValue] = ["provider": "x"]
    if let agent { talk["agentId"] = agent }
    var session: [String: JSONValue] = [:]
    if let mainKey { session["mainKey"] = mainKey }
    return ["config": ["talk": .object(talk), "session": .object(session)]]
}

private let cap = [TalkTarget.capability]

@Suite struct TalkTargetTests {
    @Test func `talk.agentId and session.mainKey make agent:<id>:<key>, trimmed and lowercased`() {
        let r = TalkTarget.resolve(talkConfig: config(agent: " Work\u{3000}", mainKey: "\u{FEFF}Desk\n"), mainSessionKey: "agent:main:main",
                                   capabilities: [])
        #expect(r == .resolved(TalkTarget(sessionKey: "agent:work:desk", agentId: "work", source: .talkConfig, gatewayTakesAgentId: false)))
    }

    @Test func `no mainKey, or a blank one, is "main"`() {
        for key: JSONValue? in [nil, .null, "   "] {
            #expect(TalkTarget.resolve(talkConfig: config(agent: "guide", mainKey: key), mainSessionKey: nil, capabilities: [])
                .target?.sessionKey == "agent:guide:main", "\(String(describing: key))")
        }
    }

    @Test func `an empty agentId falls back to the session defaults, else the bare main`() {
        for agent: JSONValue? in [nil, .null, "", " \t "] {
            let r = TalkTarget.resolve(talkConfig: config(agent: agent), mainSessionKey: "agent:work:main", capabilities: cap)
            #expect(r == .resolved(TalkTarget(sessionKey: "agent:work:main", agentId: "work", source: .sessionDefaults, gatewayTakesAgentId: true)))
        }
        #expect(TalkTarget.resolve(talkConfig: nil, mainSessionKey: "agent:main:main", capabilities: []).target?.source == .sessionDefaults)
        let bare = TalkTarget.resolve(talkConfig: nil, mainSessionKey: nil, capabilities: cap)
        #expect(bare == .resolved(TalkTarget(sessionKey: "main", agentId: nil, source: .bare, gatewayTakesAgentId: true)))
        #expect(bare.target?.requestFields == ["sessionKey": "main"], "no owner to name")
        // An opaque default key names no agent and gets no synthetic prefix.
        #expect(TalkTarget.resolve(talkConfig: nil, mainSessionKey: "global", capabilities: cap).target?.requestFields == ["sessionKey": "global"])
    }

    @Test(arguments: ["-work", "work!", "wörk", "a b", String(repeating: "a", count: 65)])
    func `a malformed agentId is an error, never a guess`(agent: String) {
        guard case .invalid(let why) = TalkTarget.resolve(talkConfig: config(agent: .string(agent)), mainSessionKey: "agent:main:main",
                                                          capabilities: cap) else {
            Issue.record("\(agent) resolved"); return
        }
        #expect(why.contains("talk.agentId") && why.contains("[a-z0-9][a-z0-9_-]{0,63}"), "\(why)")
    }

    @Test func `wrong types and an overlong key are errors too`() {
        #expect(TalkTarget.resolve(talkConfig: config(agent: 7), mainSessionKey: nil, capabilities: []).target == nil)
        #expect(TalkTarget.resolve(talkConfig: config(agent: "work", mainKey: ["x"]), mainSessionKey: nil, capabilities: []).target == nil)
        let long = String(repeating: "k", count: 250)
        guard case .invalid(let why) = TalkTarget.resolve(talkConfig: config(agent: "work", mainKey: .string(long)), mainSessionKey: nil,
                                                          capabilities: []) else { Issue.record("resolved"); return }
        #expect(why.contains("256"))
        // 64 characters is the longest agent id.
        let id64 = String(repeating: "a", count: 64)
        #expect(TalkTarget.resolve(talkConfig: config(agent: .string(id64)), mainSessionKey: nil, capabilities: []).target?.agentId == id64)
    }

    @Test func `agentId goes on the wire only with talk-session-target-v1`() throws {
        let with = try #require(TalkTarget.resolve(talkConfig: config(agent: "work"), mainSessionKey: nil, capabilities: cap + ["x"]).target)
        #expect(with.requestFields == ["sessionKey": "agent:work:main", "agentId": "work"])
        let without = try #require(TalkTarget.resolve(talkConfig: config(agent: "work"), mainSessionKey: nil, capabilities: ["x"]).target)
        #expect(without.requestFields == ["sessionKey": "agent:work:main"])
    }

    @Test func `agent ids and owners`() {
        #expect(TalkTarget.isAgentId("a") && TalkTarget.isAgentId("0_-x") && !TalkTarget.isAgentId("_a") && !TalkTarget.isAgentId("A"))
        #expect(TalkTarget.owner(of: "agent:work:main") == "work")
        #expect(TalkTarget.owner(of: "agent:work:") == nil && TalkTarget.owner(of: "main") == nil && TalkTarget.owner(of: "agent:W:x") == nil)
        #expect(TalkTarget.owner(of: "agent:work:sub:key") == "work")
    }
}

@Suite struct SessionLimitsTests {
    func hello(_ proto: Int, methods: [String] = [], capabilities: [String] = []) -> HelloOk {
        HelloOk(payload: ["type": "hello-ok", "protocol": .number(Double(proto)),
                          "features": ["methods": .array(methods.map { .string($0) }), "capabilities": .array(capabilities.map { .string($0) })]])!
    }

    @Test func `a protocol-4 gateway with a usable config has no limits`() {
        #expect(SessionLimits.lines(role: .operator, hello: hello(4), target: .resolved(TalkTarget(sessionKey: "main", agentId: nil, source: .bare,
                                                                                                gatewayTakesAgentId: false))).isEmpty)
        #expect(SessionLimits.lines(role: .node, hello: hello(4), target: nil).isEmpty)
    }

    @Test func `protocol 3 says what is lost, per role and per missing method`() {
        let op = SessionLimits.lines(role: .operator, hello: hello(3, methods: ["chat.send", "talk.config"]), target: nil)
        #expect(op.count == 4, "\(op)")
        #expect(op.allSatisfy { $0.hasPrefix("protocol 3 gateway: ") })
        #expect(op.contains { $0.contains("no deltaText") } && op.contains { $0.contains("agentId") })
        #expect(op.contains { $0.contains("voice notes") } && op.contains { $0.contains("espeak-ng") })
        #expect(!op.contains { $0.contains("no talk.config") })
        // Methods not stated: nothing is known to be missing; the capability removes its line.
        #expect(SessionLimits.lines(role: .operator, hello: hello(3, capabilities: cap), target: nil).count == 1)
        let node = SessionLimits.lines(role: .node, hello: hello(3), target: nil)
        #expect(node.count == 1 && node[0].contains("plugin-owned node commands"))
    }

    @Test func `a malformed Talk config is shown on any protocol`() {
        let lines = SessionLimits.lines(role: .operator, hello: hello(4), target: .invalid("talk.agentId \"-x\" is not an agent id"))
        #expect(lines == ["Talk target: talk.agentId \"-x\" is not an agent id; turns go to the gateway's main session meanwhile"])
    }
}
