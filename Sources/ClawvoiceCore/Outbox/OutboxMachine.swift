// What the durable outbox does next, as a pure value: given one gateway's queued turns, the
// time and whether the operator session is up, it says which turns expire, which one is
// sent, which are checked against chat.history, which are held for the user, and when to
// look again. It keeps no state of its own: the rows in SQLite are the state, so a daemon
// killed at any moment resumes from them. No I/O, no clock reads; randomness is an argument.
// OutboxSender carries the actions out.

import Foundation
public import GatewayProtocol

/// The outbox's timing and limits.
public struct OutboxPolicy: Sendable, Equatable {
    /// Failed tries before a turn is held for the user (`clawvoice outbox retry N`).
    public var maxAttempts = 5
    /// The wait after the first failure, doubling after each further one up to `maxBackoffMs`.
    public var baseBackoffMs: Int64 = 1_000
    public var maxBackoffMs: Int64 = 60_000
    /// Up to this fraction of the wait is added at random, so nodes do not retry in lockstep.
    public var jitterFraction = 0.2
    /// A turn not confirmed this long after it was queued expires (48 h).
    public var expiryMs: Int64 = 48 * 3_600_000
    /// A turn chat.send acknowledged but chat.history does not show after this long is sent
    /// again (same idempotency key; the gateway keeps one copy), counting as an attempt.
    public var resendAfterMs: Int64 = 30_000
    /// How often chat.history is read while an acknowledged turn waits to show up.
    public var confirmIntervalMs: Int64 = 1_000
    /// The sender re-reads the database at least this often (nil: never on its own). Writes from
    /// any process wake it (`DatabaseWriteWatch`), so only a test that moves a manual clock needs it.
    public var pollIntervalMs: Int64? = nil
    /// While turns wait for the operator session, or after the store failed, the sender looks
    /// again this often. An idle sender (nothing queued, or nothing due) does not wake at all.
    public var recheckMs: Int64 = 500
    /// Turns one gateway may hold; the next is refused.
    public var limit = OutboxItem.queueLimit
    /// How long one chat.send or chat.history may take.
    public var requestTimeoutMs: Int64 = 30_000
    /// Messages read from the tail of chat.history when confirming: first a short page (the turn
    /// was just acknowledged, so it is near the end, and a long page costs milliseconds to encode
    /// and parse), then, only if that misses, the long one (other clients may have written since).
    public var historyProbeLimit = 10
    public var historyLimit = 50
    /// A history message without an idempotency key matches by text when its timestamp is at
    /// most this much before the turn was queued (the two clocks may disagree).
    public var clockSlackMs: Int64 = 60_000

    public init() {}

    /// The wait after the `attempts`-th failure (1-based), with `unit` (0..<1) choosing the jitter.
    public func backoffMs(afterAttempts attempts: Int, unit: Double) -> Int64 {
        let shift = Int64(min(max(attempts - 1, 0), 30))
        let nominal = min(maxBackoffMs, baseBackoffMs << shift)
        let u = unit.isNaN ? 0 : min(max(unit, 0), 1)
        return min(maxBackoffMs, nominal + Int64(Double(nominal) * jitterFraction * u))
    }
}

/// Why a chat.send or chat.history call failed, sorted by what the outbox should do about it.
public struct OutboxFailure: Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// The operator session is down or dropped mid-call: not the turn's fault, not counted.
        case offline
        /// The gateway refused or did not answer: counted; held after `maxAttempts`.
        case refused
        /// The gateway rejected the request itself (bad params, missing scope): retrying cannot help, held at once.
        case permanent
    }
    public var kind: Kind
    public var message: String
    /// The gateway's own hint, if it gave one.
    public var retryAfterMs: Int64?

    public init(kind: Kind, message: String, retryAfterMs: Int64? = nil) {
        self.kind = kind
        self.message = message
        self.retryAfterMs = retryAfterMs
    }

    public var description: String { message }
}

/// The outbox's decisions. See the file comment.
public struct OutboxMachine: Sendable, Equatable {
    public enum Action: Sendable, Equatable {
        /// Delete these turns: queued longer than `expiryMs` ago and still not confirmed.
        case expire([OutboxItem])
        /// Read chat.history and delete those of these (acknowledged) turns it shows.
        case confirm([OutboxItem])
        /// Send this turn with chat.send, with its stored idempotency key.
        case send(OutboxItem)
        /// Stop trying this turn until the user retries it.
        case hold(OutboxItem, reason: String)
        /// Nothing to do before this time (Unix ms; nil: until something changes).
        case sleep(untilMs: Int64?)
    }

    /// What to write back after a failed send or a history check that did not show the turn.
    public enum Outcome: Sendable, Equatable {
        /// Pending again, sent no earlier than `atMs`.
        case retry(atMs: Int64, countsAsAttempt: Bool)
        /// Held for the user; the reason goes into the log line and `outbox list`.
        case hold(reason: String)
        /// Still acknowledged and waiting; read the history again at `atMs`.
        case recheck(atMs: Int64)
    }

    public var policy: OutboxPolicy

    public init(policy: OutboxPolicy = OutboxPolicy()) {
        self.policy = policy
    }

    /// Whether `item` is past its expiry at `nowMs`.
    public func isExpired(_ item: OutboxItem, nowMs: Int64) -> Bool {
        item.createdAtMs < nowMs - policy.expiryMs
    }

    /// The next actions for one gateway's turns.
    ///
    /// Order is strict: only the oldest live turn may be sent, and the next one waits until the
    /// oldest is confirmed by chat.history (not merely acknowledged), dropped or expired. A held
    /// turn therefore holds up the ones behind it, as a conversation would.
    ///
    /// Expiry ("48 h offline") is measured from when the turn was queued, whatever the
    /// connection did meanwhile: with the gateway reachable a turn is confirmed or held within
    /// minutes, so in practice only turns that waited out an outage, or a hold nobody
    /// answered, get that old.
    public func next(items: [OutboxItem], nowMs: Int64, connected: Bool) -> [Action] {
        var actions: [Action] = []
        let ordered = items.sorted { $0.seq < $1.seq }
        let expired = ordered.filter { isExpired($0, nowMs: nowMs) }
        if !expired.isEmpty { actions.append(.expire(expired)) }
        let live = ordered.filter { !isExpired($0, nowMs: nowMs) }
        // The first instant at which the oldest live turn is past its expiry.
        var wake: Int64? = live.map { $0.createdAtMs + policy.expiryMs + 1 }.min()
        func wakeAt(_ t: Int64) { wake = min(wake ?? t, t) }

        guard connected, let head = live.first else { return actions + [.sleep(untilMs: wake)] }

        // Acknowledged turns are checked whenever due; normally only the head can be one.
        let dueChecks = live.filter { $0.state == .sent && $0.nextAttemptAtMs <= nowMs }
        if !dueChecks.isEmpty { actions.append(.confirm(dueChecks)) }
        for item in live where item.state == .sent && item.nextAttemptAtMs > nowMs { wakeAt(item.nextAttemptAtMs) }

        switch head.state {
        case .held:
            break  // waits for `outbox retry` or `outbox drop`; their write wakes the sender
        case .sent:
            break  // confirmed (or re-sent) above
        case .pending:
            if head.attempts >= policy.maxAttempts {
                // Written by a build with a higher limit, or a crash between failure and hold.
                actions.append(.hold(head, reason: head.lastError ?? "failed \(head.attempts) times"))
            } else if head.nextAttemptAtMs <= nowMs {
                actions.append(.send(head))
            } else {
                wakeAt(head.nextAttemptAtMs)
            }
        }
        if !actions.contains(where: { if case .expire = $0 { false } else { true } }) {
            actions.append(.sleep(untilMs: wake))
        }
        return actions
    }

    /// chat.send failed for `item`.
    public func sendFailed(_ item: OutboxItem, _ failure: OutboxFailure, nowMs: Int64, unit: Double) -> Outcome {
        switch failure.kind {
        case .offline:
            // The session is down; the sender waits for it anyway. The short delay only keeps a
            // session that flaps between "connected" and "not connected" from spinning.
            return .retry(atMs: nowMs + policy.baseBackoffMs, countsAsAttempt: false)
        case .permanent:
            return .hold(reason: "the gateway refused it: \(failure.message)")
        case .refused:
            let attempts = item.attempts + 1
            if attempts >= policy.maxAttempts {
                return .hold(reason: "chat.send failed \(attempts) times, last: \(failure.message)")
            }
            var delay = policy.backoffMs(afterAttempts: attempts, unit: unit)
            if let hint = failure.retryAfterMs { delay = max(delay, min(hint, policy.maxBackoffMs)) }
            return .retry(atMs: nowMs + delay, countsAsAttempt: true)
        }
    }

    /// chat.history did not show the acknowledged `item` (or could not be read).
    public func notConfirmed(_ item: OutboxItem, nowMs: Int64) -> Outcome {
        let since = item.sentAtMs ?? item.createdAtMs
        guard nowMs - since >= policy.resendAfterMs else { return .recheck(atMs: nowMs + policy.confirmIntervalMs) }
        let attempts = item.attempts + 1
        if attempts >= policy.maxAttempts {
            return .hold(reason: "acknowledged but not in chat.history after \(attempts) sends")
        }
        return .retry(atMs: nowMs, countsAsAttempt: true)
    }
}

/// Which queued turns a chat.history page shows.
public enum OutboxConfirmation {
    /// The seqs of `items` that `messages` show. A message carrying an `idempotencyKey`
    /// matches only that key (the loopback gateway and newer gateways keep it); one carrying a
    /// `runId` equal to the turn's acknowledged run matches too. Otherwise a user message
    /// with the same text, stamped no earlier than `slackMs` before the turn was queued,
    /// matches; newest first, and each message vouches for one turn at most.
    ///
    /// The text rule cannot tell two identical turns a minute apart from one: on a gateway
    /// that keeps no keys, the second may be confirmed by the first's message.
    public static func confirmed(_ items: [OutboxItem], in messages: [JSONValue], slackMs: Int64 = 60_000) -> Set<Int64> {
        var found: Set<Int64> = []
        var used: Set<Int> = []
        let keyed = Dictionary(messages.enumerated().compactMap { i, m in m["idempotencyKey"]?.stringValue.map { ($0, i) } },
                               uniquingKeysWith: { a, _ in a })
        for item in items {
            if let i = keyed[item.idempotencyKey] {
                found.insert(item.seq)
                used.insert(i)
            } else if let run = item.runId,
                      let i = messages.indices.first(where: { messages[$0]["runId"]?.stringValue == run }) {
                found.insert(item.seq)
                used.insert(i)
            }
        }
        for item in items where !found.contains(item.seq) {
            let wanted = item.message.trimmingCharacters(in: .whitespacesAndNewlines)
            for i in messages.indices.reversed() where !used.contains(i) {
                let m = messages[i]
                guard m["role"]?.stringValue == "user", m["idempotencyKey"] == nil,
                      text(of: m).trimmingCharacters(in: .whitespacesAndNewlines) == wanted else { continue }
                if let ts = m["timestamp"]?.doubleValue, Int64(ts) < item.createdAtMs - slackMs { continue }
                found.insert(item.seq)
                used.insert(i)
                break
            }
        }
        return found
    }

    /// The text of a history message: `content` as a string or as `[{type:"text", text}]` parts.
    static func text(of message: JSONValue) -> String {
        switch message["content"] {
        case .string(let s)?:
            return s
        case .array(let parts)?:
            return parts.compactMap { p in p["type"]?.stringValue == "text" || p["type"] == nil ? p["text"]?.stringValue : nil }
                .joined()
        default:
            return message["text"]?.stringValue ?? ""
        }
    }
}
