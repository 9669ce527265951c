import CLI
import Daemon
import ClawvoiceTesting
import NodeRuntime
import Testing

@Suite struct `Outbox bench` {
    @Test func `the outbox bench runs and reports sane figures`() async throws {
        let r = try await OutboxBench.measure(turns: 30)
        print("outbox bench (30 turns): enqueue→ack median \(r.enqueueToSendMs) ms, enqueue→confirmed median \(r.enqueueToConfirmMs) ms, "
              + "\(r.turnsPerSecond) turns/s through the outbox, \(r.rawTurnsPerSecond) raw chat.send/s")
        #expect(r.enqueueToSendMs > 0 && r.enqueueToSendMs < 1_000)
        #expect(r.enqueueToConfirmMs >= r.enqueueToSendMs)
        #expect(r.turnsPerSecond > 5)
        #expect(r.rawTurnsPerSecond > r.turnsPerSecond / 10)
    }
}
