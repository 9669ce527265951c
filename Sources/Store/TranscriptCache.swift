// The transcript cache: the last page of each recent chat session per gateway, as chat.history
// returned it, so `clawvoice history` answers at once (and offline) and `listen` can find a
// message by id. Rows are a copy of the gateway's truth, replaced wholesale on each refresh;
// nothing here is ever sent back. Deleting a gateway deletes its cache (ON DELETE CASCADE).

/// One cached chat message, in the session's order.
public struct CachedMessage: Sendable, Equatable {
    /// 0-based index in the page chat.history returned (oldest first).
    public var position: Int
    /// The gateway's message id, or a synthetic `<sessionKey>#<position>` (see `TranscriptSync`).
    public var messageId: String?
    /// "user", "assistant", "system", "tool", … as the gateway wrote it.
    public var role: String
    /// The message's display text (text parts joined); may be empty for tool-only messages.
    public var text: String
    /// When the gateway stamped the message, Unix milliseconds.
    public var timestampMs: Int64?
    /// The chat.send idempotency key of a user turn, when the gateway echoes it.
    public var idempotencyKey: String?
    /// The agent run that produced an assistant message, when known.
    public var runId: String?

    public init(position: Int, messageId: String?, role: String, text: String, timestampMs: Int64? = nil,
                idempotencyKey: String? = nil, runId: String? = nil) {
        self.position = position
        self.messageId = messageId
        self.role = role
        self.text = text
        self.timestampMs = timestampMs
        self.idempotencyKey = idempotencyKey
        self.runId = runId
    }
}

/// One cached session: its key and when its messages were last fetched.
public struct CachedSession: Sendable, Equatable {
    public var sessionKey: String
    /// A display title, when the gateway gave one.
    public var title: String?
    /// The newest message's timestamp (or the gateway's own updatedAt), Unix milliseconds.
    public var updatedAtMs: Int64?
    /// When chat.history last answered for this session, Unix milliseconds (this node's clock).
    public var refreshedAtMs: Int64
    /// How many messages are cached for it.
    public var messageCount: Int

    public init(sessionKey: String, title: String? = nil, updatedAtMs: Int64? = nil, refreshedAtMs: Int64, messageCount: Int = 0) {
        self.sessionKey = sessionKey
        self.title = title
        self.updatedAtMs = updatedAtMs
        self.refreshedAtMs = refreshedAtMs
        self.messageCount = messageCount
    }

    /// Age of the cache at `nowMs`, in milliseconds (never negative).
    public func ageMs(nowMs: Int64) -> Int64 { max(0, nowMs - refreshedAtMs) }
}

extension ClawStore {
    /// How many sessions per gateway the cache keeps; the least recently refreshed go first.
    public static let cachedSessionLimit = 20

    /// Replaces every cached message of `sessionKey` with `messages` and upserts the session row,
    /// in one transaction: a reader (the CLI next to the daemon) sees the old page or the new
    /// one, never a mix. A nil `title` keeps the stored one. Sessions beyond
    /// `cachedSessionLimit` for this gateway are dropped, oldest refresh first.
    /// - Throws: `StoreError.unknownGateway` when no such gateway is configured.
    public func replaceCachedMessages(gateway: String, sessionKey: String, messages: [CachedMessage], nowMs: Int64,
                                      title: String? = nil, updatedAtMs: Int64? = nil) throws(StoreError) {
        let updated = updatedAtMs ?? messages.compactMap(\.timestampMs).max()
        try locked { db throws(StoreError) in
            do throws(StoreError) {
                try db.transaction { () throws(StoreError) in
                    try db.run(
                        """
                        INSERT INTO cached_sessions(gateway, session_key, title, updated_at_ms, refreshed_at_ms)
                        VALUES (?, ?, ?, ?, ?)
                        ON CONFLICT(gateway, session_key) DO UPDATE SET
                            title = COALESCE(excluded.title, cached_sessions.title),
                            updated_at_ms = COALESCE(excluded.updated_at_ms, cached_sessions.updated_at_ms),
                            refreshed_at_ms = excluded.refreshed_at_ms
                        """,
                        [.text(gateway), .text(sessionKey), .text(title), updated.map(SQLiteValue.integer) ?? .null,
                         .integer(nowMs)])
                    try db.run("DELETE FROM cached_messages WHERE gateway = ? AND session_key = ?",
                               [.text(gateway), .text(sessionKey)])
                    for m in messages {
                        try db.run(
                            """
                            INSERT INTO cached_messages(gateway, session_key, position, message_id, role, text,
                                                        timestamp_ms, idempotency_key, run_id)
                            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                            """,
                            [.text(gateway), .text(sessionKey), .integer(Int64(m.position)), .text(m.messageId),
                             .text(m.role), .text(m.text), m.timestampMs.map(SQLiteValue.integer) ?? .null,
                             .text(m.idempotencyKey), .text(m.runId)])
                    }
                    // Keep the cache bounded: only the most recently refreshed sessions stay.
                    let stale = try db.query(
                        """
                        SELECT session_key FROM cached_sessions WHERE gateway = ?
                        ORDER BY refreshed_at_ms DESC, session_key LIMIT -1 OFFSET ?
                        """,
                        [.text(gateway), .integer(Int64(Self.cachedSessionLimit))]) { row in row.text(0) ?? "" }
                    for key in stale {
                        try db.run("DELETE FROM cached_messages WHERE gateway = ? AND session_key = ?", [.text(gateway), .text(key)])
                        try db.run("DELETE FROM cached_sessions WHERE gateway = ? AND session_key = ?", [.text(gateway), .text(key)])
                    }
                }
            } catch .foreignKey {
                throw .unknownGateway(gateway)
            }
        }
    }

    /// The newest `limit` cached messages of a session (all when nil), oldest first.
    public func cachedMessages(gateway: String, sessionKey: String, limit: Int? = nil) throws(StoreError) -> [CachedMessage] {
        try locked { db throws(StoreError) in
            try db.query(
                """
                SELECT \(Self.messageColumns) FROM (
                    SELECT * FROM cached_messages WHERE gateway = ? AND session_key = ?
                    ORDER BY position DESC LIMIT ?
                ) ORDER BY position
                """,
                [.text(gateway), .text(sessionKey), .integer(Int64(limit.map { max($0, 0) } ?? -1))], Self.messageRow)
        }
    }

    /// Every cached session of a gateway, most recently refreshed first.
    public func cachedSessions(gateway: String) throws(StoreError) -> [CachedSession] {
        try locked { db throws(StoreError) in
            try db.query(
                """
                SELECT \(Self.sessionColumns) FROM cached_sessions s WHERE s.gateway = ?
                ORDER BY s.refreshed_at_ms DESC, s.session_key
                """,
                [.text(gateway)], Self.sessionRow)
        }
    }

    /// One cached session, or nil when it was never fetched.
    public func cachedSession(gateway: String, sessionKey: String) throws(StoreError) -> CachedSession? {
        try locked { db throws(StoreError) in
            try db.query("SELECT \(Self.sessionColumns) FROM cached_sessions s WHERE s.gateway = ? AND s.session_key = ?",
                         [.text(gateway), .text(sessionKey)], Self.sessionRow).first
        }
    }

    /// The newest assistant message with text in a cached session (what `listen --last` speaks).
    public func lastAssistantMessage(gateway: String, sessionKey: String) throws(StoreError) -> CachedMessage? {
        try locked { db throws(StoreError) in
            try db.query(
                """
                SELECT \(Self.messageColumns) FROM cached_messages
                WHERE gateway = ? AND session_key = ? AND role = 'assistant' AND text <> ''
                ORDER BY position DESC LIMIT 1
                """,
                [.text(gateway), .text(sessionKey)], Self.messageRow).first
        }
    }

    /// A cached message by id, with the session it is in. If the id is cached in more than one
    /// session (a gateway id seen twice), the most recently refreshed session wins.
    public func cachedMessage(gateway: String, messageId: String) throws(StoreError) -> (sessionKey: String, message: CachedMessage)? {
        try locked { db throws(StoreError) in
            try db.query(
                """
                SELECT m.session_key, m.position, m.message_id, m.role, m.text, m.timestamp_ms, m.idempotency_key, m.run_id
                FROM cached_messages m
                JOIN cached_sessions s ON s.gateway = m.gateway AND s.session_key = m.session_key
                WHERE m.gateway = ? AND m.message_id = ?
                ORDER BY s.refreshed_at_ms DESC LIMIT 1
                """,
                [.text(gateway), .text(messageId)]
            ) { row throws(StoreError) in
                (row.text(0) ?? "", try Self.messageRow(row, offset: 1))
            }.first
        }
    }

    private static let messageColumns = "position, message_id, role, text, timestamp_ms, idempotency_key, run_id"

    private static let sessionColumns = """
        s.session_key, s.title, s.updated_at_ms, s.refreshed_at_ms,
        (SELECT COUNT(*) FROM cached_messages m WHERE m.gateway = s.gateway AND m.session_key = s.session_key)
        """

    private static func messageRow(_ row: SQLiteRow) throws(StoreError) -> CachedMessage {
        try messageRow(row, offset: 0)
    }

    private static func messageRow(_ row: SQLiteRow, offset o: Int32) throws(StoreError) -> CachedMessage {
        CachedMessage(position: Int(row.int64(o)), messageId: row.text(o + 1), role: row.text(o + 2) ?? "",
                      text: row.text(o + 3) ?? "", timestampMs: row.isNull(o + 4) ? nil : row.int64(o + 4),
                      idempotencyKey: row.text(o + 5), runId: row.text(o + 6))
    }

    private static func sessionRow(_ row: SQLiteRow) throws(StoreError) -> CachedSession {
        CachedSession(sessionKey: row.text(0) ?? "", title: row.text(1), updatedAtMs: row.isNull(2) ? nil : row.int64(2),
                      refreshedAtMs: row.int64(3), messageCount: Int(row.int64(4)))
    }
}
