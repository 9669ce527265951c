// Outbox figures for clawvoice-bench: how long a queued turn takes to reach the gateway, and
// how many turns a second the outbox moves, against raw chat.send on the same session in the
// same run (the price of writing to SQLite first and confirming by chat.history).

import ClawvoiceCore
import Foundation
import GatewayClient
import GatewayProtocol
import LoopbackGateway
import Store
import Talk

public enum OutboxBench {
    /// - Returns:
    ///   - enqueueToSendMs: median time from `enqueue` returning (row committed) to chat.send
    ///     acknowledged, one turn at a time on an idle queue;
    ///   - enqueueToConfirmMs: the same, up to chat.history showing it (the turn leaves the queue);
    ///   - turnsPerSecond: `turns` queued at once, until the last is confirmed;
    ///   - rawTurnsPerSecond: `turns` chat.send requests one after another on the same session,
    ///     no store and no confirmation (the outbox's order rule also allows one at a time).
    public static func measure(turns: Int) async throws
        -> (enqueueToSendMs: Double, turnsPerSecond: Double, rawTurnsPerSecond: Double, enqueueToConfirmMs: Double)
    {
        let rig = try await LoopbackOperator.connect()
        do {
            let result = try await measure(turns: max(turns, 1), rig: rig)
            await rig.close()
            return result
        } catch {
            await rig.close()
            throw error
        }
    }

    private static func measure(turns: Int, rig: LoopbackOperator) async throws
        -> (enqueueToSendMs: Double, turnsPerSecond: Double, rawTurnsPerSecond: Double, enqueueToConfirmMs: Double)
    {
        let (gateway, store, session) = (rig.gateway, rig.store, rig.session)

        var policy = OutboxPolicy()
        policy.limit = max(policy.limit, turns)
        let sender = OutboxSender(store: store, gateway: "bench", channel: session, log: .silent, policy: policy)
        let (events, sink) = AsyncStream.makeStream(of: (OutboxEvent, ContinuousClock.Instant).self)
        await sender.observe { e in sink.yield((e, ContinuousClock.now)) }
        await sender.start()
        var iterator = events.makeAsyncIterator()
        let key = await gateway.configuration.mainSessionKey

        /// Waits for the `.confirmed` event of `seq`; returns when it was sent and when confirmed.
        func waitConfirmed(_ seq: Int64) async throws -> (sent: ContinuousClock.Instant?, confirmed: ContinuousClock.Instant) {
            var sentAt: ContinuousClock.Instant?
            while let (e, at) = await iterator.next() {
                switch e {
                case .sent(let item, _) where item.seq == seq: sentAt = at
                case .confirmed(let item) where item.seq == seq: return (sentAt, at)
                case .held(let item, let reason): throw BenchError("turn \(item.seq) was held: \(reason)")
                default: break
                }
            }
            throw BenchError("the outbox stopped")
        }

        // Latency: one turn at a time on an idle queue (two warm-up turns first).
        var toSend: [Double] = []
        var toConfirm: [Double] = []
        for i in 0..<(turns + 2) {
            let t0 = ContinuousClock.now
            let item = try await sender.enqueue(sessionKey: key, message: "latency turn \(i)")
            let (sent, confirmed) = try await waitConfirmed(item.seq)
            guard i >= 2 else { continue }
            if let sent { toSend.append(ms(sent - t0)) }
            toConfirm.append(ms(confirmed - t0))
        }

        // Throughput: all queued at once, until the last leaves the queue.
        let t0 = ContinuousClock.now
        var lastSeq: Int64 = 0
        for i in 0..<turns { lastSeq = try await sender.enqueue(sessionKey: key, message: "throughput turn \(i)").seq }
        _ = try await waitConfirmed(lastSeq)
        let outboxSeconds = ms(ContinuousClock.now - t0) / 1000
        await sender.stop()
        sink.finish()

        // Baseline: bare chat.send, one after another, on the same session.
        let r0 = ContinuousClock.now
        for i in 0..<turns {
            let params = ChatSendParams(sessionKey: key, message: "raw turn \(i)", idempotencyKey: UUID().uuidString.lowercased())
            _ = try await session.request(GatewayMethod.chatSend, params: try JSONValue(encoding: params), timeoutMs: 30_000)
        }
        let rawSeconds = ms(ContinuousClock.now - r0) / 1000


        return (median(toSend), Double(turns) / outboxSeconds, Double(turns) / rawSeconds, median(toConfirm))
    }

    struct BenchError: Error, CustomStringConvertible {
        var description: String
        init(_ d: String) { description = d }
    }

    private static func ms(_ d: Duration) -> Double {
        Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15
    }

    private static func median(_ xs: [Double]) -> Double {
        guard !xs.isEmpty else { return .nan }
        let s = xs.sorted()
        return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
    }
}
