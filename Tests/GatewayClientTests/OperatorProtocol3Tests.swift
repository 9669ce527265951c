// Issue 26, item 1: on a gateway that speaks only protocol 3 the operator falls back to 3…3
// as the node does (one retry on a fresh socket after `protocol mismatch` naming 3), instead
// of pausing with "the gateway speaks protocol 3, this session speaks 4".

import Foundation
import GatewayClient
import GatewayProtocol
import LoopbackGateway
import Store
import Testing

@Suite struct OperatorProtocol3Tests {
    @Test(arguments: [LoopbackGateway.ProtocolMode.releasedV3Exact, .releasedV3])
    func `the operator gets a protocol-3 session: 4…4 first, then one 3…3 retry on a fresh socket`(mode: LoopbackGateway.ProtocolMode) async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true; $0.protocolMode = mode }
        let url = await g.url
        try h.addGateway(url, token: "shared-t")
        let op = h.session(.operator, url: url, credentials: GatewayCredentials(sharedToken: "shared-t"))
        await op.start()
        #expect(await eventually("operator connected") { await op.isConnected })
        #expect(await op.currentHello()?.protocolVersion == 3)
        let attempts = await g.connectAttempts().filter { $0.params["role"] == "operator" }
        try #require(attempts.count == 2, "\(attempts.map(\.params))")
        #expect(attempts[0].params["minProtocol"] == 4 && attempts[0].params["maxProtocol"] == 4,
                "the operator still offers exactly 4 first: a current gateway never sees 3")
        #expect(attempts[1].params["minProtocol"] == 3 && attempts[1].params["maxProtocol"] == 3)
        #expect(attempts[0].nonce != attempts[1].nonce && attempts[0].connectionId != attempts[1].connectionId,
                "a new socket and a new challenge")
        #expect(attempts[1].params["device"]?["nonce"]?.stringValue == attempts[1].nonce)
        // A request works on the v3 session: what the user says can become a turn.
        let ack = try await op.request("chat.send", params: ["sessionKey": "agent:main:main", "message": "hello",
                                                            "idempotencyKey": .string(UUID().uuidString)])
        #expect(ack["runId"]?.stringValue != nil, "\(ack)")
        #expect(h.statuses.count(.paused, role: "operator") == 0)
        await op.stop()
        await g.stop()
    }

    @Test func `on a current gateway the operator connects with 4…4 in one try`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true }
        let url = await g.url
        try h.addGateway(url, token: "shared-t")
        let op = h.session(.operator, url: url, credentials: GatewayCredentials(sharedToken: "shared-t"))
        await op.start()
        #expect(await eventually("operator connected") { await op.isConnected })
        #expect(await op.currentHello()?.protocolVersion == 4)
        let attempts = await g.connectAttempts()
        #expect(attempts.count == 1 && attempts[0].params["minProtocol"] == 4 && attempts[0].params["maxProtocol"] == 4)
        await op.stop()
        await g.stop()
    }
}
