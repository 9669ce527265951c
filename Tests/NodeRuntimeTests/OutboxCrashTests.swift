// The durable outbox under kill -9: the real `clawvoice run` binary against an in-process
// loopback gateway, SIGKILLed at seeded random moments while turns are queued and sent.
// At the end every turn must be in the gateway's chat history exactly once, in queue order.
// `CLAWVOICE_SOAK_ROUNDS=N` runs the longer soak variant; `CLAWVOICE_SOAK_SEED=S` replays a run.

import Audio
import ClawvoiceCore
import ClawvoiceTesting
import Foundation
import GatewayClient
import GatewayProtocol
import LoopbackGateway
import CLI
import Daemon
import NodeRuntime
import Store
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension SplitMix64 {
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(max(n, 1))) }
}

private let soakRounds = ProcessInfo.processInfo.environment["CLAWVOICE_SOAK_ROUNDS"].flatMap(Int.init)

/// What one crash run did, for the assertions and the failure message.
private struct CrashRun {
    var seed: UInt64
    var queued: [String] = []      // messages, in enqueue order
    var keys: [String: String] = [:]  // message → idempotency key
    var kills = 0
    /// Kills after this daemon had put at least one chat.send on the wire.
    var killsWhileSending = 0
    /// Kills that left a turn acknowledged but not yet confirmed.
    var killsBetweenAckAndConfirm = 0
}

private func crashRun(rounds: Int, turnsPerRound: ClosedRange<Int> = 1...3) async throws {
    let seed = ProcessInfo.processInfo.environment["CLAWVOICE_SOAK_SEED"].flatMap(UInt64.init) ?? UInt64.random(in: 1..<UInt64.max)
    print("outbox kill -9 test: \(rounds) rounds, seed \(seed) (replay with CLAWVOICE_SOAK_SEED=\(seed))")
    var rng = SplitMix64(seed: seed)
    var run = CrashRun(seed: seed)

    var gc = LoopbackGateway.Configuration()
    gc.autoApprove = true
    gc.auth = .token("soak-token")
    gc.echoDeltaDelayMs = 1
    let gateway = LoopbackGateway(configuration: gc)
    try await gateway.start()
    defer { Task { await gateway.stop() } }
    let url = await gateway.url
    let key = gc.mainSessionKey

    var env = try CLIEnvironment()
    env.extra["CLAWVOICE_GATEWAY_URL"] = url
    env.extra["CLAWVOICE_GATEWAY_TOKEN"] = "soak-token"
    // The test writes turns into the daemon's own database, as `clawvoice send` would.
    let store = try ClawStore(directory: env.stateDir)
    let name = GatewayNaming.name(for: url)
    try store.upsertGateway(GatewayRecord(name: name, url: url, sharedToken: "soak-token", isActive: true, addedAtMs: 0))

    func enqueue(_ n: Int, round: Int) throws {
        for _ in 0..<n {
            let message = "soak turn \(run.queued.count + 1) (round \(round))"
            let item = try store.enqueueOutbox(gateway: name, sessionKey: key, message: message,
                                               idempotencyKey: UUID().uuidString.lowercased(),
                                               nowMs: Int64(Date().timeIntervalSince1970 * 1000))
            run.queued.append(message)
            run.keys[message] = item.idempotencyKey
        }
    }

    for round in 1...rounds {
        // Some turns wait before the daemon starts, some arrive while it runs.
        // Never past the outbox's limit (a loaded machine's daemons may send nothing for rounds
        // on end, and `send` would refuse the 51st): one place is kept for the turn midway.
        let room = ClawStore.outboxLimit - 1 - (try store.outboxCount(gateway: name))
        try enqueue(min(turnsPerRound.lowerBound + rng.below(turnsPerRound.count), max(room, 0)), round: round)
        let waiting = try store.outboxCount(gateway: name)
        let sendsAtSpawn = await gateway.requests(method: "chat.send").count
        let historiesAtSpawn = await gateway.requests(method: "chat.history").count
        let daemon = try env.spawn(["run"])
        let started = ContinuousClock.now
        // Where the kill lands: at a random time (before the connect, or anywhere in sending), or
        // the moment the gateway sees the k-th chat.send (the ack may not be recorded yet), or the
        // k-th chat.history (the turn is confirmed but perhaps not yet deleted).
        let mode = rng.below(3)
        let k = 1 + rng.below(min(3, max(waiting, 1)))
        let killAfterMs = rng.below(700)
        let enqueueAtMs = rng.below(2) == 0 ? rng.below(max(killAfterMs, 1)) : nil
        var enqueuedMidway = false
        while true {
            let elapsed = Int((ContinuousClock.now - started) / .milliseconds(1))
            if let at = enqueueAtMs, !enqueuedMidway, elapsed >= at {
                try enqueue(try store.outboxCount(gateway: name) < ClawStore.outboxLimit ? 1 : 0, round: round)
                enqueuedMidway = true
            }
            if elapsed >= (mode == 0 ? killAfterMs : 2_000) { break }
            if mode == 1, await gateway.requests(method: "chat.send").count - sendsAtSpawn >= k { break }
            if mode == 2, await gateway.requests(method: "chat.history").count - historiesAtSpawn >= k { break }
            try await Task.sleep(for: .microseconds(500))
        }
        daemon.signal(SIGKILL)
        let status = await daemon.waitForExit(.seconds(5))
        #expect(status == 128 + SIGKILL, "round \(round): daemon ended with \(String(describing: status)) before the kill\n\(daemon.stderr)")
        run.kills += 1
        if await gateway.requests(method: "chat.send").count > sendsAtSpawn { run.killsWhileSending += 1 }
        if try store.outbox(gateway: name).contains(where: { $0.state == .sent }) { run.killsBetweenAckAndConfirm += 1 }
    }

    // Let one daemon finish the queue.
    let last = try env.spawn(["run"])
    let drained = await eventually(.seconds(60)) { ((try? store.outboxCount(gateway: name)) ?? 1) == 0 }
    let leftover = (try? store.outbox(gateway: name)) ?? []
    last.signal(SIGTERM)
    _ = await last.waitForExit(.seconds(10))
    #expect(drained, "seed \(seed): \(leftover.count) turns still queued: \(leftover.map { "\($0.seq) \($0.state) \($0.lastError ?? "")" })\n\(last.stderr)")

    // Read the gateway's history the way a client would.
    let history = try await userHistory(url: url, sessionKey: key, dir: env.scratch.sub("reader"))
    let lost = run.queued.filter { !history.contains($0) }
    let duplicated = Dictionary(grouping: history, by: { $0 }).filter { $0.value.count > 1 }.keys.sorted()
    #expect(lost.isEmpty, "seed \(seed): lost \(lost.count) turns: \(lost.prefix(5))")
    #expect(duplicated.isEmpty, "seed \(seed): duplicated \(duplicated.prefix(5))")
    #expect(history == run.queued, "seed \(seed): history order differs from queue order")
    // Every resend of a turn carried its one key.
    for r in await gateway.requests(method: "chat.send") {
        if let m = r.params?["message"]?.stringValue {
            #expect(r.params?["idempotencyKey"]?.stringValue == run.keys[m], "seed \(seed): \(m) went out with another key")
        }
    }
    let sends = await gateway.requests(method: "chat.send").count
    print("outbox kill -9 test: \(run.queued.count) turns, \(run.kills) kills (\(run.killsWhileSending) after sending began, "
          + "\(run.killsBetweenAckAndConfirm) between ack and confirmation), \(sends) chat.send requests for \(history.count) messages, "
          + "seed \(seed)")
    #expect(run.killsWhileSending >= rounds / 2, "seed \(seed): too few kills landed while sending to mean anything")
}

/// The user messages in `sessionKey`'s history, read over a fresh operator session.
private func userHistory(url: String, sessionKey: String, dir: String) async throws -> [String] {
    let store = try ClawStore(directory: dir)
    let (identity, instanceId) = try store.loadOrCreateIdentity()
    try store.upsertGateway(GatewayRecord(name: "reader", url: url, sharedToken: "soak-token", isActive: true, addedAtMs: 0))
    let session = GatewaySession(role: .operator, endpoint: GatewayEndpoint(name: "reader", url: url),
                                 credentials: GatewayCredentials(sharedToken: "soak-token"), identity: identity,
                                 instanceId: instanceId, store: store, options: SessionOptions(displayName: "reader", version: "test"),
                                 log: .silent)
    await session.start()
    defer { Task { await session.stop() } }
    _ = await session.waitUntilSettled(timeout: .seconds(10))
    let page = try await session.request("chat.history", params: ["sessionKey": .string(sessionKey), "limit": 100_000])
    return (page["messages"]?.arrayValue ?? []).filter { $0["role"]?.stringValue == "user" }
        .compactMap { $0["content"]?.arrayValue?.first?["text"]?.stringValue }
}

@Suite(.serialized) struct `Outbox under kill -9` {
    @Test(.timeLimit(.minutes(3)))
    func `killing the daemon at random moments during sending loses no turn and duplicates none`() async throws {
        try await crashRun(rounds: 50)
    }

    @Test(.enabled(if: soakRounds != nil, "set CLAWVOICE_SOAK_ROUNDS to run the soak"))
    func `soak: many more kill -9 rounds`() async throws {
        try await crashRun(rounds: soakRounds ?? 0)
    }
}
