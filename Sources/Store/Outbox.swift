// The durable outbox: talk turns waiting for one gateway, in the order they were spoken.
// A row is written in one transaction before the turn is answered `queued`, and deleted
// only once the gateway's chat.history shows the message (or the user drops it, or it
// expires). Deciding what to do with the rows is OutboxMachine's job (in ClawvoiceCore); this file
// only reads and writes them. Several processes share the file (the daemon sends, the CLI
// enqueues, retries and drops), so every read-modify-write runs under BEGIN IMMEDIATE.

public import ClawvoiceCore

extension ClawStore {
    /// The most turns one gateway's outbox holds.
    public static let outboxLimit = OutboxItem.queueLimit

    private static let outboxColumns =
        "seq, gateway, idempotency_key, session_key, message, attachments, thinking, created_at_ms, state, attempts, "
        + "next_attempt_at_ms, sent_at_ms, run_id, last_error"

    /// Writes a turn at the end of `gateway`'s queue and returns it once the row is committed.
    /// The count check and the insert share one write transaction, so two processes cannot
    /// both squeeze in a 51st. Throws `.outboxFull` when `limit` turns are already waiting,
    /// `.unknownGateway` when the gateway is not configured.
    @discardableResult
    public func enqueueOutbox(gateway: String, sessionKey: String, message: String, attachmentsJSON: String? = nil,
                              thinking: String? = nil, idempotencyKey: String, nowMs: Int64,
                              limit: Int = ClawStore.outboxLimit) throws(StoreError) -> OutboxItem {
        try locked { db throws(StoreError) in
            try db.transaction { () throws(StoreError) -> OutboxItem in
                let count = try db.query("SELECT COUNT(*) FROM outbox WHERE gateway = ?", [.text(gateway)]) { $0.int64(0) }.first ?? 0
                guard count < limit else { throw .outboxFull(gateway: gateway, limit: limit) }
                let rows: [OutboxItem]
                do throws(StoreError) {
                    rows = try db.query(
                        """
                        INSERT INTO outbox(gateway, idempotency_key, session_key, message, attachments, thinking, created_at_ms)
                        VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING \(Self.outboxColumns)
                        """,
                        [.text(gateway), .text(idempotencyKey), .text(sessionKey), .text(message), .text(attachmentsJSON),
                         .text(thinking), .integer(nowMs)], Self.outboxRow)
                } catch .foreignKey {
                    throw .unknownGateway(gateway)
                }
                guard let item = rows.first else {
                    throw .sqlite(call: "INSERT INTO outbox", code: 0, message: "no row returned")
                }
                return item
            }
        }
    }

    /// `gateway`'s queued turns, oldest first.
    public func outbox(gateway: String) throws(StoreError) -> [OutboxItem] {
        try locked { db throws(StoreError) in
            try db.query("SELECT \(Self.outboxColumns) FROM outbox WHERE gateway = ? ORDER BY seq", [.text(gateway)], Self.outboxRow)
        }
    }

    /// How many turns wait for `gateway`.
    public func outboxCount(gateway: String) throws(StoreError) -> Int {
        try locked { db throws(StoreError) in
            Int(try db.query("SELECT COUNT(*) FROM outbox WHERE gateway = ?", [.text(gateway)]) { $0.int64(0) }.first ?? 0)
        }
    }

    public func outboxItem(seq: Int64) throws(StoreError) -> OutboxItem? {
        try locked { db throws(StoreError) in
            try db.query("SELECT \(Self.outboxColumns) FROM outbox WHERE seq = ?", [.integer(seq)], Self.outboxRow).first
        }
    }

    /// Records a failed try: back to `pending` (or `held`), not before `nextAttemptAtMs`.
    /// `countAttempt` false (the connection dropped, not the gateway refusing) keeps the
    /// attempt count. Returns false if the row is gone (dropped meanwhile).
    @discardableResult
    public func markOutboxAttempt(seq: Int64, error: String, nextAttemptAtMs: Int64, hold: Bool,
                                  countAttempt: Bool = true) throws(StoreError) -> Bool {
        try locked { db throws(StoreError) in
            try db.run(
                """
                UPDATE outbox SET state = ?, attempts = attempts + ?, last_error = ?, next_attempt_at_ms = ?
                WHERE seq = ?
                """,
                [.text(hold ? OutboxState.held.rawValue : OutboxState.pending.rawValue), .integer(countAttempt ? 1 : 0),
                 .text(error), .integer(nextAttemptAtMs), .integer(seq)]) > 0
        }
    }

    /// chat.send acknowledged the turn. It stays, in `sent`, until chat.history shows it;
    /// the first look at the history is due at once.
    @discardableResult
    public func markOutboxSent(seq: Int64, runId: String?, nowMs: Int64) throws(StoreError) -> Bool {
        try locked { db throws(StoreError) in
            try db.run(
                "UPDATE outbox SET state = ?, sent_at_ms = ?, run_id = ?, next_attempt_at_ms = ?, last_error = NULL WHERE seq = ?",
                [.text(OutboxState.sent.rawValue), .integer(nowMs), .text(runId), .integer(nowMs), .integer(seq)]) > 0
        }
    }

    /// Moves the next try (pending) or the next history check (sent) to `untilMs`.
    @discardableResult
    public func deferOutbox(seq: Int64, untilMs: Int64) throws(StoreError) -> Bool {
        try locked { db throws(StoreError) in
            try db.run("UPDATE outbox SET next_attempt_at_ms = ? WHERE seq = ?", [.integer(untilMs), .integer(seq)]) > 0
        }
    }

    /// The user's retry: pending again, due now, with a fresh count of attempts.
    @discardableResult
    public func markOutboxPending(seq: Int64) throws(StoreError) -> Bool {
        try locked { db throws(StoreError) in
            try db.run("UPDATE outbox SET state = ?, attempts = 0, next_attempt_at_ms = 0 WHERE seq = ?",
                       [.text(OutboxState.pending.rawValue), .integer(seq)]) > 0
        }
    }

    /// Removes a turn (confirmed by the gateway, or dropped by the user). False if it was not there.
    @discardableResult
    public func deleteOutbox(seq: Int64) throws(StoreError) -> Bool {
        try locked { db throws(StoreError) in
            try db.run("DELETE FROM outbox WHERE seq = ?", [.integer(seq)]) > 0
        }
    }

    /// Deletes and returns `gateway`'s turns created before `olderThanMs` (Unix ms), oldest first.
    public func expireOutbox(gateway: String, olderThanMs: Int64) throws(StoreError) -> [OutboxItem] {
        try locked { db throws(StoreError) in
            try db.transaction { () throws(StoreError) -> [OutboxItem] in
                let doomed = try db.query(
                    "SELECT \(Self.outboxColumns) FROM outbox WHERE gateway = ? AND created_at_ms < ? ORDER BY seq",
                    [.text(gateway), .integer(olderThanMs)], Self.outboxRow)
                try db.run("DELETE FROM outbox WHERE gateway = ? AND created_at_ms < ?", [.text(gateway), .integer(olderThanMs)])
                return doomed
            }
        }
    }

    private static func outboxRow(_ row: SQLiteRow) throws(StoreError) -> OutboxItem {
        guard let state = OutboxState(rawValue: row.text(8) ?? "") else { throw .corruptValue(table: "outbox", column: "state") }
        return OutboxItem(
            seq: row.int64(0), gateway: row.text(1) ?? "", idempotencyKey: row.text(2) ?? "", sessionKey: row.text(3) ?? "",
            message: row.text(4) ?? "", attachmentsJSON: row.text(5), thinking: row.text(6), createdAtMs: row.int64(7),
            state: state, attempts: Int(row.int64(9)), nextAttemptAtMs: row.int64(10),
            sentAtMs: row.isNull(11) ? nil : row.int64(11), runId: row.text(12), lastError: row.text(13))
    }
}
