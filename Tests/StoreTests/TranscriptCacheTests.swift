// The transcript cache tables through ClawStore: round trip, newest-N, replace semantics,
// session bookkeeping, the session cap and the cascade when a gateway is forgotten.

import Foundation
import Testing
import Store

private final class CacheDirectory {
    let path: String
    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("clawvoice-cache-\(UUID().uuidString)").path
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

private func openStore(_ dir: CacheDirectory, gateways: [String] = ["home"]) throws -> ClawStore {
    let store = try ClawStore(directory: dir.path)
    for (i, g) in gateways.enumerated() {
        try store.upsertGateway(GatewayRecord(name: g, url: "wss://\(g).example", addedAtMs: Int64(i)))
    }
    return store
}

private func turns(_ count: Int, session: String = "agent:main:main", from start: Int = 0) -> [CachedMessage] {
    (0..<count).map { i in
        let n = start + i
        return CachedMessage(position: i, messageId: "\(session)#\(i)", role: n % 2 == 0 ? "user" : "assistant",
                             text: "message \(n)", timestampMs: 1_700_000_000_000 + Int64(n) * 1000,
                             idempotencyKey: n % 2 == 0 ? "idem-\(n)" : nil, runId: n % 2 == 1 ? "run-\(n)" : nil)
    }
}

@Suite struct `Transcript cache` {
    @Test func `messages round trip with every field`() throws {
        let dir = try CacheDirectory()
        let store = try openStore(dir)
        let messages = [
            CachedMessage(position: 0, messageId: "m-1", role: "user", text: "hello ünïcode ✓", timestampMs: 1_700_000_000_123,
                          idempotencyKey: "idem-1", runId: nil),
            CachedMessage(position: 1, messageId: nil, role: "assistant", text: "", timestampMs: nil, idempotencyKey: nil, runId: "run-1"),
        ]
        try store.replaceCachedMessages(gateway: "home", sessionKey: "agent:main:main", messages: messages, nowMs: 5_000)
        #expect(try store.cachedMessages(gateway: "home", sessionKey: "agent:main:main") == messages)
        let session = try #require(try store.cachedSession(gateway: "home", sessionKey: "agent:main:main"))
        #expect(session.refreshedAtMs == 5_000)
        #expect(session.updatedAtMs == 1_700_000_000_123, "the newest message timestamp")
        #expect(session.messageCount == 2)
        #expect(session.ageMs(nowMs: 65_000) == 60_000)
    }

    @Test func `a limit returns the newest messages, oldest first`() throws {
        let dir = try CacheDirectory()
        let store = try openStore(dir)
        try store.replaceCachedMessages(gateway: "home", sessionKey: "s", messages: turns(10, session: "s"), nowMs: 1)
        let last3 = try store.cachedMessages(gateway: "home", sessionKey: "s", limit: 3)
        #expect(last3.map(\.position) == [7, 8, 9])
        #expect(last3.map(\.text) == ["message 7", "message 8", "message 9"])
        #expect(try store.cachedMessages(gateway: "home", sessionKey: "s", limit: 0).isEmpty)
        #expect(try store.cachedMessages(gateway: "home", sessionKey: "s", limit: 50).count == 10)
        #expect(try store.cachedMessages(gateway: "home", sessionKey: "unknown").isEmpty)
    }

    @Test func `a refresh replaces the session's messages and leaves other sessions alone`() throws {
        let dir = try CacheDirectory()
        let store = try openStore(dir)
        try store.replaceCachedMessages(gateway: "home", sessionKey: "a", messages: turns(6, session: "a"), nowMs: 1,
                                        title: "Kitchen")
        try store.replaceCachedMessages(gateway: "home", sessionKey: "b", messages: turns(2, session: "b"), nowMs: 2)
        // The newer page is shorter: no row of the old page may survive.
        try store.replaceCachedMessages(gateway: "home", sessionKey: "a", messages: turns(3, session: "a", from: 10), nowMs: 3)
        #expect(try store.cachedMessages(gateway: "home", sessionKey: "a").map(\.text) == ["message 10", "message 11", "message 12"])
        #expect(try store.cachedMessages(gateway: "home", sessionKey: "b").count == 2)
        let a = try #require(try store.cachedSession(gateway: "home", sessionKey: "a"))
        #expect(a.title == "Kitchen", "a refresh without a title keeps the stored one")
        #expect(a.refreshedAtMs == 3 && a.messageCount == 3)
        #expect(try store.cachedSessions(gateway: "home").map(\.sessionKey) == ["a", "b"], "most recently refreshed first")
        // An empty page empties the session but keeps it known.
        try store.replaceCachedMessages(gateway: "home", sessionKey: "b", messages: [], nowMs: 4)
        #expect(try store.cachedMessages(gateway: "home", sessionKey: "b").isEmpty)
        #expect(try store.cachedSession(gateway: "home", sessionKey: "b")?.messageCount == 0)
    }

    @Test func `the last assistant message and a lookup by id`() throws {
        let dir = try CacheDirectory()
        let store = try openStore(dir)
        var messages = turns(5, session: "s")
        messages.append(CachedMessage(position: 5, messageId: "s#5", role: "assistant", text: "", runId: "tool-only"))
        messages.append(CachedMessage(position: 6, messageId: "s#6", role: "user", text: "thanks"))
        try store.replaceCachedMessages(gateway: "home", sessionKey: "s", messages: messages, nowMs: 1)
        let last = try #require(try store.lastAssistantMessage(gateway: "home", sessionKey: "s"))
        #expect(last.text == "message 3", "skips the user turn after it and the empty assistant message")
        let hit = try #require(try store.cachedMessage(gateway: "home", messageId: "s#1"))
        #expect(hit.sessionKey == "s" && hit.message.text == "message 1" && hit.message.runId == "run-1")
        #expect(try store.cachedMessage(gateway: "home", messageId: "nope") == nil)
        #expect(try store.lastAssistantMessage(gateway: "home", sessionKey: "empty") == nil)
    }

    @Test func `an id cached in two sessions resolves to the most recently refreshed one`() throws {
        let dir = try CacheDirectory()
        let store = try openStore(dir)
        try store.replaceCachedMessages(gateway: "home", sessionKey: "old",
                                        messages: [CachedMessage(position: 0, messageId: "dup", role: "assistant", text: "old")], nowMs: 1)
        try store.replaceCachedMessages(gateway: "home", sessionKey: "new",
                                        messages: [CachedMessage(position: 0, messageId: "dup", role: "assistant", text: "new")], nowMs: 2)
        #expect(try store.cachedMessage(gateway: "home", messageId: "dup")?.message.text == "new")
    }

    @Test func `gateways do not see each other's cache`() throws {
        let dir = try CacheDirectory()
        let store = try openStore(dir, gateways: ["home", "work"])
        try store.replaceCachedMessages(gateway: "home", sessionKey: "s", messages: turns(2, session: "s"), nowMs: 1)
        #expect(try store.cachedMessages(gateway: "work", sessionKey: "s").isEmpty)
        #expect(try store.cachedSessions(gateway: "work").isEmpty)
        #expect(try store.cachedMessage(gateway: "work", messageId: "s#0") == nil)
    }

    @Test func `only the most recently refreshed sessions are kept`() throws {
        let dir = try CacheDirectory()
        let store = try openStore(dir)
        let extra = 3
        for i in 0..<(ClawStore.cachedSessionLimit + extra) {
            try store.replaceCachedMessages(gateway: "home", sessionKey: "s\(i)", messages: turns(1, session: "s\(i)"), nowMs: Int64(i))
        }
        let kept = try store.cachedSessions(gateway: "home")
        #expect(kept.count == ClawStore.cachedSessionLimit)
        #expect(!kept.contains { $0.sessionKey == "s0" } && kept.first?.sessionKey == "s\(ClawStore.cachedSessionLimit + extra - 1)")
        #expect(try store.cachedMessages(gateway: "home", sessionKey: "s0").isEmpty, "the dropped session's messages go too")
    }

    @Test func `caching for an unknown gateway is refused`() throws {
        let dir = try CacheDirectory()
        let store = try openStore(dir)
        #expect(throws: StoreError.unknownGateway("nowhere")) {
            try store.replaceCachedMessages(gateway: "nowhere", sessionKey: "s", messages: turns(1), nowMs: 1)
        }
    }

    @Test func `forgetting a gateway deletes its cached sessions and messages`() throws {
        let dir = try CacheDirectory()
        let store = try openStore(dir, gateways: ["home", "work"])
        try store.replaceCachedMessages(gateway: "home", sessionKey: "s", messages: turns(4, session: "s"), nowMs: 1)
        try store.replaceCachedMessages(gateway: "work", sessionKey: "s", messages: turns(2, session: "s"), nowMs: 1)
        #expect(try store.deleteGateway(name: "home"))
        // Re-adding the name must not resurrect anything.
        try store.upsertGateway(GatewayRecord(name: "home", url: "wss://home.example", addedAtMs: 9))
        #expect(try store.cachedSessions(gateway: "home").isEmpty)
        #expect(try store.cachedMessages(gateway: "home", sessionKey: "s").isEmpty)
        #expect(try store.cachedMessages(gateway: "work", sessionKey: "s").count == 2)
    }

    @Test func `a second connection sees the cache the first one wrote`() throws {
        let dir = try CacheDirectory()
        let writer = try openStore(dir)
        try writer.replaceCachedMessages(gateway: "home", sessionKey: "s", messages: turns(3, session: "s"), nowMs: 7)
        let reader = try ClawStore(directory: dir.path)
        #expect(try reader.cachedMessages(gateway: "home", sessionKey: "s").count == 3)
        #expect(try reader.cachedSession(gateway: "home", sessionKey: "s")?.refreshedAtMs == 7)
    }
}
