// OutboxSender against the loopback gateway over a real socket, with a real SQLite file.
// Faults come from the gateway itself (drops, restarts) or, where a failure must be exact,
// from a thin OperatorChannel wrapper around the real session.

import ClawvoiceCore
import ClawvoiceTesting
import Foundation
import GatewayClient
import GatewayProtocol
import LoopbackGateway
import Store
import Talk
import Testing

/// Wall-clock milliseconds the test moves by hand.
private final class ManualClock: Sendable {
    let ms: Locked<Int64>
    init(_ start: Int64 = 1_700_000_000_000) { ms = Locked(start) }
    var now: Int64 { ms.withLock { $0 } }
    func advance(_ by: Int64) { ms.withLock { $0 += by } }
    var outbox: OutboxClock {
        OutboxClock(nowMs: { [ms] in ms.withLock { $0 } }, sleep: { d in try? await Task.sleep(for: .milliseconds(d)) })
    }
}

/// An operator channel built from closures, wrapping the real session where it should.
private struct ScriptedChannel: OperatorChannel {
    var isUp: @Sendable () async -> Bool
    var send: @Sendable (String, JSONValue?, Int64?) async throws -> JSONValue
    func request(_ method: String, params: JSONValue?, timeoutMs: Int64?) async throws -> JSONValue {
        try await send(method, params, timeoutMs)
    }
    func connected() async -> Bool { await isUp() }
    func advertisedMethods() async -> [String] { [] }
    func mainSessionKey() async -> String? { nil }

    /// Never connected: nothing is ever sent.
    static let offline = ScriptedChannel(isUp: { false }, send: { _, _, _ in throw GatewayRequestError.notConnected("test") })
}

/// Polls `condition` every 20 ms; throws naming `what` if it does not hold within `timeout`.
private func waitUntil(_ what: String, timeout: Duration = .seconds(15), _ condition: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + timeout
    while true {
        if try await condition() { return }
        if ContinuousClock.now >= deadline { throw TestFailure("timed out waiting until \(what)") }
        try await Task.sleep(for: .milliseconds(20))
    }
}

/// A loopback gateway, a store with it configured as "lb", and an operator session to it.
private final class OutboxRig: Sendable {
    let gateway: LoopbackGateway
    let store: ClawStore
    let session: GatewaySession
    let dir: String
    let log = Lines()
    let confirmed = Locked<[OutboxItem]>([])

    static let fastPolicy: OutboxPolicy = {
        var p = OutboxPolicy()
        p.baseBackoffMs = 20
        p.maxBackoffMs = 200
        p.pollIntervalMs = 50
        p.confirmIntervalMs = 50
        p.requestTimeoutMs = 5_000
        return p
    }()

    init() async throws {
        var gc = LoopbackGateway.Configuration()
        gc.autoApprove = true
        gc.auth = .token("t")
        gc.tickIntervalMs = 1000
        gc.echoDeltaDelayMs = 1
        gateway = LoopbackGateway(configuration: gc)
        try await gateway.start()
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("cv-outbox-\(UUID().uuidString.prefix(8))").path
        store = try ClawStore(directory: dir)
        let (identity, instanceId) = try store.loadOrCreateIdentity()
        let url = await gateway.url
        try store.upsertGateway(GatewayRecord(name: "lb", url: url, sharedToken: "t", isActive: true, addedAtMs: 0))
        var timing = ConnectionTiming()
        timing.backoffBaseMs = 50
        timing.backoffMaxMs = 200
        var options = SessionOptions(displayName: "outbox test", version: "test")
        options.timing = timing
        session = GatewaySession(role: .operator, endpoint: GatewayEndpoint(name: "lb", url: url),
                                 credentials: GatewayCredentials(sharedToken: "t"), identity: identity, instanceId: instanceId,
                                 store: store, options: options, log: log.sink)
        await session.start()
        _ = await session.waitUntilSettled(timeout: .seconds(10))
    }

    func sender(channel: (any OperatorChannel)? = nil, policy: OutboxPolicy = OutboxRig.fastPolicy,
                clock: OutboxClock = .system) -> OutboxSender {
        OutboxSender(store: store, gateway: "lb", channel: channel ?? session, log: log.sink, policy: policy, clock: clock,
                     onConfirmed: { [confirmed] item in confirmed.withLock { $0.append(item) } })
    }

    /// The user messages the gateway keeps for the main session, in order.
    func historyTexts() async -> [String] {
        let key = "agent:main:main"
        let page = (try? await session.request("chat.history", params: ["sessionKey": .string(key), "limit": 1000])) ?? .null
        return (page["messages"]?.arrayValue ?? []).filter { $0["role"]?.stringValue == "user" }
            .compactMap { $0["content"]?.arrayValue?.first?["text"]?.stringValue }
    }

    func chatSends() async -> [RequestFrame] { await gateway.requests(method: "chat.send") }

    func shutdown() async {
        await session.stop()
        await gateway.stop()
        try? FileManager.default.removeItem(atPath: dir)
    }
}

@Suite(.serialized) struct `Outbox sender against the loopback gateway` {
    @Test func `five turns queued while the gateway is down arrive in order, once each, after it comes back`() async throws {
        let rig = try await OutboxRig()
        defer { Task { await rig.shutdown() } }
        let key = "agent:main:main"
        await rig.gateway.stop()
        try await waitUntil("the session notices the gateway is gone") { await !rig.session.isConnected }
        let sender = rig.sender()
        await sender.start()
        var queued: [OutboxItem] = []
        for i in 1...5 { queued.append(try await sender.enqueue(sessionKey: key, message: "queued turn \(i)")) }
        try await Task.sleep(for: .milliseconds(200))
        #expect(await rig.chatSends().isEmpty, "nothing goes out while the gateway is down")
        #expect(await sender.snapshot().map(\.seq) == queued.map(\.seq))

        try await rig.gateway.start()
        do {
            try await waitUntil("the outbox is empty", timeout: .seconds(30)) { await sender.snapshot().isEmpty }
        } catch {
            // Say what the queue and the sender were doing, so a rare timeout can be diagnosed.
            let rows = await sender.snapshot().map { "\($0.seq) \($0.state) attempts \($0.attempts) next \($0.nextAttemptAtMs) error \($0.lastError ?? "-")" }
            let lines = rig.log.all.withLock { $0.suffix(25) }
            Issue.record("connected \(await rig.session.isConnected); queue \(rows); log \(lines)")
            throw error
        }
        await sender.stop()

        let order = await rig.gateway.requests().map(\.method).filter { $0 == "chat.send" || $0 == "chat.history" }
        let sends = await rig.chatSends()
        let sentTexts = sends.compactMap { $0.params?["message"]?.stringValue }
        #expect(sentTexts == (1...5).map { "queued turn \($0)" })
        #expect(sends.compactMap { $0.params?["idempotencyKey"]?.stringValue } == queued.map(\.idempotencyKey))
        #expect(await rig.historyTexts() == (1...5).map { "queued turn \($0)" })
        #expect(rig.confirmed.withLock { $0.map(\.seq) } == queued.map(\.seq))
        // Strict order: each chat.send went out only after the previous turn showed in chat.history.
        #expect(order == Array(repeating: ["chat.send", "chat.history"], count: 5).flatMap { $0 })
    }

    @Test func `acks lost to dropped connections: every retry carries the same key and the gateway keeps one message`() async throws {
        let rig = try await OutboxRig()
        defer { Task { await rig.shutdown() } }
        let gateway = rig.gateway, session = rig.session
        let lost = Locked(0)
        // The request reaches the gateway, then the connection drops before the answer is read.
        let lossy = ScriptedChannel(isUp: { await session.isConnected }, send: { method, params, timeout in
            let answer = try await session.request(method, params: params, timeoutMs: timeout)
            if method == "chat.send", lost.withLock({ n in defer { n += 1 }; return n < 3 }) {
                await gateway.dropAll()
                throw GatewayRequestError.disconnected
            }
            return answer
        })
        let sender = rig.sender(channel: lossy)
        await sender.start()
        let item = try await sender.enqueue(sessionKey: "main", message: "say it once")
        try await waitUntil("the outbox is empty", timeout: .seconds(30)) { await sender.snapshot().isEmpty }
        await sender.stop()

        let keys = await rig.chatSends().compactMap { $0.params?["idempotencyKey"]?.stringValue }
        #expect(keys.count == 4, "three lost acks, then one that arrives")
        #expect(Set(keys) == [item.idempotencyKey])
        #expect(await rig.historyTexts() == ["say it once"])
    }

    @Test func `gateway restarts in the middle of a run lose and duplicate nothing`() async throws {
        let rig = try await OutboxRig()
        defer { Task { await rig.shutdown() } }
        let sender = rig.sender()
        await sender.start()
        let texts = (1...12).map { "turn \($0) of twelve" }
        for (i, t) in texts.enumerated() {
            try await sender.enqueue(sessionKey: "main", message: t)
            if i == 3 || i == 8 { try await rig.gateway.restart(downForMs: 150) }
            if i == 6 { await rig.gateway.dropAll() }
        }
        try await waitUntil("the outbox is empty", timeout: .seconds(30)) { await sender.snapshot().isEmpty }
        await sender.stop()
        #expect(await rig.historyTexts() == texts)
        // Every retry of a turn reused its key: no key belongs to two different messages.
        var byKey: [String: Set<String>] = [:]
        for r in await rig.chatSends() {
            if let k = r.params?["idempotencyKey"]?.stringValue, let m = r.params?["message"]?.stringValue { byKey[k, default: []].insert(m) }
        }
        #expect(byKey.count == texts.count && byKey.values.allSatisfy { $0.count == 1 })
    }

    @Test func `the 51st queued turn is refused with the clear error and nothing is written`() async throws {
        let rig = try await OutboxRig()
        defer { Task { await rig.shutdown() } }
        let sender = rig.sender(channel: ScriptedChannel.offline)
        for i in 0..<50 { try await sender.enqueue(sessionKey: "main", message: "t\(i)") }
        do {
            try await sender.enqueue(sessionKey: "main", message: "one too many")
            Issue.record("the 51st turn was accepted")
        } catch {
            #expect(error == .outboxFull(gateway: "lb", limit: 50))
            #expect(error.description.contains("50 turns are already waiting for lb"))
            #expect(error.description.contains("clawvoice outbox drop N"))
        }
        #expect(await sender.snapshot().count == 50)
        #expect(!(await sender.snapshot().contains { $0.message == "one too many" }))
    }

    @Test func `turns unsent after 48 hours offline expire with a log line, younger ones stay`() async throws {
        let rig = try await OutboxRig()
        defer { Task { await rig.shutdown() } }
        let clock = ManualClock()
        let expired = Locked<[Int64]>([])
        let sender = OutboxSender(store: rig.store, gateway: "lb", channel: ScriptedChannel.offline, log: rig.log.sink,
                                  policy: OutboxRig.fastPolicy, clock: clock.outbox,
                                  onExpired: { item in expired.withLock { $0.append(item.seq) } })
        await sender.start()
        let first = try await sender.enqueue(sessionKey: "main", message: "water the plants before the weekend please")
        let second = try await sender.enqueue(sessionKey: "main", message: "short")
        clock.advance(24 * 3_600_000)
        let later = try await sender.enqueue(sessionKey: "main", message: "queued a day later")

        clock.advance(24 * 3_600_000)  // first two are exactly 48 h old: not yet
        try await Task.sleep(for: .milliseconds(200))
        #expect(await sender.snapshot().count == 3)

        clock.advance(1)
        try await waitUntil("the two old turns expire") { expired.withLock { $0 } == [first.seq, second.seq] }
        #expect(await sender.snapshot().map(\.seq) == [later.seq])
        #expect(rig.log.contains("turn \(first.seq) (\"water the plants before the weekend…\") expired unsent after 48 h"))
        #expect(rig.log.contains("turn \(second.seq) (\"short\") expired unsent after 48 h"))

        clock.advance(24 * 3_600_000)
        try await waitUntil("the later turn expires too") { await sender.snapshot().isEmpty }
        await sender.stop()
    }

    @Test func `after five refused sends a turn is held, blocks the next, and a retry delivers both in order`() async throws {
        let rig = try await OutboxRig()
        defer { Task { await rig.shutdown() } }
        let session = rig.session
        let refusing = Locked(true)
        let refused = Locked<[String]>([])
        let channel = ScriptedChannel(isUp: { await session.isConnected }, send: { method, params, timeout in
            if method == "chat.send", refusing.withLock({ $0 }) {
                refused.withLock { $0.append(params?["idempotencyKey"]?.stringValue ?? "") }
                throw GatewayRequestError.failed(ErrorShape(code: "UNAVAILABLE", message: "agent is busy"))
            }
            return try await session.request(method, params: params, timeoutMs: timeout)
        })
        let held = Locked<[Int64]>([])
        let sender = rig.sender(channel: channel)
        await sender.observe { e in if case .held(let item, _) = e { held.withLock { $0.append(item.seq) } } }
        await sender.start()
        let first = try await sender.enqueue(sessionKey: "main", message: "first")
        let second = try await sender.enqueue(sessionKey: "main", message: "second")
        try await waitUntil("the first turn is held") { held.withLock { $0 } == [first.seq] }
        let snapshot = await sender.snapshot()
        #expect(snapshot.first?.state == .held && snapshot.first?.attempts == 5)
        #expect(snapshot.first?.lastError?.contains("agent is busy") == true)
        #expect(snapshot.last?.state == .pending && snapshot.last?.attempts == 0, "the second waits behind the held one")
        #expect(refused.withLock { $0 } == Array(repeating: first.idempotencyKey, count: 5))
        #expect(rig.log.contains("`clawvoice outbox retry \(first.seq)` sends it again"))
        try await Task.sleep(for: .milliseconds(200))
        #expect(refused.withLock { $0.count } == 5, "a held turn is not tried again by itself")

        refusing.withLock { $0 = false }
        try await sender.retry(seq: first.seq)
        try await waitUntil("both are delivered") { await sender.snapshot().isEmpty }
        await sender.stop()
        #expect(await rig.historyTexts() == ["first", "second"])
        #expect(rig.confirmed.withLock { $0.map(\.seq) } == [first.seq, second.seq])
    }

    @Test func `a request the gateway rejects as invalid is held at once, and can be dropped`() async throws {
        let rig = try await OutboxRig()
        defer { Task { await rig.shutdown() } }
        let session = rig.session
        let channel = ScriptedChannel(isUp: { await session.isConnected }, send: { method, params, timeout in
            if method == "chat.send", params?["message"]?.stringValue == "bad" {
                throw GatewayRequestError.failed(ErrorShape(code: "INVALID_REQUEST", message: "invalid chat.send params"))
            }
            return try await session.request(method, params: params, timeoutMs: timeout)
        })
        let sender = rig.sender(channel: channel)
        await sender.start()
        let bad = try await sender.enqueue(sessionKey: "main", message: "bad")
        try await sender.enqueue(sessionKey: "main", message: "good")
        try await waitUntil("the bad turn is held") { await sender.snapshot().first?.state == .held }
        #expect(await sender.snapshot().first?.attempts == 1)
        try await sender.drop(seq: bad.seq)
        try await waitUntil("the good turn is delivered") { await sender.snapshot().isEmpty }
        await sender.stop()
        #expect(await rig.historyTexts() == ["good"])
        await #expect(throws: StoreError.unknownOutboxItem(seq: bad.seq, gateway: "lb")) { try await sender.drop(seq: bad.seq) }
    }

    @Test func `a turn another process writes to the same file is sent at the next poll`() async throws {
        let rig = try await OutboxRig()
        defer { Task { await rig.shutdown() } }
        let sender = rig.sender(policy: OutboxPolicy())  // production poll interval
        await sender.start()
        let other = try ClawStore(directory: rig.dir)
        let t0 = ContinuousClock.now
        try other.enqueueOutbox(gateway: "lb", sessionKey: "main", message: "typed elsewhere", idempotencyKey: UUID().uuidString,
                                nowMs: Int64(Date().timeIntervalSince1970 * 1000))
        try await waitUntil("the turn is delivered", timeout: .seconds(5)) { await sender.snapshot().isEmpty }
        // The poll is every 500 ms; the margin is for a loaded test machine.
        #expect(ContinuousClock.now - t0 < .milliseconds(2500))
        await sender.stop()
        #expect(await rig.historyTexts() == ["typed elsewhere"])
    }

    @Test func `attachments and thinking go out with chat.send as stored`() async throws {
        let rig = try await OutboxRig()
        defer { Task { await rig.shutdown() } }
        let sender = rig.sender()
        await sender.start()
        let note = #"[{"type":"audio","mimeType":"audio/ogg","fileName":"c.opus","content":"T2dnUw==","sizeBytes":4}]"#
        try await sender.enqueue(sessionKey: "main", message: "", attachmentsJSON: note, thinking: "low")
        try await waitUntil("the turn is delivered") { await sender.snapshot().isEmpty }
        await sender.stop()
        let p = try #require(await rig.chatSends().first?.params)
        #expect(p["thinking"]?.stringValue == "low")
        #expect(p["attachments"]?.arrayValue?.first?["mimeType"]?.stringValue == "audio/ogg")
        #expect(p["attachments"]?.arrayValue?.first?["content"]?.stringValue == "T2dnUw==")
    }

    @Test func `forgetting the gateway empties its queue`() async throws {
        let rig = try await OutboxRig()
        defer { Task { await rig.shutdown() } }
        let sender = rig.sender(channel: ScriptedChannel.offline)
        await sender.start()
        for i in 0..<3 { try await sender.enqueue(sessionKey: "main", message: "m\(i)") }
        #expect(await sender.snapshot().count == 3)
        try rig.store.deleteGateway(name: "lb")
        #expect(await sender.snapshot().isEmpty)
        await #expect(throws: StoreError.unknownGateway("lb")) { try await sender.enqueue(sessionKey: "main", message: "late") }
        await sender.stop()
    }
}
