// OutboxSender off the cooperative pool: while another process holds the database's write lock,
// its SQLite calls wait (up to the store's 5 s busy timeout) on an executor of their own, and the
// rest of the process (gateway sessions' ticks, the talk loop) runs on. A real SQLite file, a real
// second process holding the lock.

import ClawvoiceCore
import Foundation
import GatewayClient
import GatewayProtocol
import Store
import Talk
import Testing

@Suite struct `Outbox writes waiting on a lock` {
    @Test func `senders waiting on another process's write lock leave the cooperative pool free`() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cv-outbox-exec-\(UUID().uuidString.prefix(8))").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try ClawStore(directory: dir)
        // More waiting senders than the pool has threads: on the pool, they would hold every one.
        let count = ProcessInfo.processInfo.activeProcessorCount + 2
        for i in 0..<count {
            try store.upsertGateway(GatewayRecord(name: "gw\(i)", url: "ws://127.0.0.1:9", sharedToken: "t", isActive: i == 0, addedAtMs: 0))
        }
        let lock = try await WriteLockHolder(database: store.databasePath)
        defer { lock.release() }
        let log = Lines()
        let senders = try (0..<count).map { i in
            OutboxSender(store: try ClawStore(directory: dir), gateway: "gw\(i)", channel: OfflineChannel(), log: log.sink)
        }
        let started = ContinuousClock.now
        let writes = senders.map { sender in
            Task { try await sender.enqueue(sessionKey: "main", message: "queued behind the lock") }
        }
        try await Task.sleep(for: .milliseconds(300))  // every sender is inside SQLite's busy wait now
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<count { group.addTask { await Task.yield() } }
        }
        let took = ContinuousClock.now - started
        // Without the sender's own executor this took 10 s here (the busy timeout, twice over);
        // 4 s leaves room for a loaded machine and stays under one busy timeout.
        #expect(took < .seconds(4), "the pool was held for \(took) by writes waiting on the lock")
        lock.release()
        for write in writes { _ = try await write.value }
        #expect(try store.outbox(gateway: "gw0").count == 1, "the write went through once the lock went")
        #expect(try store.outbox(gateway: "gw\(count - 1)").count == 1)
    }
}

/// Never connected: the senders are not started, so nothing is ever sent.
private struct OfflineChannel: OperatorChannel {
    func request(_ method: String, params: JSONValue?, timeoutMs: Int64?) async throws -> JSONValue {
        throw GatewayRequestError.notConnected("test")
    }
    func connected() async -> Bool { false }
    func advertisedMethods() async -> [String] { [] }
    func mainSessionKey() async -> String? { nil }
}
