import ClawvoiceCore
import Foundation
import Testing
import GatewayProtocol
import Store

/// A store in a fresh temp directory with gateways "a" and "b".
private final class OutboxFixture {
    let root: String
    let store: ClawStore

    init() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("clawvoice-outbox-\(UUID().uuidString)").path
        store = try ClawStore(directory: root + "/state")
        for name in ["a", "b"] {
            try store.upsertGateway(GatewayRecord(name: name, url: "wss://\(name).example", addedAtMs: 1))
        }
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    @discardableResult
    func enqueue(_ message: String, gateway: String = "a", at nowMs: Int64 = 1_000, limit: Int = 50) throws(StoreError) -> OutboxItem {
        try store.enqueueOutbox(gateway: gateway, sessionKey: "main", message: message, idempotencyKey: UUID().uuidString,
                                nowMs: nowMs, limit: limit)
    }
}

@Suite struct `Outbox rows` {
    @Test func `an enqueued turn comes back with every column and is pending`() throws {
        let f = try OutboxFixture()
        let item = try f.store.enqueueOutbox(gateway: "a", sessionKey: "agent:main:main", message: "turn on the lights",
                                             attachmentsJSON: #"[{"type":"audio"}]"#, thinking: "low",
                                             idempotencyKey: "key-1", nowMs: 1234)
        #expect(item.seq > 0)
        #expect(item == OutboxItem(seq: item.seq, gateway: "a", idempotencyKey: "key-1", sessionKey: "agent:main:main",
                                   message: "turn on the lights", attachmentsJSON: #"[{"type":"audio"}]"#, thinking: "low",
                                   createdAtMs: 1234))
        #expect(try f.store.outboxItem(seq: item.seq) == item)
        #expect(try f.store.outbox(gateway: "a") == [item])
        #expect(try f.store.outbox(gateway: "b").isEmpty)
    }

    @Test func `turns come back in the order they were queued, per gateway`() throws {
        let f = try OutboxFixture()
        for i in 0..<5 { try f.enqueue("a\(i)", gateway: i % 2 == 0 ? "a" : "b") }
        #expect(try f.store.outbox(gateway: "a").map(\.message) == ["a0", "a2", "a4"])
        #expect(try f.store.outbox(gateway: "b").map(\.message) == ["a1", "a3"])
        let seqs = try f.store.outbox(gateway: "a").map(\.seq)
        #expect(seqs == seqs.sorted())
        #expect(try f.store.outboxCount(gateway: "a") == 3)
    }

    @Test func `the 51st turn for a gateway is refused with a line that says what to do`() throws {
        let f = try OutboxFixture()
        for i in 0..<50 { try f.enqueue("t\(i)") }
        #expect(throws: StoreError.outboxFull(gateway: "a", limit: 50)) { try f.enqueue("t50") }
        #expect(try f.store.outboxCount(gateway: "a") == 50)
        let line = StoreError.outboxFull(gateway: "a", limit: 50).description
        #expect(line == "50 turns are already waiting for a; `clawvoice outbox list` shows them, `clawvoice outbox drop N` removes one")
        // Another gateway has its own 50.
        try f.enqueue("other", gateway: "b")
        // Dropping one makes room again.
        try f.store.deleteOutbox(seq: try #require(try f.store.outbox(gateway: "a").first).seq)
        try f.enqueue("t50")
    }

    @Test func `two processes filling the same queue never pass the limit`() throws {
        let f = try OutboxFixture()
        let second = try ClawStore(directory: f.root + "/state")
        let stores = [f.store, second]
        let refused = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 40) { i in
            do {
                try stores[i % 2].enqueueOutbox(gateway: "a", sessionKey: "main", message: "m\(i)", idempotencyKey: "k\(i)",
                                                nowMs: Int64(i), limit: 25)
            } catch StoreError.outboxFull {
                refused.withLock { $0 += 1 }
            } catch {
                Issue.record("unexpected \(error)")
            }
        }
        #expect(try f.store.outboxCount(gateway: "a") == 25)
        #expect(refused.withLock { $0 } == 15)
    }

    @Test func `a turn for a gateway that is not configured is refused`() throws {
        let f = try OutboxFixture()
        #expect(throws: StoreError.unknownGateway("nope")) { try f.enqueue("x", gateway: "nope") }
    }

    @Test func `the same idempotency key cannot be queued twice`() throws {
        let f = try OutboxFixture()
        try f.store.enqueueOutbox(gateway: "a", sessionKey: "main", message: "x", idempotencyKey: "same", nowMs: 1)
        #expect(throws: StoreError.self) {
            try f.store.enqueueOutbox(gateway: "a", sessionKey: "main", message: "y", idempotencyKey: "same", nowMs: 2)
        }
        #expect(try f.store.outboxCount(gateway: "a") == 1)
    }

    @Test func `attempt, sent, defer, retry and delete change what they say`() throws {
        let f = try OutboxFixture()
        let item = try f.enqueue("hello")
        #expect(try f.store.markOutboxAttempt(seq: item.seq, error: "timed out", nextAttemptAtMs: 5_000, hold: false))
        var now = try #require(try f.store.outboxItem(seq: item.seq))
        #expect(now.state == .pending && now.attempts == 1 && now.lastError == "timed out" && now.nextAttemptAtMs == 5_000)

        try f.store.markOutboxAttempt(seq: item.seq, error: "dropped", nextAttemptAtMs: 6_000, hold: false, countAttempt: false)
        now = try #require(try f.store.outboxItem(seq: item.seq))
        #expect(now.attempts == 1 && now.lastError == "dropped")

        try f.store.markOutboxSent(seq: item.seq, runId: "run-1", nowMs: 7_000)
        now = try #require(try f.store.outboxItem(seq: item.seq))
        #expect(now.state == .sent && now.sentAtMs == 7_000 && now.runId == "run-1" && now.nextAttemptAtMs == 7_000 && now.lastError == nil)

        try f.store.deferOutbox(seq: item.seq, untilMs: 8_000)
        #expect(try f.store.outboxItem(seq: item.seq)?.nextAttemptAtMs == 8_000)

        try f.store.markOutboxAttempt(seq: item.seq, error: "gave up", nextAttemptAtMs: 0, hold: true)
        now = try #require(try f.store.outboxItem(seq: item.seq))
        #expect(now.state == .held && now.attempts == 2 && now.lastError == "gave up")

        #expect(try f.store.markOutboxPending(seq: item.seq))
        now = try #require(try f.store.outboxItem(seq: item.seq))
        #expect(now.state == .pending && now.attempts == 0 && now.nextAttemptAtMs == 0)
        #expect(now.idempotencyKey == item.idempotencyKey, "a retry keeps the key")

        #expect(try f.store.deleteOutbox(seq: item.seq))
        #expect(try f.store.outboxItem(seq: item.seq) == nil)
        #expect(try !f.store.deleteOutbox(seq: item.seq))
        #expect(try !f.store.markOutboxSent(seq: item.seq, runId: nil, nowMs: 1), "writes to a gone row report false")
        #expect(try !f.store.markOutboxAttempt(seq: item.seq, error: "", nextAttemptAtMs: 0, hold: false))
        #expect(try !f.store.markOutboxPending(seq: item.seq))
    }

    @Test func `expiry deletes and returns only that gateway's turns older than the cutoff`() throws {
        let f = try OutboxFixture()
        let old = try f.enqueue("old", at: 100)
        try f.enqueue("edge", at: 200)
        try f.enqueue("other gateway", gateway: "b", at: 50)
        let gone = try f.store.expireOutbox(gateway: "a", olderThanMs: 200)
        #expect(gone == [old])
        #expect(try f.store.outbox(gateway: "a").map(\.message) == ["edge"])
        #expect(try f.store.outboxCount(gateway: "b") == 1)
    }

    @Test func `forgetting a gateway empties its queue and only its queue`() throws {
        let f = try OutboxFixture()
        try f.enqueue("a1")
        try f.enqueue("a2")
        try f.enqueue("b1", gateway: "b")
        try f.store.deleteGateway(name: "a")
        #expect(try f.store.outbox(gateway: "a").isEmpty)
        #expect(try f.store.outbox(gateway: "b").map(\.message) == ["b1"])
        // Re-adding a gateway of the same name starts with an empty queue.
        try f.store.upsertGateway(GatewayRecord(name: "a", url: "wss://a.example", addedAtMs: 2))
        #expect(try f.store.outbox(gateway: "a").isEmpty)
    }

    @Test func `re-pairing a gateway (upsert) keeps its queue`() throws {
        let f = try OutboxFixture()
        try f.enqueue("a1")
        try f.store.upsertGateway(GatewayRecord(name: "a", url: "wss://a2.example", sharedToken: "t", isActive: true, addedAtMs: 9))
        #expect(try f.store.outbox(gateway: "a").map(\.message) == ["a1"])
    }

    @Test func `turns survive reopening the database`() throws {
        let f = try OutboxFixture()
        let item = try f.enqueue("durable")
        let reopened = try ClawStore(directory: f.root + "/state")
        #expect(try reopened.outbox(gateway: "a") == [item])
    }

    @Test func `the preview is the first words`() {
        func item(_ m: String, attachments: String? = nil) -> OutboxItem {
            OutboxItem(seq: 1, gateway: "a", idempotencyKey: "k", sessionKey: "s", message: m, attachmentsJSON: attachments, createdAtMs: 0)
        }
        #expect(item("turn on the lights").preview == "turn on the lights")
        #expect(item("one two three four five six seven").preview == "one two three four five six…")
        #expect(item(String(repeating: "x", count: 60)).preview == String(repeating: "x", count: 40) + "…")
        #expect(item("", attachments: "[]").preview == "(voice note)")
        #expect(item("").preview == "(empty)")
    }
}
