// TalkMachine, transition by transition: every PTT command against every phase, the
// interleavings of start/stop/cancel/once with the relay's results, the parts of a turn and
// session switches. Pure: no audio, no sockets. The speaker's tests are in
// TalkMachineSpeakerTests.swift; wake, follow-up, voice-note and endpoint turns in TalkMachineTurnTests.swift.

@testable import ClawvoiceCore
import Foundation
import GatewayProtocol
import Testing

/// Drives a machine with a clock of its own and keeps what it answered.
struct MachineDriver {
    var m: TalkMachine
    var now: Int64 = 1_000
    var log: [TalkMachine.Action] = []
    private var token = 0
    private var ids = 0

    init(settings: TalkMachine.Settings = TalkMachine.Settings(), ready: Bool = true, chosen: String? = nil) {
        m = TalkMachine(settings: settings, chosenSession: chosen)
        if ready {
            feed(.microphone(.live))
            feed(.operatorState(connected: true, mainSessionKey: "agent:main:main"))
        }
    }

    @discardableResult
    mutating func feed(_ input: TalkMachine.Input) -> [TalkMachine.Action] {
        let out = m.handle(input, nowMs: now)
        log += out
        return out
    }

    /// Sends a command; returns its token and the actions.
    @discardableResult
    mutating func command(_ c: TalkMachine.Command) -> (token: Int, actions: [TalkMachine.Action]) {
        token += 1
        ids += 1
        let t = token
        return (t, feed(.command(c, token: t, freshId: "c\(ids)")))
    }

    mutating func advance(_ ms: Int64) -> [TalkMachine.Action] {
        now += ms
        return feed(.tick)
    }

    func answers(_ token: Int) -> [TalkMachine.Answer] {
        log.compactMap { if case .answer(let t, let a) = $0, t == token { return a }; return nil }
    }

    func count(_ match: (TalkMachine.Action) -> Bool) -> Int { log.filter(match).count }
}

func frame(loud: Bool, ms: Int = 20) -> PCMBuffer {
    let n = 16 * ms
    let samples = (0..<n).map { i in loud ? Int16(8000 * sin(Double(i) * 0.3)) : 0 }
    return PCMBuffer(format: .voice, samples: samples)
}

extension TalkMachine.Action {
    var isOpen: Bool { if case .openCapture = self { return true }; return false }
    var isFinish: Bool { if case .finishCapture = self { return true }; return false }
    var isCancel: Bool { if case .cancelCapture = self { return true }; return false }
    var isStopSpeech: Bool { if case .stopSpeech = self { return true }; return false }
    var deliver: (message: String, session: String?, voiceNote: Bool)? {
        if case .deliver(_, let m, let v, let s, _) = self { return (m, s, v) }
        return nil
    }
}

let transcript = TalkMachine.Finished(outcome: .transcript("hello there"), audioMs: 1200, hasVoiceNote: true)

@Suite struct TalkMachineCommandTests {
    @Test func startAnswersTheIdAndOpensOneCapture() {
        var d = MachineDriver()
        let (t, out) = d.command(.start)
        #expect(d.answers(t) == [.captureId("c1")])
        #expect(out.filter { $0.isOpen }.count == 1)
        #expect(out.contains { $0.isStopSpeech }, "a new capture silences the assistant")
        #expect(d.m.activeCaptureId == "c1")
        // Idempotent: a second start answers the same id and opens nothing.
        let (t2, out2) = d.command(.start)
        #expect(d.answers(t2) == [.captureId("c1")])
        #expect(!out2.contains { $0.isOpen })
    }

    @Test func stopAndCancelWithNothingLiveAnswerIdleWithAFreshId() {
        var d = MachineDriver()
        let (s, _) = d.command(.stop)
        let (c, _) = d.command(.cancel)
        #expect(d.answers(s) == [.result(PTTResult(captureId: "c1", status: .idle))])
        #expect(d.answers(c) == [.result(PTTResult(captureId: "c2", status: .idle))])
    }

    @Test func stopEndsTheCaptureAndAnswersOnceTheTurnIsQueued() {
        var d = MachineDriver()
        d.command(.start)
        let (s, out) = d.command(.stop)
        #expect(out.contains { $0.isFinish })
        #expect(d.answers(s).isEmpty, "stop waits for the turn")
        let delivered = d.feed(.relayFinished(id: "c1", transcript))
        #expect(delivered.compactMap { $0.deliver }.first?.message == "hello there")
        #expect(delivered.compactMap { $0.deliver }.first?.session == "agent:main:main")
        d.feed(.delivered(id: "c1", .queued, idempotencyKey: "turn-c1"))
        #expect(d.answers(s) == [.result(PTTResult(captureId: "c1", transcript: "hello there", status: .queued))])
        #expect(d.m.isIdle)
    }

    @Test func concurrentStopsJoinOneEnd() {
        var d = MachineDriver()
        d.command(.start)
        let (a, _) = d.command(.stop)
        let (b, out) = d.command(.stop)
        #expect(!out.contains { $0.isFinish }, "the second stop joins")
        d.feed(.relayFinished(id: "c1", transcript))
        d.feed(.delivered(id: "c1", .queued, idempotencyKey: "turn-c1"))
        #expect(d.answers(a) == d.answers(b))
        #expect(d.count(\.isFinish) == 1)
    }

    @Test func onceWhileLiveIsBusy() {
        var d = MachineDriver()
        d.command(.start)
        let (o, _) = d.command(.once)
        #expect(d.answers(o) == [.result(PTTResult(captureId: "c1", status: .busy))])
    }

    @Test func onceEndsOnSilenceAfterSpeech() {
        var s = TalkMachine.Settings()
        s.silenceTimeoutMs = 200
        var d = MachineDriver(settings: s)
        let (o, _) = d.command(.once)
        for _ in 0..<30 { d.feed(.frame(frame(loud: false), speaker: .silent)) }  // calibrate on silence
        for _ in 0..<10 { d.feed(.frame(frame(loud: true), speaker: .silent)) }
        for _ in 0..<9 { d.feed(.frame(frame(loud: false), speaker: .silent)) }
        #expect(d.count(\.isFinish) == 0, "180 ms of quiet is not yet the end")
        d.feed(.frame(frame(loud: false), speaker: .silent))
        #expect(d.count(\.isFinish) == 1)
        d.feed(.relayFinished(id: "c1", transcript))
        d.feed(.delivered(id: "c1", .queued, idempotencyKey: "turn-c1"))
        #expect(d.answers(o).first == .result(PTTResult(captureId: "c1", transcript: "hello there", status: .queued)))
    }

    @Test func aHeldCaptureIgnoresSilenceButNotItsCap() {
        var s = TalkMachine.Settings()
        s.silenceTimeoutMs = 200
        s.captureMaxMs = 2_000
        var d = MachineDriver(settings: s)
        d.command(.start)
        for _ in 0..<30 { d.feed(.frame(frame(loud: false), speaker: .silent)) }
        for _ in 0..<10 { d.feed(.frame(frame(loud: true), speaker: .silent)) }
        for _ in 0..<20 { d.feed(.frame(frame(loud: false), speaker: .silent)) }
        #expect(d.count(\.isFinish) == 0)
        // The microphone stops delivering: the timer still ends the capture.
        _ = d.advance(2_600)
        #expect(d.count(\.isFinish) == 1)
    }
}

/// The defects of the old controller, as input sequences (issue 10).
@Suite struct TalkMachineInterleavingTests {
    /// Defect 1: cancel while the start was still opening left the capture set and its relay open.
    @Test func cancelRightAfterStartClosesTheRelayAndLeavesNothingSet() {
        var d = MachineDriver()
        d.command(.start)
        let (c, out) = d.command(.cancel)
        #expect(out.filter { $0.isCancel }.count == 1, "the relay stream is cancelled (and its session closed)")
        #expect(d.answers(c) == [.result(PTTResult(captureId: "c1", status: .cancelled))])
        #expect(d.m.isIdle)
        // Frames now go to pre-roll and wake again, not to a capture.
        let next = d.feed(.frame(frame(loud: false), speaker: .silent))
        #expect(next.contains { if case .listen = $0 { return true }; return false })
        #expect(!next.contains { if case .appendFrame = $0 { return true }; return false })
    }

    /// Defect 2: stop in the same window left the machine ending for good.
    @Test func stopRightAfterStartFinishesOnItsOwn() {
        var d = MachineDriver()
        d.command(.start)
        let (s, _) = d.command(.stop)
        d.feed(.relayFinished(id: "c1", TalkMachine.Finished(outcome: .transcript(nil), audioMs: 40, hasVoiceNote: true)))
        #expect(d.answers(s) == [.result(PTTResult(captureId: "c1", status: .empty))])
        #expect(d.m.isIdle)
    }

    @Test func cancelWhileEndingDropsTheLateResult() {
        var d = MachineDriver()
        d.command(.start)
        let (s, _) = d.command(.stop)
        let (c, _) = d.command(.cancel)
        #expect(d.answers(s) == [.result(PTTResult(captureId: "c1", status: .cancelled))])
        #expect(d.answers(c) == [.result(PTTResult(captureId: "c1", status: .cancelled))])
        let late = d.feed(.relayFinished(id: "c1", transcript))
        #expect(late.compactMap { $0.deliver }.isEmpty, "a cancelled turn is never sent")
        // And a new capture can start at once.
        let (t, _) = d.command(.start)
        #expect(d.answers(t) == [.captureId("c4")])
    }

    @Test func aLateResultOfAnOlderCaptureDoesNotTouchTheNewOne() {
        var d = MachineDriver()
        d.command(.start)
        d.command(.stop)
        d.command(.cancel)
        d.command(.start)  // c4
        let out = d.feed(.relayFinished(id: "c1", transcript))
        #expect(out.compactMap { $0.deliver }.isEmpty)
        #expect(d.m.activeCaptureId == "c4")
    }

    /// Every order of start/stop/cancel/once, with the relay's result at every point in between:
    /// each command is answered exactly once, no capture is left open, every opened relay is
    /// finished or cancelled exactly once, and at most one turn is delivered per capture.
    @Test func everyInterleavingAnswersEveryCommandOnceAndClosesEveryRelay() {
        let commands: [TalkMachine.Command] = [.start, .stop, .cancel, .once]
        var sequences: [[Int]] = [[]]
        for _ in 0..<4 { sequences = sequences.flatMap { s in (0..<5).map { s + [$0] } } }  // 4 = "relay result"
        for seq in sequences {
            var d = MachineDriver()
            var tokens: [Int] = []
            for step in seq {
                if step < 4 {
                    tokens.append(d.command(commands[step]).token)
                } else if case .ending(let c) = d.m.phase {
                    d.feed(.relayFinished(id: c.id, transcript))
                    if case .delivering = d.m.phase { d.feed(.delivered(id: c.id, .queued, idempotencyKey: "turn-\(c.id.lowercased())")) }
                }
            }
            // Finish whatever is still live.
            if case .capturing = d.m.phase { d.command(.stop) }
            if case .ending(let c) = d.m.phase {
                d.feed(.relayFinished(id: c.id, transcript))
                if case .delivering = d.m.phase { d.feed(.delivered(id: c.id, .queued, idempotencyKey: "turn-\(c.id.lowercased())")) }
            }
            #expect(d.m.isIdle, "\(seq)")
            for t in tokens { #expect(d.answers(t).count == 1, "command \(t) of \(seq)") }
            var opened: [String] = [], closed: [String] = [], delivered: [String] = []
            for a in d.log {
                switch a {
                case .openCapture(let id, _, _): opened.append(id)
                case .finishCapture(let id): closed.append(id)
                case .cancelCapture(let id): if !closed.contains(id) { closed.append(id) }
                case .deliver(let id, _, _, _, _): delivered.append(id)
                default: break
                }
            }
            #expect(Set(opened) == Set(closed), "every relay is closed: \(seq)")
            #expect(delivered.count == Set(delivered).count, "one turn per capture: \(seq)")
        }
    }
}

@Suite struct TalkMachinePartsTests {
    /// Defect 7: a command right after hello, while the microphone is still coming up, waits.
    @Test func aStartBeforeTheMicrophoneIsLiveWaitsForIt() {
        var d = MachineDriver(ready: false)
        d.feed(.operatorState(connected: true, mainSessionKey: "agent:main:main"))
        let (o, out) = d.command(.once)
        #expect(!out.contains { $0.isOpen })
        #expect(d.answers(o).isEmpty, "not refused while the microphone starts")
        d.now += 870
        let opened = d.feed(.microphone(.live))
        #expect(opened.contains { $0.isOpen }, "it opens the moment the microphone is live")
    }

    @Test func aStartBeforeTheOperatorSessionWaitsForIt() {
        var d = MachineDriver(ready: false)
        d.feed(.microphone(.live))
        let (t, _) = d.command(.start)
        #expect(d.answers(t).isEmpty)
        d.now += 20
        d.feed(.operatorState(connected: true, mainSessionKey: "agent:main:main"))
        #expect(d.answers(t) == [.captureId("c1")])
    }

    @Test func theWaitEndsWithTheReasonAfterAFewSeconds() {
        var d = MachineDriver(ready: false)
        d.feed(.operatorState(connected: true, mainSessionKey: nil))
        let (t, _) = d.command(.once)
        _ = d.advance(2_900)
        #expect(d.answers(t).isEmpty)
        _ = d.advance(200)
        guard case .failed(let e)? = d.answers(t).first else { Issue.record("no failure: \(d.answers(t))"); return }
        #expect(e.code == "MICROPHONE_UNAVAILABLE")
    }

    @Test func aStopOrCancelOfAWaitingStartAnswersBothAndOpensNothing() {
        for (command, status) in [(TalkMachine.Command.stop, PTTStatus.empty), (.cancel, .cancelled)] {
            var d = MachineDriver(ready: false)
            let (o, _) = d.command(.once)
            let (e, _) = d.command(command)
            #expect(d.answers(o) == [.result(PTTResult(captureId: "c1", status: status))])
            #expect(d.answers(e) == [.result(PTTResult(captureId: "c1", status: status))])
            d.feed(.microphone(.live))
            d.feed(.operatorState(connected: true, mainSessionKey: nil))
            #expect(!d.log.contains { $0.isOpen }, "nothing opens once the parts are up")
        }
    }

    @Test func aSecondStartWhileOneWaitsIsRefused() {
        var d = MachineDriver(ready: false)
        d.command(.start)
        let (t, _) = d.command(.start)
        #expect(d.answers(t) == [.failed(.alreadyStarting)])
    }
}

@Suite struct TalkMachineSessionTests {
    /// Defect 5: the switch is the one current session, and it is persisted.
    @Test func aSessionSwitchCancelsTheCaptureAndBecomesTheCurrentSession() {
        var d = MachineDriver()
        let (t, _) = d.command(.once)
        let out = d.feed(.switchSession("agent:main:kitchen", reason: "switched"))
        #expect(out.contains { $0.isCancel })
        #expect(out.contains { $0.isStopSpeech })
        #expect(out.contains { if case .persistSession("agent:main:kitchen") = $0 { return true }; return false })
        #expect(d.answers(t) == [.result(PTTResult(captureId: "c1", status: .cancelled))])
        #expect(d.m.currentSession == "agent:main:kitchen")
        d.command(.start)
        d.command(.stop)
        let delivered = d.feed(.relayFinished(id: "c2", transcript))
        #expect(delivered.compactMap { $0.deliver }.first?.session == "agent:main:kitchen")
    }

    /// Issue 12 item 1: an invoked turn goes to the session the gateway stamped on it.
    @Test func anInvokedTurnGoesToTheStampedSessionAndTheCurrentOneStays() {
        var d = MachineDriver()
        d.feed(.command(.once, token: 99, freshId: "i1", session: "agent:main:room"))
        d.command(.stop)
        let out = d.feed(.relayFinished(id: "i1", transcript))
        #expect(out.compactMap { $0.deliver }.first?.session == "agent:main:room")
        #expect(out.contains { if case .openCapture = $0 { return true }; return false } == false)
        #expect(d.m.currentSession == "agent:main:main")
        #expect(d.log.contains { if case .openCapture("i1", "agent:main:room", _) = $0 { return true }; return false })
    }

    @Test func losingTheOperatorSessionIsASwitchButReconnectingIsNot() {
        var d = MachineDriver()
        d.command(.start)
        let lost = d.feed(.operatorState(connected: false, mainSessionKey: nil))
        #expect(lost.contains { $0.isCancel })
        let back = d.feed(.operatorState(connected: true, mainSessionKey: "agent:main:main"))
        #expect(!back.contains { $0.isStopSpeech })
    }

    @Test func theGatewayNamingAnotherMainSessionSwitchesOnlyWhenNoneWasChosen() {
        var d = MachineDriver()
        let out = d.feed(.operatorState(connected: true, mainSessionKey: "agent:other:main"))
        #expect(out.contains { $0.isStopSpeech })
        var chosen = MachineDriver(chosen: "agent:main:kitchen")
        let none = chosen.feed(.operatorState(connected: true, mainSessionKey: "agent:other:main"))
        #expect(!none.contains { $0.isStopSpeech })
        #expect(chosen.m.currentSession == "agent:main:kitchen")
    }

    @Test func lateChatOfAnInterruptedReplyIsDropped() {
        var d = MachineDriver()
        d.feed(.followReply(runId: "r1"))
        #expect(d.feed(.chat(runId: "r1", final: false)).contains { if case .feedReply = $0 { return true }; return false })
        d.feed(.interrupt(reason: "test"))
        #expect(!d.feed(.chat(runId: "r1", final: false)).contains { if case .feedReply = $0 { return true }; return false })
    }

    @Test func aReplyIsGivenUpAfterItsTimeout() {
        var s = TalkMachine.Settings()
        s.replyTimeoutMs = 5_000
        var d = MachineDriver(settings: s)
        d.feed(.followReply(runId: "r1"))
        #expect(!d.advance(4_000).contains { if case .closeReply = $0 { return true }; return false })
        #expect(d.advance(1_000).contains { if case .closeReply("r1") = $0 { return true }; return false })
    }

    @Test func theReplyFollowsItsRunIdOnceTheOutboxNamesIt() {
        var d = MachineDriver()
        d.feed(.followReply(runId: "turn-x"))
        d.feed(.turnSent(idempotencyKey: "turn-x", runId: "run-9"))
        #expect(d.feed(.chat(runId: "run-9", final: true)).contains { if case .feedReply("run-9") = $0 { return true }; return false })
        #expect(d.m.replies.isEmpty)
    }
}
