// ServiceGroup in process: failure ends the group, a graceful shutdown stays within its bound,
// a service that ignores cancellation is named once the bound is over, signals come as a stream.

import Foundation
import GatewayProtocol
import Testing

private struct Boom: Error {}

/// Polls until `condition` holds (the cooperative pool may be busy with other tests).
private func eventually(_ condition: () -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(10)
    while !condition() && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
    #expect(condition())
}

/// Notes that it started, waits until cancelled, then notes that.
private func untilCancelled(_ name: String, _ log: Locked<[String]>) -> ServiceGroup.Entry {
    ServiceGroup.Entry(name) {
        log.withLock { $0.append("\(name) started") }
        while !Task.isCancelled { try? await Task.sleep(for: .seconds(60)) }
        log.withLock { $0.append("\(name) cancelled") }
    }
}

@Suite("ServiceGroup")
struct ServiceGroupTests {
    @Test("a failing service ends the group and the others are cancelled")
    func failureEndsGroup() async throws {
        let log = Locked<[String]>([])
        let group = ServiceGroup([
            untilCancelled("a", log),
            ServiceGroup.Entry("fails") { try await Task.sleep(for: .milliseconds(50)); throw Boom() },
            untilCancelled("b", log),
        ])
        let start = ContinuousClock.now
        do {
            try await group.run()
            Issue.record("run() returned although a service failed")
        } catch let failed as ServiceGroup.ServiceFailed {
            #expect(failed.name == "fails")
            #expect(failed.error is Boom)
        }
        #expect(log.value.filter { $0.hasSuffix("cancelled") }.sorted() == ["a cancelled", "b cancelled"])
        #expect(ContinuousClock.now - start < .seconds(5))
    }

    @Test("a graceful shutdown ends every service within the bound, nothing reported")
    func gracefulWithinBound() async throws {
        let log = Locked<[String]>([])
        let overdue = Locked<[[String]]>([])
        let reasons = Locked<[String]>([])
        let group = ServiceGroup([untilCancelled("a", log), untilCancelled("b", log),
                                  ServiceGroup.Entry("probe") { log.withLock { $0.append("probe done") } }],
                                 gracePeriod: .seconds(10),
                                 onShutdown: { why in reasons.withLock { $0.append(why) } },
                                 onOverdue: { names in overdue.withLock { $0.append(names) } })
        async let ran: Void = group.run()
        // A service that returns on its own is done; the others keep running.
        try await eventually { Set(log.value) == ["a started", "b started", "probe done"] }
        let asked = ContinuousClock.now
        group.triggerGracefulShutdown(reason: "test")
        group.triggerGracefulShutdown(reason: "twice")
        try await ran
        #expect(ContinuousClock.now - asked < .seconds(10))
        #expect(log.value.filter { !$0.hasSuffix("started") }.sorted() == ["a cancelled", "b cancelled", "probe done"])
        #expect(reasons.value == ["test"])
        #expect(overdue.value.isEmpty)
    }

    @Test("a service that ignores cancellation is named after the bound, and waited for")
    func overdueReported() async throws {
        let log = Locked<[String]>([])
        let gate = Gate()
        let overdueAt = Locked<(ContinuousClock.Instant, [String])?>(nil)
        let group = ServiceGroup([
            untilCancelled("polite", log),
            ServiceGroup.Entry("stubborn") { await gate.wait(); log.withLock { $0.append("stubborn ended") } },
        ], gracePeriod: .seconds(2), onOverdue: { names in
            overdueAt.withLock { $0 = (.now, names) }
            gate.open()
        })
        async let ran: Void = group.run()
        try await eventually { log.value == ["polite started"] }
        let asked = ContinuousClock.now
        group.triggerGracefulShutdown()
        try await ran
        let (at, names) = try #require(overdueAt.value)
        #expect(names == ["stubborn"])
        #expect(at - asked >= .seconds(2))
        // run() returned only after the stubborn service did: no task outlives the group.
        #expect(log.value.sorted() == ["polite cancelled", "polite started", "stubborn ended"])
    }

    @Test("signals come as a stream: a handled one is not a shutdown, the next one is")
    func signalsAsStream() async throws {
        let log = Locked<[String]>([])
        let seen = Locked<[Int32]>([])
        let reasons = Locked<[String]>([])
        let (signals, deliver) = AsyncStream.makeStream(of: Int32.self)
        let group = ServiceGroup([untilCancelled("a", log)], signals: signals,
                                 onSignal: { n in seen.withLock { $0.append(n) }; return n != SIGHUP },
                                 onShutdown: { why in reasons.withLock { $0.append(why) } })
        async let ran: Void = group.run()
        deliver.yield(SIGHUP)
        try await eventually { seen.value == [SIGHUP] }
        #expect(reasons.value.isEmpty, "SIGHUP was handled, not a shutdown")
        deliver.yield(SIGTERM)
        try await ran
        #expect(seen.value == [SIGHUP, SIGTERM])
        #expect(reasons.value == ["signal \(SIGTERM)"])
        #expect(log.value == ["a started", "a cancelled"])
    }

    @Test("a service that ends the group by returning cancels the rest")
    func endsGroupOnReturn() async throws {
        let log = Locked<[String]>([])
        let group = ServiceGroup([untilCancelled("a", log),
                                  ServiceGroup.Entry("loop", endsGroup: true) { try await Task.sleep(for: .milliseconds(30)) }])
        try await group.run()
        #expect(log.value.last == "a cancelled")
    }
}
