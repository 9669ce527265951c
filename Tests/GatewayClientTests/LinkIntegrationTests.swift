// Keeping the link up: tick silence, restarts, drops, node.invoke routing, and bad frames.

import Foundation
import GatewayClient
import GatewayCrypto
import GatewayProtocol
import LoopbackGateway
import Store
import Testing

@Suite struct LinkIntegrationTests {
    /// True once the node is connected again after its first connection.
    func reconnected(_ node: GatewaySession, _ h: Harness, _ what: String, timeout: Duration = .seconds(10)) async -> Bool {
        await eventually(what, timeout: timeout) {
            let connected = await node.isConnected
            return connected && h.statuses.count(.connected, role: "node") >= 2
        }
    }

    /// A connected node session against an auto-approving gateway.
    func connectedNode(_ h: Harness, _ g: LoopbackGateway, commands: NodeCommandRegistry? = nil,
                       onEvent: @escaping @Sendable (EventFrame) -> Void = { _ in }) async throws -> GatewaySession {
        let url = await g.url
        try h.addGateway(url, token: "shared-t")
        let node = h.session(.node, url: url, credentials: GatewayCredentials(sharedToken: "shared-t"), commands: commands, onEvent: onEvent)
        await node.start()
        #expect(await eventually("node connected") { await node.isConnected })
        return node
    }

    @Test func `tick silence closes with 4000 and reconnects`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true; $0.tickIntervalMs = 150 }
        let node = try await connectedNode(h, g)
        await g.stallTicks(true)
        #expect(await eventually("tick timeout noticed") { h.log.contains("tick every") })
        await g.stallTicks(false)
        #expect(await reconnected(node, h, "connected again"))
        await node.stop()
        await g.stop()
    }

    @Test func `a gateway restart is followed by a reconnect`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true }
        let node = try await connectedNode(h, g)
        try await g.restart(downForMs: 300)
        #expect(await eventually("restart noticed") { h.log.contains("gateway restarting") })
        #expect(await reconnected(node, h, "connected after restart"))
        await node.stop()
        await g.stop()
    }

    @Test func `an abrupt drop without a close frame is followed by a reconnect`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true }
        let node = try await connectedNode(h, g)
        await g.dropAll()
        #expect(await reconnected(node, h, "connected after drop"))
        await node.stop()
        await g.stop()
    }

    @Test func `node invokes reach the registry and every result carries the node id`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true }
        let commands = NodeCommandRegistry()
        commands.register("test.echo") { _, params in ["echo": params] }
        commands.registerUnavailable("talk.ptt.start", reason: "push-to-talk is not implemented in this build yet")
        let node = try await connectedNode(h, g, commands: commands)

        let echo = try await g.invoke(command: "test.echo", paramsJSON: #"{"a":1}"#)
        #expect(echo.ok && echo.nodeId == h.identity.deviceId)
        #expect(echo.payload == ["echo": ["a": 1]])

        let noParams = try await g.invoke(command: "test.echo", paramsJSON: nil)  // sent as "paramsJSON": null
        #expect(noParams.ok && noParams.payload == ["echo": [:]])

        let unknown = try await g.invoke(command: "camera.snap")
        #expect(!unknown.ok && unknown.error?.code == "INVALID_REQUEST")
        #expect(unknown.error?.message == "INVALID_REQUEST: unknown command \"camera.snap\"")
        #expect(unknown.nodeId == h.identity.deviceId)

        // Issue 11, item 8: an empty command was never answered (the gateway waited for its timeout).
        let empty = try await g.invoke(command: "", wait: .seconds(5))
        #expect(!empty.ok && empty.error?.code == "INVALID_REQUEST", "\(empty)")
        #expect(empty.error?.message.contains("without a command") == true)

        let malformed = try await g.invoke(command: "test.echo", paramsJSON: "{oops")
        #expect(!malformed.ok && malformed.error?.code == "INVALID_REQUEST")
        #expect(malformed.error?.message.contains("paramsJSON") == true)

        let ptt = try await g.invoke(command: "talk.ptt.start", paramsJSON: "{}")
        #expect(!ptt.ok && ptt.error?.code == "UNAVAILABLE")
        #expect(ptt.error?.message.hasPrefix("UNAVAILABLE: ") == true)
        await node.stop()
        await g.stop()
    }

    @Test(arguments: [false, true])
    func `node invoke cancel stops a running command`(legacyKey: Bool) async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true }
        let cancelled = Locked(false)
        let commands = NodeCommandRegistry()
        commands.register("test.slow") { _, _ in
            do { try await Task.sleep(for: .seconds(30)) } catch { cancelled.withLock { $0 = true }; throw error }
            return [:]
        }
        let node = try await connectedNode(h, g, commands: commands)
        let invoke = Task { try await g.invoke(command: "test.slow", wait: .seconds(10)) }
        #expect(await eventually("invoke running") { await g.requests(method: "node.invoke.result").isEmpty && h.log.all.count > 0 })
        try await Task.sleep(for: .milliseconds(100))
        // The loopback records the invoke id only on its side; cancel every running one.
        let id = try #require(await g.lastInvokeId())
        await g.cancelInvoke(id, legacyKey: legacyKey)
        #expect(await eventually("handler cancelled") { cancelled.withLock { $0 } })
        let result = try await invoke.value
        #expect(!result.ok && result.error?.code == "UNAVAILABLE")
        await node.stop()
        await g.stop()
    }

    @Test func `a command that outlives its timeout answers UNAVAILABLE`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true }
        let commands = NodeCommandRegistry()
        commands.register("test.slow") { _, _ in try await Task.sleep(for: .seconds(30)); return [:] }
        let node = try await connectedNode(h, g, commands: commands)
        let result = try await g.invoke(command: "test.slow", timeoutMs: 200)
        #expect(!result.ok && result.error?.message == "UNAVAILABLE: node invoke timed out")
        await node.stop()
        await g.stop()
    }

    @Test func `malformed, unknown and out-of-order frames are logged and the session carries on`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true }
        let events = Locked<[String]>([])
        let node = try await connectedNode(h, g) { e in events.withLock { $0.append(e.event) } }
        await g.sendRaw("{not json")
        await g.sendRaw(#"{"type":"wat","id":"1"}"#)
        await g.sendRaw(#"{"type":"res","id":"no-such-request","ok":true,"payload":{}}"#)
        await g.sendRaw(#"{"type":"event"}"#)
        await g.sendRaw("[1,2,3]")
        await g.sendRawBinary([0xff, 0xfe, 0x00, 0x7b])
        await g.sendRaw(#"{"type":"event","event":"node.invoke.request","payload":{"nodeId":"x"}}"#)
        await g.sendRaw(#"{"type":"event","event":"future.event","payload":{"x":1},"unknownTop":true}"#)
        #expect(await eventually("malformed frames logged") {
            h.log.all.filter { $0.contains("malformed frame") }.count >= 5
        })
        #expect(h.log.contains("node.invoke.request without an id; ignored"))
        #expect(await eventually("unknown event passed on, not dropped") { events.withLock { $0.contains("future.event") } })
        #expect(await node.isConnected)
        #expect(h.statuses.count(.connected, role: "node") == 1, "no reconnect was needed")
        // Still fully working: an invoke round-trips.
        let r = try await g.invoke(command: "anything")
        #expect(r.error?.code == "INVALID_REQUEST")
        await node.stop()
        await g.stop()
    }

    @Test func `an oversized frame closes the socket and the session reconnects`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true }
        let node = try await connectedNode(h, g)
        let big = #"{"type":"event","event":"x","payload":""# + String(repeating: "a", count: 17 << 20) + #""}"#
        await g.sendRaw(big)
        #expect(await eventually("too large noticed", timeout: .seconds(20)) { h.log.contains("too large") })
        #expect(await reconnected(node, h, "connected again", timeout: .seconds(20)))
        await node.stop()
        await g.stop()
    }

    @Test func `binary frames from the gateway work like text frames`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true; $0.binaryFrames = true }
        let commands = NodeCommandRegistry()
        commands.register("test.echo") { _, p in p }
        let node = try await connectedNode(h, g, commands: commands)
        let r = try await g.invoke(command: "test.echo", paramsJSON: #"{"b":true}"#)
        #expect(r.ok && r.payload == ["b": true])
        await node.stop()
        await g.stop()
    }

    @Test func `the operator session sends chat and receives the streamed echo`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true }
        let url = await g.url
        try h.addGateway(url, token: "shared-t")
        let chats = Locked<[ChatEvent]>([])
        let op = h.session(.operator, url: url, credentials: GatewayCredentials(sharedToken: "shared-t")) { e in
            if e.event == "chat", let c = ChatEvent(payload: e.payload) { chats.withLock { $0.append(c) } }
        }
        await op.start()
        #expect(await eventually("operator connected") { await op.isConnected })
        let key = UUID().uuidString
        let params = try JSONValue(encoding: ChatSendParams(sessionKey: "agent:main:main", message: "testing one two", idempotencyKey: key))
        let ack = try await op.request("chat.send", params: params)
        #expect(ack["runId"]?.stringValue == key)
        #expect(await eventually("final chat event") { chats.withLock { $0.contains { $0.state == .final } } })
        let all = chats.withLock { $0 }
        let streamed = all.filter { $0.state == .delta }.compactMap(\.deltaText).joined()
        #expect(streamed == "You said: testing one two")
        #expect(all.last?.messageText == "You said: testing one two")
        // The same idempotency key again: same answer, one message at the gateway.
        let again = try await op.request("chat.send", params: params)
        #expect(again["runId"]?.stringValue == key)
        let history = try await op.request("chat.history", params: ["sessionKey": "agent:main:main"])
        #expect(history["messages"]?.arrayValue?.filter { $0["role"]?.stringValue == "user" }.count == 1)
        await op.stop()
        await g.stop()
    }
}
