// OutboxItem: one queued talk turn as the outbox stores it (Store reads and writes the rows,
// OutboxMachine decides what to do with them).

/// Where a queued turn stands.
public enum OutboxState: String, Sendable, Equatable, CaseIterable {
    /// Not yet acknowledged by chat.send (never sent, or the last try failed).
    case pending
    /// chat.send acknowledged it; it stays until chat.history shows it.
    case sent
    /// Failed too often: waits for `clawvoice outbox retry N` or `drop N`. Later turns wait behind it.
    case held
}

/// One queued turn, as stored.
public struct OutboxItem: Sendable, Equatable {
    /// Queue position, increasing across all gateways; the number the CLI shows.
    public var seq: Int64
    public var gateway: String
    /// Sent unchanged with every try, so the gateway keeps one message however often we retry.
    public var idempotencyKey: String
    public var sessionKey: String
    public var message: String
    /// chat.send `attachments` as a JSON array, if any.
    public var attachmentsJSON: String?
    public var thinking: String?
    /// When the turn was queued, Unix milliseconds (this host's clock).
    public var createdAtMs: Int64
    public var state: OutboxState
    /// Failed tries so far (reset by a retry).
    public var attempts: Int
    /// Pending: not before this time. Sent: when to look at chat.history next. Unix ms.
    public var nextAttemptAtMs: Int64
    /// When chat.send last acknowledged it, Unix ms.
    public var sentAtMs: Int64?
    /// The run the acknowledgement named.
    public var runId: String?
    /// The last failure, one line.
    public var lastError: String?

    public init(seq: Int64, gateway: String, idempotencyKey: String, sessionKey: String, message: String,
                attachmentsJSON: String? = nil, thinking: String? = nil, createdAtMs: Int64, state: OutboxState = .pending,
                attempts: Int = 0, nextAttemptAtMs: Int64 = 0, sentAtMs: Int64? = nil, runId: String? = nil,
                lastError: String? = nil) {
        self.seq = seq
        self.gateway = gateway
        self.idempotencyKey = idempotencyKey
        self.sessionKey = sessionKey
        self.message = message
        self.attachmentsJSON = attachmentsJSON
        self.thinking = thinking
        self.createdAtMs = createdAtMs
        self.state = state
        self.attempts = attempts
        self.nextAttemptAtMs = nextAttemptAtMs
        self.sentAtMs = sentAtMs
        self.runId = runId
        self.lastError = lastError
    }

    /// The first few words, for log lines and `outbox list` ("turn 7 (\"turn on the…\")").
    public var preview: String {
        if message.isEmpty { return attachmentsJSON == nil ? "(empty)" : "(voice note)" }
        let words = message.split(whereSeparator: \.isWhitespace)
        var out = words.prefix(6).joined(separator: " ")
        var cut = words.count > 6
        if out.count > 40 {
            out = String(out.prefix(40))
            cut = true
        }
        return cut ? out + "…" : out
    }
}

extension OutboxItem {
    /// The most turns one gateway's outbox holds (`ClawStore.outboxLimit`).
    public static let queueLimit = 50
}
