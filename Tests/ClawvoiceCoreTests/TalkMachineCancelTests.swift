// The gateway giving up on an invoked command (node.invoke.cancel, its timeoutMs) as a
// TalkMachine input, and the `delivering` phase: a cancel there answers what the outbox really
// did with the turn. Pure: input by input, and every order of the new inputs with the old ones.

@testable import ClawvoiceCore
import Foundation
import Testing

extension TalkMachine.Action {
    var withdrawal: String? { if case .withdrawTurn(let id, _) = self { return id }; return nil }
    var closedReply: String? { if case .closeReply(let r) = self { return r }; return nil }
}

@Suite struct TalkMachineInvokeEndTests {
    /// Issue 27, defect 1: the timeout ends the capture and nothing is sent.
    @Test func aTimeoutWhileCapturingEndsTheCaptureAndSendsNothing() {
        var d = MachineDriver()
        let (o, _) = d.command(.once)
        let out = d.feed(.invokeEnded(token: o, .timedOut))
        #expect(out.contains { $0.isCancel }, "the relay session is closed")
        #expect(d.answers(o) == [.result(PTTResult(captureId: "c1", status: .cancelled))])
        #expect(d.m.isIdle)
        #expect(d.feed(.relayFinished(id: "c1", transcript)).compactMap { $0.deliver }.isEmpty)
    }

    /// Issue 27, defect 2: node.invoke.cancel is a talk input, not a task nobody listens to.
    @Test func anInvokeCancelWhileTheRelayClosesDropsTheLateResult() {
        var d = MachineDriver()
        d.command(.start)
        let (s, _) = d.command(.stop)
        d.feed(.invokeEnded(token: s, .cancelled))
        #expect(d.answers(s) == [.result(PTTResult(captureId: "c1", status: .cancelled))])
        #expect(d.feed(.relayFinished(id: "c1", transcript)).compactMap { $0.deliver }.isEmpty)
        #expect(d.m.isIdle)
    }

    @Test func anEndedCommandWaitingForItsPartsNeverStarts() {
        var d = MachineDriver(ready: false)
        let (o, _) = d.command(.once)
        let (s, _) = d.command(.start)  // refused: one start at a time
        d.feed(.invokeEnded(token: o, .timedOut))
        #expect(d.answers(o) == [.result(PTTResult(captureId: "c1", status: .cancelled))])
        #expect(d.answers(s) == [.failed(.alreadyStarting)])
        d.feed(.microphone(.live))
        d.feed(.operatorState(connected: true, mainSessionKey: "agent:main:main"))
        #expect(d.count(\.isOpen) == 0)
    }

    @Test func aTurnSomeoneElseStillWaitsForGoesOn() {
        var d = MachineDriver()
        let (o, _) = d.command(.once)
        let (s, _) = d.command(.stop)  // e.g. `clawvoice ptt stop` on the same capture
        #expect(d.feed(.invokeEnded(token: o, .cancelled)).isEmpty)
        d.feed(.relayFinished(id: "c1", transcript))
        d.feed(.delivered(id: "c1", .queued, idempotencyKey: "turn-c1"))
        let queued = TalkMachine.Answer.result(PTTResult(captureId: "c1", transcript: "hello there", status: .queued))
        #expect(d.answers(o) == [queued] && d.answers(s) == [queued], "both hear what really happened")
    }

    @Test func anAnsweredCommandIgnoresItsLateEnd() {
        var d = MachineDriver()
        let (t, _) = d.command(.start)
        #expect(d.feed(.invokeEnded(token: t, .cancelled)).allSatisfy { if case .wakeAt = $0 { true } else { false } })
        #expect(d.m.activeCaptureId == "c1", "the held capture stays")
    }
}

@Suite struct TalkMachineDeliveringTests {
    /// A capture whose turn is being written: returns the token of the stop that waits for it.
    static func delivering(_ d: inout MachineDriver) -> Int {
        d.command(.start)
        let (s, _) = d.command(.stop)
        d.feed(.relayFinished(id: "c1", transcript))
        return s
    }

    /// Issue 27, defect 3: a cancel between deliver and delivered answered `cancelled` while the
    /// turn was still sent and its reply spoken.
    @Test func aCancelWhileDeliveringWaitsForTheOutboxAndTakesTheTurnBack() {
        var d = MachineDriver()
        let o = Self.delivering(&d)
        guard case .delivering = d.m.phase else { Issue.record("not delivering: \(d.m.phase)"); return }
        let (c, out) = d.command(.cancel)
        #expect(out.compactMap(\.withdrawal) == ["c1"])
        #expect(d.answers(c).isEmpty && d.answers(o).isEmpty, "no answer before the outbox says")
        #expect(d.feed(.delivered(id: "c1", .queued, idempotencyKey: "turn-c1")).allSatisfy { if case .answer = $0 { false } else { true } })
        let taken = d.feed(.withdrawn(id: "c1", removed: true))
        #expect(taken.compactMap(\.closedReply) == ["turn-c1"], "its reply is not spoken")
        #expect(d.answers(c) == [.result(PTTResult(captureId: "c1", status: .cancelled))])
        #expect(d.answers(o) == [.result(PTTResult(captureId: "c1", status: .cancelled))])
        #expect(d.m.isIdle)
    }

    @Test func aCancelThatComesTooLateSaysTheTurnIsQueued() {
        var d = MachineDriver()
        let o = Self.delivering(&d)
        let (c, _) = d.command(.cancel)
        let out = d.feed(.withdrawn(id: "c1", removed: false))
        let queued = TalkMachine.Answer.result(PTTResult(captureId: "c1", transcript: "hello there", status: .queued))
        #expect(d.answers(c) == [queued] && d.answers(o) == [queued])
        #expect(out.compactMap(\.closedReply).isEmpty, "a sent turn's reply is followed")
        #expect(d.m.replies["turn-c1"] != nil)
    }

    @Test func aTurnTakenBackBeforeItWasWrittenIsCancelled() {
        var d = MachineDriver()
        let o = Self.delivering(&d)
        d.feed(.invokeEnded(token: o, .timedOut))
        #expect(d.log.compactMap(\.withdrawal) == ["c1"])
        d.feed(.delivered(id: "c1", .cancelled, idempotencyKey: "turn-c1"))
        #expect(d.answers(o) == [.result(PTTResult(captureId: "c1", status: .cancelled))])
        #expect(d.m.isIdle && d.m.replies.isEmpty)
        #expect(!d.feed(.withdrawn(id: "c1", removed: true)).contains { if case .answer = $0 { true } else { false } },
                "the second report changes nothing")
    }

    @Test func anInterruptWhileDeliveringKeepsTheCommittedTurnAndSaysSo() {
        var d = MachineDriver()
        let o = Self.delivering(&d)
        let out = d.feed(.interrupt(reason: "connection to the gateway lost"))
        #expect(out.compactMap(\.closedReply) == ["turn-c1"])
        #expect(d.answers(o).isEmpty)
        d.feed(.delivered(id: "c1", .queued, idempotencyKey: "turn-c1"))
        #expect(d.answers(o) == [.result(PTTResult(captureId: "c1", transcript: "hello there", status: .queued))])
        #expect(d.m.isIdle)
    }

    /// Every order of start/stop/cancel/once, the relay's result, the outbox write, the gateway
    /// giving up on the oldest waiting command and the outbox's answer to a withdrawal: every
    /// command is answered once, every relay closed, and no answer lies about the turn: `queued`
    /// exactly when it went out, `cancelled` never for a turn that went out.
    @Test func everyOrderWithCancelsAndTimeoutsAnswersTruthfully() {
        let commands: [TalkMachine.Command] = [.start, .stop, .cancel, .once]
        var sequences: [[Int]] = [[]]
        for _ in 0..<4 { sequences = sequences.flatMap { s in (0..<9).map { s + [$0] } } }
        for seq in sequences {
            var d = MachineDriver()
            var tokens: [Int] = []
            var sent: Set<String> = []
            func withdrawing(_ d: MachineDriver) -> Bool {
                if case .delivering(_, let w) = d.m.phase { return w.withdrawing }
                return false
            }
            func step(_ e: Int, _ d: inout MachineDriver) {
                let phase = d.m.phase
                switch e {
                case 0...3:
                    tokens.append(d.command(commands[e]).token)
                case 4:
                    if case .ending(let c) = phase { d.feed(.relayFinished(id: c.id, transcript)) }
                case 5:
                    if case .delivering(let c, let w) = phase {
                        if !w.withdrawing { sent.insert(c.id) }
                        d.feed(.delivered(id: c.id, .queued, idempotencyKey: w.idempotencyKey))
                    }
                case 6:
                    let waiting = tokens.first { d.answers($0).isEmpty }
                    if let t = waiting { d.feed(.invokeEnded(token: t, t % 2 == 0 ? .cancelled : .timedOut)) }
                case 7, 8:
                    if case .delivering(let c, let w) = phase, w.withdrawing {
                        if e == 8 { sent.insert(c.id) }
                        d.feed(.withdrawn(id: c.id, removed: e == 7))
                    }
                default: break
                }
            }
            for e in seq { step(e, &d) }
            // Finish whatever is still live: the outbox takes back what it is asked to.
            for _ in 0..<4 {
                if case .capturing = d.m.phase { d.command(.stop) }
                if case .ending = d.m.phase { step(4, &d) }
                if withdrawing(d) { step(7, &d) } else if case .delivering = d.m.phase { step(5, &d) }
            }
            #expect(d.m.isIdle, "\(seq)")
            for t in tokens { #expect(d.answers(t).count == 1, "command \(t) of \(seq)") }
            var opened: Set<String> = [], closed: Set<String> = [], delivered: [String] = [], replyClosed: Set<String> = []
            for a in d.log {
                switch a {
                case .openCapture(let id, _, _): opened.insert(id)
                case .finishCapture(let id), .cancelCapture(let id): closed.insert(id)
                case .deliver(let id, _, _, _, _): delivered.append(id)
                case .closeReply(let r): replyClosed.insert(r)
                case .answer(_, .result(let r)):
                    if r.status == .queued { #expect(sent.contains(r.captureId), "queued but not sent: \(seq)") }
                    if r.status == .cancelled { #expect(!sent.contains(r.captureId), "cancelled but sent: \(seq)") }
                default: break
                }
            }
            #expect(opened == closed, "every relay is closed: \(seq)")
            #expect(delivered.count == Set(delivered).count, "one turn per capture: \(seq)")
            for id in delivered where !sent.contains(id) {
                #expect(replyClosed.contains("turn-\(id.lowercased())"), "an unsent turn's reply is not followed: \(seq)")
            }
        }
    }
}
