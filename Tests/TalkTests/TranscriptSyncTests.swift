// TranscriptSync: chat.history payloads of every shape we have seen parse into cache rows, and
// a refresh against the loopback gateway caches the user turn and the echoed answer.

import ClawvoiceTesting
import Foundation
import GatewayClient
import GatewayProtocol
import LoopbackGateway
import Store
import Talk
import Testing

/// A loopback gateway and an operator session to it; no audio.
private struct HistoryRig {
    let gateway: LoopbackGateway
    let session: GatewaySession
    let store: ClawStore
    let dir: String

    static func make() async throws -> HistoryRig {
        var gc = LoopbackGateway.Configuration()
        gc.autoApprove = true
        gc.auth = .token("t")
        gc.echoDeltaDelayMs = 5
        let g = LoopbackGateway(configuration: gc)
        try await g.start()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cv-history-\(UUID().uuidString.prefix(8))").path
        let store = try ClawStore(directory: dir)
        let (identity, instanceId) = try store.loadOrCreateIdentity()
        let url = await g.url
        try store.upsertGateway(GatewayRecord(name: "lb", url: url, sharedToken: "t", isActive: true, addedAtMs: 0))
        let session = GatewaySession(role: .operator, endpoint: GatewayEndpoint(name: "lb", url: url),
                                     credentials: GatewayCredentials(sharedToken: "t"), identity: identity, instanceId: instanceId,
                                     store: store, options: SessionOptions(displayName: "history test", version: "test"), log: .silent)
        await session.start()
        let status = await session.waitUntilSettled(timeout: .seconds(10))
        guard status.state == .connected else { throw TestFailure("operator did not connect: \(status.detail)") }
        return HistoryRig(gateway: g, session: session, store: store, dir: dir)
    }

    /// Sends `message` with chat.send and waits until the echo's answer is in the gateway's history.
    func converse(_ message: String, sessionKey: String = "agent:main:main") async throws {
        _ = try await session.request(GatewayMethod.chatSend, params: [
            "sessionKey": .string(sessionKey), "message": .string(message), "idempotencyKey": .string(UUID().uuidString.lowercased()),
        ], timeoutMs: 5_000)
        let deadline = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < deadline {
            let h = try await session.request(GatewayMethod.chatHistory, params: ["sessionKey": .string(sessionKey)], timeoutMs: 5_000)
            if h["messages"]?.arrayValue?.last?["role"]?.stringValue == "assistant" { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw TestFailure("the echo never answered \(message)")
    }

    func shutdown() async {
        await session.stop()
        await gateway.stop()
        try? FileManager.default.removeItem(atPath: dir)
    }
}

@Suite struct `Transcript sync` {
    @Test func `a refresh caches the user turn and the echoed answer from chat.history`() async throws {
        let rig = try await HistoryRig.make()
        defer { Task { await rig.shutdown() } }
        try await rig.converse("what time is it")
        let sync = TranscriptSync(store: rig.store, gateway: "lb", channel: rig.session, log: .silent, now: { 42_000 })
        let messages = try await sync.refresh(sessionKey: "agent:main:main")
        #expect(messages.map(\.role) == ["user", "assistant"])
        #expect(messages.map(\.text) == ["what time is it", "You said: what time is it"])
        #expect(messages[0].idempotencyKey != nil && messages[1].runId == messages[0].idempotencyKey,
                "the loopback's runId is the turn's idempotency key")
        #expect(messages.allSatisfy { ($0.timestampMs ?? 0) > 1_600_000_000_000 }, "millisecond timestamps")
        #expect(messages.map(\.messageId) == ["agent:main:main#0", "agent:main:main#1"], "the loopback sends no ids: synthetic ones")
        #expect(try rig.store.cachedMessages(gateway: "lb", sessionKey: "agent:main:main") == messages)
        #expect(try rig.store.cachedSession(gateway: "lb", sessionKey: "agent:main:main")?.refreshedAtMs == 42_000)

        // The request was the spec's: the session and a page of 100.
        let request = try #require(await rig.gateway.requests(method: "chat.history").last)
        #expect(request.params?["limit"]?.intValue == 100)
        #expect(request.params?["sessionKey"]?.stringValue == "agent:main:main")

        // A second turn: the refresh replaces the page.
        try await rig.converse("and now")
        let again = try await sync.refresh(sessionKey: "agent:main:main")
        #expect(again.count == 4 && again.last?.text == "You said: and now")
        #expect(await sync.lastAssistantMessage(sessionKey: "agent:main:main")?.text == "You said: and now")
    }

    @Test func `a message missing from the cache is found after a refresh; an unknown one is nil`() async throws {
        let rig = try await HistoryRig.make()
        defer { Task { await rig.shutdown() } }
        try await rig.converse("first", sessionKey: "agent:main:side")
        let sync = TranscriptSync(store: rig.store, gateway: "lb", channel: rig.session, log: .silent)
        // The synthetic id names its session, so the lookup refreshes that one.
        let hit = try #require(await sync.findMessage(id: "agent:main:side#1", sessionKey: "agent:main:main"))
        #expect(hit.sessionKey == "agent:main:side" && hit.message.text == "You said: first")
        #expect(await sync.findMessage(id: "no-such-id", sessionKey: "agent:main:main") == nil)
    }

    @Test func `a failed refresh throws and keeps the cache as it was`() async throws {
        let rig = try await HistoryRig.make()
        try await rig.converse("keep me")
        let sync = TranscriptSync(store: rig.store, gateway: "lb", channel: rig.session, log: .silent)
        let before = try await sync.refresh(sessionKey: "agent:main:main")
        await rig.shutdown()
        await #expect(throws: (any Error).self) { try await sync.refresh(sessionKey: "agent:main:main") }
        #expect(try rig.store.cachedMessages(gateway: "lb", sessionKey: "agent:main:main") == before)
        // Offline, the last assistant message still comes from the cache.
        #expect(await sync.lastAssistantMessage(sessionKey: "agent:main:main")?.text == "You said: keep me")
    }
}

@Suite struct `chat.history parsing` {
    @Test func `content parts, plain strings, ids, wrapped messages and ISO timestamps`() throws {
        let payload: JSONValue = ["sessionKey": "k", "thinkingLevel": "low", "messages": [
            ["role": "user", "content": "plain string", "timestamp": 1_700_000_000_000, "id": "u1", "idempotencyKey": "i1"],
            ["role": "assistant", "messageId": "a1", "runId": "r1", "timestamp": 1_700_000_001.5,
             "content": [["type": "thinking", "thinking": "hmm"], ["type": "text", "text": "Hello"],
                         ["type": "toolCall", "name": "exec"], ["type": "text", "text": "world"]]],
            ["type": "message", "id": "w1", "timestamp": "2026-02-08T01:58:07.346Z",
             "message": ["role": "assistant", "content": [["type": "text", "text": "wrapped"]]]],
            ["role": "assistant", "__openclaw": ["id": 7, "seq": 3], "text": "from text", "unknownField": ["x": 1]],
            ["content": "no role"],
            "not an object",
            ["role": "toolResult", "content": [["type": "image", "data": "…"]]],
        ]]
        let m = TranscriptSync.parse(history: payload, sessionKey: "k")
        #expect(m.map(\.position) == [0, 1, 2, 3, 4, 5])
        #expect(m.map(\.messageId) == ["u1", "a1", "w1", "7", "k#4", "k#5"])
        #expect(m.map(\.role) == ["user", "assistant", "assistant", "assistant", "unknown", "toolResult"])
        #expect(m.map(\.text) == ["plain string", "Hello\nworld", "wrapped", "from text", "no role", ""])
        #expect(m[0].timestampMs == 1_700_000_000_000 && m[0].idempotencyKey == "i1")
        #expect(m[1].timestampMs == 1_700_000_001_500, "seconds are scaled to milliseconds")
        #expect(m[1].runId == "r1")
        #expect(m[2].timestampMs == 1_770_515_887_346)
        #expect(m[3].timestampMs == nil)
    }

    @Test func `a bare array and an empty or odd payload`() {
        #expect(TranscriptSync.parse(history: [["role": "user", "content": "hi"]], sessionKey: "s").map(\.text) == ["hi"])
        #expect(TranscriptSync.parse(history: ["messages": []], sessionKey: "s").isEmpty)
        #expect(TranscriptSync.parse(history: "nonsense", sessionKey: "s").isEmpty)
        #expect(TranscriptSync.parse(history: ["messages": "nope"], sessionKey: "s").isEmpty)
    }

    @Test(arguments: [("agent:main:main#3", "agent:main:main"), ("a#b#12", "a#b"), ("gateway-id", nil), ("k#x", nil), ("#4", nil)] as [(String, String?)])
    func `the session of a synthetic id`(id: String, session: String?) {
        #expect(TranscriptSync.sessionKey(ofSyntheticId: id) == session)
    }
}
