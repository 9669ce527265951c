// ConnectionMachine driven as GatewaySession drives it: sleeping until `nextDeadlineMs` and
// feeding `.wake(dueMs:)`, with no poll in between. Explicit clock values, no sockets.

import Testing
import ClawvoiceCore
import GatewayProtocol

// The challenge and hello-ok are ConnectionMachineTestSupport.swift's.

@Suite struct `Connection machine: sleeping until the next deadline` {
    @Test func `each phase names its deadline, and only events move it`() {
        var m = ConnectionMachine()
        #expect(m.nextDeadlineMs == nil, "idle: nothing to wait for")
        _ = m.handle(.start, nowMs: 1_000)
        #expect(m.nextDeadlineMs == 1_000 + m.timing.challengeTimeoutMs)
        _ = m.handle(.challenge(challenge), nowMs: 1_200)
        #expect(m.nextDeadlineMs == 1_000 + m.timing.handshakeTimeoutMs)
        _ = m.handle(.helloOk(hello(tickIntervalMs: 1_000)), nowMs: 1_300)
        let watchdog: Int64 = 1_300 + 2 * 1_000 + 1  // one past two tick intervals of silence
        #expect(m.nextDeadlineMs == watchdog)
        _ = m.handle(.inbound, nowMs: 2_000)
        #expect(m.nextDeadlineMs == 4_001)
        _ = m.handle(.stop, nowMs: 2_100)
        #expect(m.nextDeadlineMs == nil)
    }

    @Test func `a wake at the watchdog's deadline after a long quiet sleep drops a silent gateway, no stall`() {
        var m = ConnectionMachine()
        _ = m.handle(.start, nowMs: 0)
        _ = m.handle(.challenge(challenge), nowMs: 10)
        _ = m.handle(.helloOk(hello(tickIntervalMs: 30_000)), nowMs: 20)
        let due = m.nextDeadlineMs!
        #expect(due == 60_021)
        // Asleep for a minute (a poll driver would call that a stall): the wake is on time.
        let actions = m.handle(.wake(dueMs: due), nowMs: due, random: 0)
        #expect(actions.first == .closeSocket(code: 4000, reason: "tick timeout"))
        #expect(!actions.contains { if case .clientStalled = $0 { return true }; return false })
        guard case .waiting(let until, _) = m.phase else { Issue.record("not waiting: \(m.phase)"); return }
        #expect(m.nextDeadlineMs == until)
        #expect(m.handle(.wake(dueMs: until), nowMs: until) == [.openSocket])
    }

    @Test func `an early wake (the deadline moved later) does nothing`() {
        var m = ConnectionMachine()
        _ = m.handle(.start, nowMs: 0)
        _ = m.handle(.challenge(challenge), nowMs: 0)
        _ = m.handle(.helloOk(hello(tickIntervalMs: 1_000)), nowMs: 0)
        let armed = m.nextDeadlineMs!
        _ = m.handle(.inbound, nowMs: 1_500)  // a tick: the watchdog moves to 3 501
        #expect(m.handle(.wake(dueMs: armed), nowMs: armed) == [])
        #expect(m.phase == .connected)
        #expect(m.nextDeadlineMs == 3_501)
    }

    @Test func `a wake long after it was due is a stall: reported, and the gateway's silence not counted`() {
        var m = ConnectionMachine()
        _ = m.handle(.start, nowMs: 0)
        _ = m.handle(.challenge(challenge), nowMs: 0)
        _ = m.handle(.helloOk(hello(tickIntervalMs: 1_000)), nowMs: 0)
        let due = m.nextDeadlineMs!  // 2 001
        // The process did not run from before the deadline until 5 001: 3 s late.
        #expect(m.handle(.wake(dueMs: due), nowMs: due + 3_000) == [.clientStalled(ms: 3_000)], "the link is kept")
        #expect(m.phase == .connected)
        // The ticks that waited unread in the socket arrive now and keep the link.
        _ = m.handle(.inbound, nowMs: due + 3_010)
        #expect(m.nextDeadlineMs == due + 3_010 + 2_001)
        // A gateway that really is silent is still dropped, a full watchdog period later.
        let next = m.nextDeadlineMs!
        #expect(m.handle(.wake(dueMs: next), nowMs: next, random: 0).first == .closeSocket(code: 4000, reason: "tick timeout"))
    }

    @Test func `a late wake during the handshake moves its deadline; idle and waiting machines report none`() {
        var m = ConnectionMachine()
        #expect(m.handle(.wake(dueMs: 0), nowMs: 50_000) == [], "idle")
        _ = m.handle(.start, nowMs: 100_000)
        _ = m.handle(.challenge(challenge), nowMs: 100_050)
        let due = m.nextDeadlineMs!  // 130 000
        #expect(m.handle(.wake(dueMs: due - 20_000), nowMs: due - 20_000 + 25_000) == [.clientStalled(ms: 25_000)])
        #expect(m.phase == .handshaking)
        #expect(m.nextDeadlineMs! > due, "the handshake gets the time the process lost")
        let later = m.nextDeadlineMs!
        #expect(m.handle(.wake(dueMs: later), nowMs: later).first == .closeSocket(code: 1000, reason: "handshake timeout"))
        guard case .waiting(let until, _) = m.phase else { Issue.record("not waiting: \(m.phase)"); return }
        #expect(m.handle(.wake(dueMs: until), nowMs: until + 5_000) == [.openSocket], "a late wake out of a wait just opens")
    }
}
