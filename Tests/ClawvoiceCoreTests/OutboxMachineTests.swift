// OutboxMachine without I/O: every decision from rows, time and connection state.

import ClawvoiceCore
import GatewayProtocol
import Testing

private let hour: Int64 = 3_600_000

private func item(_ seq: Int64, _ state: OutboxState = .pending, created: Int64 = 0, attempts: Int = 0, next: Int64 = 0,
                  sentAt: Int64? = nil, runId: String? = nil, message: String? = nil, key: String? = nil,
                  lastError: String? = nil) -> OutboxItem {
    OutboxItem(seq: seq, gateway: "g", idempotencyKey: key ?? "key-\(seq)", sessionKey: "main", message: message ?? "turn \(seq)",
               createdAtMs: created, state: state, attempts: attempts, nextAttemptAtMs: next, sentAtMs: sentAt, runId: runId,
               lastError: lastError)
}

@Suite struct `Outbox machine: what to do next` {
    let m = OutboxMachine()

    @Test func `an empty queue sleeps until something changes`() {
        #expect(m.next(items: [], nowMs: 1_000, connected: true) == [.sleep(untilMs: nil)])
        #expect(m.next(items: [], nowMs: 1_000, connected: false) == [.sleep(untilMs: nil)])
    }

    @Test func `offline, nothing is sent; it sleeps until the oldest turn would expire`() {
        let items = [item(1, created: 100), item(2, created: 50)]
        #expect(m.next(items: items, nowMs: 1_000, connected: false) == [.sleep(untilMs: 50 + 48 * hour + 1)])
    }

    @Test func `connected, only the oldest pending turn is sent`() {
        let items = [item(3), item(1), item(2)]
        #expect(m.next(items: items, nowMs: 1_000, connected: true) == [.send(item(1))])
    }

    @Test func `a pending turn waits out its backoff`() {
        let items = [item(1, attempts: 2, next: 5_000), item(2)]
        #expect(m.next(items: items, nowMs: 1_000, connected: true) == [.sleep(untilMs: 5_000)])
        #expect(m.next(items: items, nowMs: 5_000, connected: true) == [.send(items[0])])
    }

    @Test func `an acknowledged turn is checked against the history when due and holds back the next`() {
        let sent = item(1, .sent, next: 2_000, sentAt: 2_000, runId: "r")
        let items = [sent, item(2)]
        #expect(m.next(items: items, nowMs: 2_000, connected: true) == [.confirm([sent])])
        #expect(m.next(items: items, nowMs: 1_500, connected: true) == [.sleep(untilMs: 2_000)],
                "the next turn is not sent while the first is unconfirmed")
    }

    @Test func `an acknowledged turn is not checked while offline`() {
        let sent = item(1, .sent, next: 0, sentAt: 0)
        #expect(m.next(items: [sent], nowMs: 10, connected: false) == [.sleep(untilMs: 48 * hour + 1)])
    }

    @Test func `a held turn holds up everything behind it`() {
        let items = [item(1, .held, attempts: 5), item(2)]
        #expect(m.next(items: items, nowMs: 1_000, connected: true) == [.sleep(untilMs: 48 * hour + 1)])
    }

    @Test func `a pending turn at the attempt limit is held, not sent`() {
        let tired = item(1, attempts: 5, lastError: "boom")
        #expect(m.next(items: [tired], nowMs: 0, connected: true) == [.hold(tired, reason: "boom")])
        let noReason = item(1, attempts: 7)
        #expect(m.next(items: [noReason], nowMs: 0, connected: true) == [.hold(noReason, reason: "failed 7 times")])
    }

    @Test func `turns older than 48 hours expire, connected or not, whatever their state`() {
        let now = 100 * hour
        let old = [item(1, created: now - 48 * hour - 1), item(2, .sent, created: now - 49 * hour, sentAt: 0),
                   item(3, .held, created: now - 50 * hour)]
        let young = item(4, created: now - 48 * hour)
        for connected in [false, true] {
            let actions = m.next(items: old + [young], nowMs: now, connected: connected)
            #expect(actions.first == .expire(old))
            #expect(actions.dropFirst().first == (connected ? .send(young) : .sleep(untilMs: young.createdAtMs + 48 * hour + 1)))
        }
    }

    @Test func `exactly 48 hours old is not yet expired; one millisecond more is`() {
        let t = item(1, created: 0)
        #expect(!m.isExpired(t, nowMs: 48 * hour))
        #expect(m.isExpired(t, nowMs: 48 * hour + 1))
        #expect(m.next(items: [t], nowMs: 48 * hour + 1, connected: false) == [.expire([t]), .sleep(untilMs: nil)])
    }

    @Test func `the wake time is the earliest of backoff, recheck and expiry`() {
        var p = OutboxPolicy()
        p.expiryMs = 10_000
        let short = OutboxMachine(policy: p)
        #expect(short.next(items: [item(1, created: 0, next: 50_000)], nowMs: 1_000, connected: true) == [.sleep(untilMs: 10_001)])
        #expect(short.next(items: [item(1, .sent, created: 0, next: 3_000, sentAt: 500)], nowMs: 1_000, connected: true)
                == [.sleep(untilMs: 3_000)])
    }
}

@Suite struct `Outbox machine: failures` {
    let m = OutboxMachine()

    @Test func `a refused send backs off 1 s doubling to 60 s, with jitter on top`() {
        let p = OutboxPolicy()
        #expect(p.backoffMs(afterAttempts: 1, unit: 0) == 1_000)
        #expect(p.backoffMs(afterAttempts: 2, unit: 0) == 2_000)
        #expect(p.backoffMs(afterAttempts: 3, unit: 0) == 4_000)
        #expect(p.backoffMs(afterAttempts: 7, unit: 0) == 60_000)
        #expect(p.backoffMs(afterAttempts: 40, unit: 0) == 60_000)
        #expect(p.backoffMs(afterAttempts: 1, unit: 0.5) == 1_100)
        #expect(p.backoffMs(afterAttempts: 1, unit: 1) == 1_200)
        #expect(p.backoffMs(afterAttempts: 7, unit: 1) == 60_000, "jitter never passes the cap")
        #expect(p.backoffMs(afterAttempts: 1, unit: .nan) == 1_000)
        #expect(p.backoffMs(afterAttempts: 0, unit: 0) == 1_000)
    }

    @Test func `a refused send is retried later and counted`() {
        let f = OutboxFailure(kind: .refused, message: "UNAVAILABLE: busy")
        #expect(m.sendFailed(item(1), f, nowMs: 10_000, unit: 0) == .retry(atMs: 11_000, countsAsAttempt: true))
        #expect(m.sendFailed(item(1, attempts: 2), f, nowMs: 10_000, unit: 0) == .retry(atMs: 14_000, countsAsAttempt: true))
    }

    @Test func `the gateway's retry-after hint wins when it is longer, up to the cap`() {
        let hinted = OutboxFailure(kind: .refused, message: "slow down", retryAfterMs: 7_000)
        #expect(m.sendFailed(item(1), hinted, nowMs: 0, unit: 0) == .retry(atMs: 7_000, countsAsAttempt: true))
        let huge = OutboxFailure(kind: .refused, message: "later", retryAfterMs: 3_600_000)
        #expect(m.sendFailed(item(1), huge, nowMs: 0, unit: 0) == .retry(atMs: 60_000, countsAsAttempt: true))
    }

    @Test func `the fifth refused try holds the turn`() {
        let f = OutboxFailure(kind: .refused, message: "UNAVAILABLE: down")
        #expect(m.sendFailed(item(1, attempts: 4), f, nowMs: 0, unit: 0)
                == .hold(reason: "chat.send failed 5 times, last: UNAVAILABLE: down"))
    }

    @Test func `a dropped connection is not the turn's fault and is not counted`() {
        let f = OutboxFailure(kind: .offline, message: "not connected")
        #expect(m.sendFailed(item(1, attempts: 4), f, nowMs: 500, unit: 0.9) == .retry(atMs: 1_500, countsAsAttempt: false))
    }

    @Test func `a request the gateway rejects as invalid is held at once`() {
        let f = OutboxFailure(kind: .permanent, message: "INVALID_REQUEST: message too long")
        #expect(m.sendFailed(item(1), f, nowMs: 0, unit: 0) == .hold(reason: "the gateway refused it: INVALID_REQUEST: message too long"))
    }

    @Test func `an acknowledged turn missing from the history is checked again, then resent after 30 s, then held`() {
        let sent = item(1, .sent, sentAt: 1_000)
        #expect(m.notConfirmed(sent, nowMs: 1_000) == .recheck(atMs: 2_000))
        #expect(m.notConfirmed(sent, nowMs: 30_999) == .recheck(atMs: 31_999))
        #expect(m.notConfirmed(sent, nowMs: 31_000) == .retry(atMs: 31_000, countsAsAttempt: true))
        let tired = item(1, .sent, attempts: 4, sentAt: 1_000)
        #expect(m.notConfirmed(tired, nowMs: 31_000) == .hold(reason: "acknowledged but not in chat.history after 5 sends"))
    }
}

@Suite struct `Outbox confirmation from chat.history` {
    private func user(_ text: String, key: String? = nil, ts: Double? = nil) -> JSONValue {
        var o: [String: JSONValue] = ["role": "user", "content": [["type": "text", "text": .string(text)]]]
        if let key { o["idempotencyKey"] = .string(key) }
        if let ts { o["timestamp"] = .number(ts) }
        return .object(o)
    }

    @Test func `a message with our idempotency key confirms the turn`() {
        let t = item(1, .sent, key: "k1")
        #expect(OutboxConfirmation.confirmed([t], in: [user("anything", key: "k1")]) == [1])
    }

    @Test func `a message with another key does not, even with the same text`() {
        let t = item(1, .sent, message: "yes", key: "k1")
        #expect(OutboxConfirmation.confirmed([t], in: [user("yes", key: "k0")]).isEmpty)
    }

    @Test func `without keys, the same text from the user confirms it`() {
        let t = item(1, .sent, created: 100_000, message: "turn on the lights")
        #expect(OutboxConfirmation.confirmed([t], in: [user("  turn on the lights\n", ts: 100_500)]) == [1])
        #expect(OutboxConfirmation.confirmed([t], in: [user("turn on the lights")]) == [1], "no timestamp: text decides")
        let plain: JSONValue = ["role": "user", "content": "turn on the lights"]
        #expect(OutboxConfirmation.confirmed([t], in: [plain]) == [1], "content as a plain string")
    }

    @Test func `without keys, a message from long before the turn does not confirm it`() {
        let t = item(1, .sent, created: 200_000, message: "yes")
        #expect(OutboxConfirmation.confirmed([t], in: [user("yes", ts: 139_999)]).isEmpty)
        #expect(OutboxConfirmation.confirmed([t], in: [user("yes", ts: 140_000)]) == [1], "within the 60 s clock slack")
    }

    @Test func `the assistant's text does not confirm a user turn`() {
        let t = item(1, .sent, message: "hello")
        let reply: JSONValue = ["role": "assistant", "content": [["type": "text", "text": "hello"]]]
        #expect(OutboxConfirmation.confirmed([t], in: [reply]).isEmpty)
    }

    @Test func `a message of our acknowledged run confirms it`() {
        let t = item(1, .sent, runId: "run-9", message: "x", key: "k")
        let reply: JSONValue = ["role": "assistant", "content": "ok", "runId": "run-9"]
        #expect(OutboxConfirmation.confirmed([t], in: [reply]) == [1])
    }

    @Test func `one message vouches for one turn only`() {
        let a = item(1, .sent, message: "yes"), b = item(2, .sent, message: "yes")
        #expect(OutboxConfirmation.confirmed([a, b], in: [user("yes")]).count == 1)
        #expect(OutboxConfirmation.confirmed([a, b], in: [user("yes"), user("yes")]) == [1, 2])
    }
}
