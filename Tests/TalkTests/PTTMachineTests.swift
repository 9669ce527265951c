// Every transition of the push-to-talk machine, including the impossible ones.

import Testing
@testable import Talk

@Suite struct PTTMachineTests {
    @Test func `start opens a capture and a second start returns the same id`() {
        var m = PTTMachine()
        #expect(m.start(freshId: "a") == .begin("a"))
        #expect(m.start(freshId: "b") == .alreadyStarting)
        m.started("a")
        #expect(m.phase == .capturing(id: "a", once: false))
        #expect(m.start(freshId: "c") == .alreadyActive("a"))
    }

    @Test func `stop and cancel with nothing live answer idle with the fresh id`() {
        var m = PTTMachine()
        #expect(m.stop(freshId: "x") == .idle("x"))
        #expect(m.cancel(freshId: "y") == .idle("y"))
        #expect(m.phase == .idle)
    }

    @Test func `stop ends the capture and a concurrent stop joins it`() {
        var m = PTTMachine()
        _ = m.start(freshId: "a")
        m.started("a")
        #expect(m.stop(freshId: "x") == .end("a"))
        #expect(m.phase == .ending(id: "a"))
        #expect(m.stop(freshId: "y") == .join("a"))
        #expect(m.start(freshId: "z") == .alreadyActive("a"))
        m.finished("a")
        #expect(m.phase == .idle)
    }

    @Test func `cancel discards a live, starting or ending capture`() {
        for setup in 0..<3 {
            var m = PTTMachine()
            _ = m.start(freshId: "a")
            if setup >= 1 { m.started("a") }
            if setup == 2 { _ = m.stop(freshId: "s") }
            #expect(m.cancel(freshId: "x") == .discard("a"))
            #expect(m.phase == .idle)
        }
    }

    @Test func `once while anything is live answers busy with the live id`() {
        var m = PTTMachine()
        #expect(m.once(freshId: "o") == .begin("o"))
        #expect(m.phase == .starting(id: "o", once: true))
        #expect(m.once(freshId: "p") == .busy("o"))
        m.started("o")
        #expect(m.phase == .capturing(id: "o", once: true))
        #expect(m.once(freshId: "q") == .busy("o"))
        #expect(m.start(freshId: "r") == .alreadyActive("o"))
    }

    @Test func `a failed start returns to idle and a stale id changes nothing`() {
        var m = PTTMachine()
        _ = m.start(freshId: "a")
        m.startFailed("zzz")
        #expect(m.activeCaptureId == "a")
        m.startFailed("a")
        #expect(m.phase == .idle)
        m.started("a")
        #expect(m.phase == .idle, "a late started() for a failed capture is ignored")
        m.finished("a")
        #expect(m.phase == .idle)
    }

    @Test func `a finished capture that was cancelled and replaced does not end the new one`() {
        var m = PTTMachine()
        _ = m.start(freshId: "a")
        m.started("a")
        _ = m.cancel(freshId: "x")
        _ = m.start(freshId: "b")
        m.finished("a")
        #expect(m.activeCaptureId == "b")
    }

    @Test func `status strings are the gateway's`() {
        #expect(PTTStatus.notQueued.rawValue == "not_queued")
        #expect([PTTStatus.queued, .empty, .idle, .cancelled, .busy].map(\.rawValue) == ["queued", "empty", "idle", "cancelled", "busy"])
        #expect(PTTError.alreadyStarting.description == "ALREADY_STARTING: push-to-talk is already starting")
    }
}
