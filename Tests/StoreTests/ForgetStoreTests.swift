// `clawvoice forget`'s part in the state database, on a real SQLite file: the outbox and the
// transcript cache go for every gateway, their words are not left in the file or its -wal,
// and identity, gateways and tokens stay.

import Foundation
import Testing
import Store

@Suite struct `Forgetting conversations` {
    /// Everything on disk for the store: the database and its -wal.
    func bytes(_ store: ClawStore) -> Data {
        ["", "-wal"].reduce(into: Data()) { d, suffix in d += FileManager.default.contents(atPath: store.databasePath + suffix) ?? Data() }
    }

    @Test func `forget deletes every queued turn and cached message, leaves no copy on disk, and keeps the pairing`() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("clawvoice-forget-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try ClawStore(directory: dir)
        _ = try store.loadOrCreateIdentity()
        for g in ["home", "office"] {
            try store.upsertGateway(GatewayRecord(name: g, url: "wss://\(g).example", addedAtMs: 1))
            try store.saveToken(gateway: g, role: "node", token: "tok-\(g)", scopes: [], nowMs: 1)
            try store.enqueueOutbox(gateway: g, sessionKey: "agent:main:main", message: "secret-turn-\(g) buy the ring",
                                    idempotencyKey: "idem-\(g)", nowMs: 1)
            try store.replaceCachedMessages(gateway: g, sessionKey: "agent:main:main", messages: [
                CachedMessage(position: 0, messageId: "m0", role: "user", text: "secret-cache-\(g) my pin is 4711"),
                CachedMessage(position: 1, messageId: "m1", role: "assistant", text: "noted-\(g)"),
            ], nowMs: 2)
        }
        let secrets = ["secret-turn-home", "secret-turn-office", "secret-cache-home", "secret-cache-office"]
        // They are on disk to begin with, or the check below would prove nothing.
        for s in secrets { #expect(bytes(store).range(of: Data(s.utf8)) != nil, "\(s) was never written") }
        #expect(try store.forgettableRows() == ForgettableRows(queuedTurns: 2, cachedSessions: 2, cachedMessages: 4))

        let removed = try store.forgetConversations()
        #expect(removed == ForgettableRows(queuedTurns: 2, cachedSessions: 2, cachedMessages: 4))
        #expect(try store.forgettableRows().isEmpty)
        for g in ["home", "office"] {
            #expect(try store.outbox(gateway: g).isEmpty)
            #expect(try store.cachedSessions(gateway: g).isEmpty)
            #expect(try store.token(gateway: g, role: "node")?.token == "tok-\(g)", "the pairing stays")
        }
        #expect(try store.gateways().count == 2)
        let disk = bytes(store)
        for s in secrets { #expect(disk.range(of: Data(s.utf8)) == nil, "\(s) is still in the file") }

        // A second forget finds nothing; a fresh connection (the CLI's next run) sees the same.
        #expect(try store.forgetConversations().isEmpty)
        #expect(try ClawStore(directory: dir).forgettableRows().isEmpty)
    }
}
