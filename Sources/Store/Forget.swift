// What `clawvoice forget` deletes from the state database: every queued turn (the outbox, with
// any voice note attached to a turn) and the transcript cache, for all gateways, in one
// transaction. secure_delete overwrites the deleted rows' bytes, and a checkpoint copies the
// overwritten pages back and truncates the -wal file, so the words do not linger on disk.
// Identity, gateways, tokens and node settings stay.

public struct ForgettableRows: Sendable, Equatable {
    public var queuedTurns: Int
    public var cachedSessions: Int
    public var cachedMessages: Int

    public init(queuedTurns: Int, cachedSessions: Int, cachedMessages: Int) {
        self.queuedTurns = queuedTurns
        self.cachedSessions = cachedSessions
        self.cachedMessages = cachedMessages
    }

    public var isEmpty: Bool { queuedTurns == 0 && cachedSessions == 0 && cachedMessages == 0 }
}

extension ClawStore {
    /// How many rows `forgetConversations` would delete.
    public func forgettableRows() throws(StoreError) -> ForgettableRows {
        try locked { db throws(StoreError) in try Self.count(db) }
    }

    /// Deletes the outbox and the transcript cache and returns what was there. The checkpoint is
    /// best effort: a reader in another process (the daemon mid-query) can hold back part of it
    /// until its next write, which SQLite then checkpoints by itself.
    @discardableResult
    public func forgetConversations() throws(StoreError) -> ForgettableRows {
        try locked { db throws(StoreError) in
            try db.execute("PRAGMA secure_delete=ON")
            defer { try? db.execute("PRAGMA secure_delete=OFF") }
            let counts = try db.transaction { () throws(StoreError) -> ForgettableRows in
                let counts = try Self.count(db)
                try db.run("DELETE FROM outbox")
                try db.run("DELETE FROM cached_messages")
                try db.run("DELETE FROM cached_sessions")
                return counts
            }
            _ = try? db.query("PRAGMA wal_checkpoint(TRUNCATE)") { $0.int64(0) }
            return counts
        }
    }

    private static func count(_ db: SQLiteDatabase) throws(StoreError) -> ForgettableRows {
        func n(_ table: String) throws(StoreError) -> Int {
            Int(try db.query("SELECT COUNT(*) FROM \(table)") { $0.int64(0) }.first ?? 0)
        }
        return ForgettableRows(queuedTurns: try n("outbox"), cachedSessions: try n("cached_sessions"),
                               cachedMessages: try n("cached_messages"))
    }
}
