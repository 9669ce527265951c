// Issue 26 against the loopback gateway: the shapes of protocol-drift-2026-12b.md D2 (the
// default Talk target from talk.config, the capability gate, the multi-agent owner rule), D4
// (closed talk.* schemas), D9 (OPERATOR_ACCESS_DENIED) and what a protocol-3 session says it
// lacks. D3 (deltas without `message`) is spoken end to end in TalkTests/TalkTargetTurnTests.

import Foundation
import GatewayClient
import GatewayProtocol
import LoopbackGateway
import Store
import Testing

@Suite struct Drift2IntegrationTests {
    func connectedOperator(_ h: Harness, _ g: LoopbackGateway) async throws -> GatewaySession {
        let url = await g.url
        try h.addGateway(url, token: "shared-t")
        let op = h.session(.operator, url: url, credentials: GatewayCredentials(sharedToken: "shared-t"))
        await op.start()
        #expect(await eventually("operator connected") { await op.currentStatus().state == .connected })
        return op
    }

    // MARK: D2

    @Test func `the operator resolves agent:<talk.agentId>:<mainKey> from talk.config before it reports connected`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway {
            $0.autoApprove = true
            $0.talkAgentId = " Work "
            $0.talkMainKey = "Desk"
            $0.capabilities = [TalkTarget.capability]
            $0.multiAgentTalk = true
        }
        let op = try await connectedOperator(h, g)
        let status = await op.currentStatus()
        #expect(status.mainSessionKey == "agent:work:desk", "the connected status already names the resolved target")
        #expect(await op.defaultSessionKey() == "agent:work:desk")
        #expect(try h.store.gateway(named: "lb")?.mainSessionKey == "agent:work:desk", "what send/history use offline")
        let target = try #require(await op.talkTarget()?.target)
        #expect(target.source == .talkConfig && target.requestFields == ["sessionKey": "agent:work:desk", "agentId": "work"])
        let asked = await g.requests(method: "talk.config")
        #expect(asked.count == 1 && asked[0].params == ["includeSecrets": false])
        #expect(status.limits == nil, "a protocol-4 gateway with a usable config: no limits")
        // The resolved fields pass the multi-agent owner rule and the closed schema; a bare main does not.
        let create: (JSONValue) async throws -> JSONValue = { extra in
            var p: [String: JSONValue] = ["mode": "transcription", "transport": "gateway-relay", "brain": "none"]
            for (k, v) in extra.objectValue ?? [:] { p[k] = v }
            return try await op.request("talk.session.create", params: .object(p))
        }
        #expect(try await create(.object(target.requestFields))["sessionId"]?.stringValue != nil)
        await #expect(throws: GatewayRequestError.self) { _ = try await create(["sessionKey": "main"]) }
        await op.stop()
        await g.stop()
    }

    @Test func `without talk.agentId the session defaults stay; without the capability agentId is never sent`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true; $0.mainSessionKey = "agent:home:main" }
        let op = try await connectedOperator(h, g)
        let target = try #require(await op.talkTarget()?.target)
        #expect(target.sessionKey == "agent:home:main" && target.source == .sessionDefaults)
        #expect(target.requestFields == ["sessionKey": "agent:home:main"], "no talk-session-target-v1: no agentId")
        // D4: the same create with agentId is what an older gateway's closed schema refuses.
        do {
            _ = try await op.request("talk.session.create", params: ["mode": "transcription", "transport": "gateway-relay", "brain": "none",
                                                                     "sessionKey": "agent:home:main", "agentId": "home"])
            Issue.record("agentId accepted without the capability")
        } catch GatewayRequestError.failed(let e) {
            #expect(e.code == "INVALID_REQUEST" && e.message.contains("unexpected property 'agentId'"), "\(e)")
        }
        await op.stop()
        await g.stop()
    }

    @Test func `a malformed talk.agentId is reported, and turns keep the gateway's main session`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true; $0.talkAgentId = "Bad Agent!" }
        let op = try await connectedOperator(h, g)
        guard case .invalid(let why)? = await op.talkTarget() else { Issue.record("resolved"); return }
        #expect(why.contains("bad agent!"))
        let status = await op.currentStatus()
        #expect(status.mainSessionKey == "agent:main:main")
        #expect(status.limits?.first?.hasPrefix("Talk target: talk.agentId") == true, "\(String(describing: status.limits))")
        await op.stop()
        await g.stop()
    }

    @Test func `D4: the closed talk.config schema refuses a param it does not know`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true }
        let op = try await connectedOperator(h, g)
        do {
            _ = try await op.request("talk.config", params: ["includeSecrets": false, "capabilities": ["gateway-control-v1"]])
            Issue.record("an unknown param was accepted")
        } catch GatewayRequestError.failed(let e) {
            #expect(e.code == "INVALID_REQUEST" && e.message == "invalid talk.config params: at root: unexpected property 'capabilities'")
        }
        await op.stop()
        await g.stop()
    }

    // MARK: D9

    @Test func `OPERATOR_ACCESS_DENIED is retried with backoff and the status says what the gateway said`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true }
        await g.denyOperatorAccess(connects: 3)
        let url = await g.url
        try h.addGateway(url, token: "shared-t")
        let op = h.session(.operator, url: url, credentials: GatewayCredentials(sharedToken: "shared-t"))
        await op.start()
        #expect(await eventually("denied and waiting") { await op.currentStatus().code == "OPERATOR_ACCESS_DENIED" })
        let waiting = await op.currentStatus()
        #expect(waiting.state == .waiting)
        #expect(waiting.detail.hasPrefix("the gateway's access policy grants this device nothing yet (OPERATOR_ACCESS_DENIED); retrying in"),
                "\(waiting.detail)")
        #expect(waiting.nextStep?.contains("access policy") == true)
        #expect(await eventually("granted later, connected without any action") { await op.currentStatus().state == .connected })
        #expect(h.statuses.count(.paused, role: "operator") == 0, "never paused")
        #expect(await op.currentStatus().code == nil)
        let attempts = await g.connectAttempts().filter { $0.params["role"] == "operator" }
        #expect(attempts.count == 4)
        await op.stop()
        await g.stop()
    }

    // MARK: protocol 3 (item 1)

    @Test func `a protocol-3 operator session says what it lacks`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true; $0.protocolMode = .releasedV3 }
        let op = try await connectedOperator(h, g)
        let s = await op.currentStatus()
        #expect(s.protocolVersion == 3 && s.detail.hasSuffix("(protocol 3, degraded)"))
        let limits = s.limits ?? []
        #expect(limits.contains { $0.contains("no deltaText") } && limits.contains { $0.contains("agentId") }, "\(limits)")
        #expect(!limits.contains { $0.contains("voice notes") }, "the loopback still offers the relay")
        await op.stop()
        await g.stop()
    }
}
