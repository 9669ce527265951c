// TalkMachine, transition by transition: every PTT command against every phase, the
// interleavings of start/stop/cancel/once with the relay's results, the wake turn, the
// loudspeaker gate and barge-in, session switches and timers. Pure: no audio, no sockets.

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

@Suite struct TalkMachineSpeakerTests {
    @Test func onALoudspeakerTheMicrophoneIsGatedWhileSpeakingAndForTheTail() {
        var d = MachineDriver()
        func heard(_ out: [TalkMachine.Action]) -> Bool { out.contains { if case .listen = $0 { return true }; return false } }
        #expect(!heard(d.feed(.frame(frame(loud: true), speaker: SpeakerState(playing: true)))))
        #expect(!heard(d.feed(.frame(frame(loud: true), speaker: SpeakerState(playing: false, msSinceStopped: 250)))))
        #expect(heard(d.feed(.frame(frame(loud: true), speaker: SpeakerState(playing: false, msSinceStopped: 350)))))
        #expect(d.m.gatedFrames == 2)
    }

    /// Issue 14: with the echo cancelled a loudspeaker keeps the microphone open while it
    /// speaks; the wake detector listens and voice over the cancelled echo barges in.
    @Test func anEchoCancelledLoudspeakerIsNotGatedAndBargesIn() {
        var s = TalkMachine.Settings()
        s.echoCancelled = true
        s.wakeEnabled = true
        var d = MachineDriver(settings: s)
        let first = d.feed(.frame(frame(loud: true), speaker: SpeakerState(playing: true)))
        #expect(first.contains { if case .listen(_, true) = $0 { return true }; return false }, "wake listens over the speaker")
        #expect(d.m.gatedFrames == 0)
        // 120 ms of voice (six more 20 ms frames) is a barge-in over a cancelled echo.
        for _ in 0..<4 { d.feed(.frame(frame(loud: true), speaker: SpeakerState(playing: true))) }
        #expect(d.m.bargeIns == 0)
        for _ in 0..<2 { d.feed(.frame(frame(loud: true), speaker: SpeakerState(playing: true))) }
        #expect(d.m.bargeIns == 1)
        // Quiet residual echo (−60 dBFS) never adds up to a barge-in.
        var q = MachineDriver(settings: s)
        let quiet = PCMBuffer(format: .voice, samples: (0..<320).map { Int16(30 * sin(Double($0) * 0.3)) })
        for _ in 0..<500 { q.feed(.frame(quiet, speaker: SpeakerState(playing: true))) }
        #expect(q.m.bargeIns == 0)
    }

    /// Issue 22 item 5: the wake thresholds relax while an echo-cancelled loudspeaker speaks
    /// and for its tail, and more for the tail after voice barged in over it (a trigger whose
    /// first syllable was under the echo then scores less than one said in the clear).
    @Test func wakeReliefOverTheSpeakerAndMoreAfterABargeIn() {
        func reliefs(_ out: [TalkMachine.Action]) -> [Double] {
            out.compactMap { if case .wakeRelief(let r) = $0 { return r }; return nil }
        }
        var s = TalkMachine.Settings()
        s.echoCancelled = true
        s.wakeEnabled = true
        var d = MachineDriver(settings: s)
        let quiet = PCMBuffer(format: .voice, samples: [Int16](repeating: 0, count: 320))
        #expect(reliefs(d.feed(.frame(quiet, speaker: SpeakerState(playing: true)))) == [0.6])
        // The node alone: the relief holds, and no barge-in raises it.
        for _ in 0..<50 { d.now += 20; #expect(reliefs(d.feed(.frame(quiet, speaker: SpeakerState(playing: true)))).isEmpty) }
        // 120 ms of voice over it barges in; from that frame on, the larger relief.
        var seen: [Double] = []
        for _ in 0..<6 { d.now += 20; seen += reliefs(d.feed(.frame(frame(loud: true), speaker: SpeakerState(playing: true)))) }
        #expect(d.m.bargeIns == 1)
        #expect(seen == [s.wakeReliefAfterBargeIn])
        // The speaker stopped: the larger relief lasts the tail, then none.
        d.now += 900
        #expect(reliefs(d.feed(.frame(frame(loud: true), speaker: SpeakerState(playing: false, msSinceStopped: 900)))).isEmpty)
        d.now += 200
        #expect(reliefs(d.feed(.frame(quiet, speaker: SpeakerState(playing: false, msSinceStopped: 1100)))) == [0])
        // The next reply starts with the usual relief, not the barge-in's.
        d.now += 5_000
        #expect(reliefs(d.feed(.frame(quiet, speaker: SpeakerState(playing: true)))) == [0.6])
        // On a headset nothing is relieved.
        var h = s
        h.headset = true
        var e = MachineDriver(settings: h)
        #expect(reliefs(e.feed(.frame(quiet, speaker: SpeakerState(playing: true)))).isEmpty)
    }

    /// Issue 14, the stop word: its head hears only frames of the node speaking on a clean
    /// channel; "stop" then stops the speech as a barge-in does (even with voice barge-in off),
    /// and the next turn says where it was cut. Heard at any other time it does nothing.
    @Test func theStopWordStopsSpeechOnlyWhileSpeaking() {
        func listensForStop(_ out: [TalkMachine.Action]) -> Bool {
            out.contains { if case .listenForStop = $0 { return true }; return false }
        }
        var s = TalkMachine.Settings()
        s.echoCancelled = true
        s.stopWordEnabled = true
        s.interruptOnSpeech = false       // only the stop word can stop it here
        var d = MachineDriver(settings: s)
        d.feed(.followReply(runId: "r1"))
        // Speaking: the stop head hears the frame; voice alone does not barge in.
        for _ in 0..<20 { #expect(listensForStop(d.feed(.frame(frame(loud: true), speaker: SpeakerState(playing: true))))) }
        #expect(d.m.bargeIns == 0)
        let out = d.feed(.stopWordHeard)
        #expect(out.contains { $0.isStopSpeech }, "the stop word stops the speech")
        #expect(out.contains { if case .measureBargeIn = $0 { return true }; return false })
        #expect(out.contains { if case .closeReply(runId: "r1") = $0 { return true }; return false })
        #expect(d.m.stopWords == 1)
        d.feed(.bargeInPosition(ms: 2_240))
        d.command(.start)
        d.command(.stop)
        let turn = d.feed(.relayFinished(id: "c1", transcript))
        #expect(turn.compactMap { $0.deliver }.first?.message == "Assistant speech interrupted at 2.2s.\n\nhello there")

        // Quiet (the speaker stopped): the head hears nothing, and a stray detection starts nothing.
        var q = MachineDriver(settings: s)
        #expect(!listensForStop(q.feed(.frame(frame(loud: true), speaker: SpeakerState(playing: false, msSinceStopped: 5_000)))))
        let idle = q.feed(.stopWordHeard)
        #expect(!idle.contains { $0.isStopSpeech || $0.isOpen }, "a stop word while idle does nothing")
        #expect(q.m.stopWords == 0)
        #expect(q.m.isIdle)

        // During a capture (the speaker was silenced by it) "stop" does not end or cancel the capture.
        var c = MachineDriver(settings: s)
        c.command(.start)
        c.feed(.frame(frame(loud: true), speaker: SpeakerState(playing: true)))
        let during = c.feed(.stopWordHeard)
        #expect(!during.contains { $0.isFinish || $0.isCancel || $0.isStopSpeech })
        #expect(c.m.activeCaptureId == "c1")
    }

    @Test func theStopWordIsOffWhenDisabledAndOnAGatedLoudspeaker() {
        func listensForStop(_ out: [TalkMachine.Action]) -> Bool {
            out.contains { if case .listenForStop = $0 { return true }; return false }
        }
        // Turned off (talk.stopWord false): never listens, a detection is ignored.
        var s = TalkMachine.Settings()
        s.echoCancelled = true
        var off = MachineDriver(settings: s)
        #expect(!listensForStop(off.feed(.frame(frame(loud: true), speaker: SpeakerState(playing: true)))))
        #expect(!off.feed(.stopWordHeard).contains { $0.isStopSpeech })
        // A loudspeaker without echo cancellation is gated while it speaks: nothing hears it.
        var g = TalkMachine.Settings()
        g.stopWordEnabled = true
        var gated = MachineDriver(settings: g)
        #expect(!listensForStop(gated.feed(.frame(frame(loud: true), speaker: SpeakerState(playing: true)))))
        #expect(!gated.feed(.stopWordHeard).contains { $0.isStopSpeech })
        // Muted: nothing.
        var m = TalkMachine.Settings()
        m.headset = true
        m.stopWordEnabled = true
        var muted = MachineDriver(settings: m)
        #expect(listensForStop(muted.feed(.frame(frame(loud: false), speaker: SpeakerState(playing: true)))), "a headset listens")
        muted.feed(.setMuted(true, announce: false))
        #expect(!listensForStop(muted.feed(.frame(frame(loud: false), speaker: SpeakerState(playing: true)))))
        #expect(!muted.feed(.stopWordHeard).contains { $0.isStopSpeech })
    }

    @Test func onAHeadsetSustainedVoiceBargesInAndTheNextTurnSaysWhere() {
        var s = TalkMachine.Settings()
        s.headset = true
        var d = MachineDriver(settings: s)
        d.feed(.followReply(runId: "r1"))
        var measured = false
        for _ in 0..<15 {
            let out = d.feed(.frame(frame(loud: true), speaker: SpeakerState(playing: true)))
            if out.contains(where: { if case .measureBargeIn = $0 { return true }; return false }) { measured = true; break }
        }
        #expect(measured)
        #expect(d.m.bargeIns == 1)
        #expect(d.m.replies.isEmpty, "the reply is closed")
        d.feed(.bargeInPosition(ms: 1_530))
        d.command(.start)
        d.command(.stop)
        let out = d.feed(.relayFinished(id: "c1", transcript))
        #expect(out.compactMap { $0.deliver }.first?.message == "Assistant speech interrupted at 1.5s.\n\nhello there")
    }
}

@Suite struct TalkMachineWakeTests {
    func wakeDriver() -> MachineDriver {
        var s = TalkMachine.Settings()
        s.wakeEnabled = true
        s.wakeTriggerOnlyMs = 1_000
        return MachineDriver(settings: s)
    }

    @Test func aWakeOpensACaptureWithTheLookbackAndTheChime() {
        var d = wakeDriver()
        let out = d.feed(.wakeHeard(phrase: "openclaw", triggers: ["openclaw"], routedSession: nil, freshId: "w1"))
        #expect(out.contains { if case .openCapture("w1", "agent:main:main", .wakeLookback) = $0 { return true }; return false })
        #expect(out.contains { if case .playChime = $0 { return true }; return false })
    }

    @Test func aRoutedWakeGoesToItsSessionAndStripsTheTrigger() {
        var d = wakeDriver()
        d.feed(.wakeHeard(phrase: "openclaw", triggers: ["openclaw"], routedSession: "agent:main:kitchen", freshId: "w1"))
        d.command(.stop)
        let out = d.feed(.relayFinished(id: "w1", TalkMachine.Finished(outcome: .transcript("OpenClaw, what time is it?"), audioMs: 3000, hasVoiceNote: true)))
        let sent = out.compactMap { $0.deliver }.first
        #expect(sent?.message == "what time is it")
        #expect(sent?.session == "agent:main:kitchen")
        #expect(d.m.currentSession == "agent:main:main", "routing does not change the current session")
    }

    @Test func onlyTheTriggerEndsAfterTheTriggerOnlyWindowAndSendsNothing() {
        var d = wakeDriver()
        d.feed(.wakeHeard(phrase: "openclaw", triggers: ["openclaw"], routedSession: nil, freshId: "w1"))
        for _ in 0..<49 { d.feed(.frame(frame(loud: false), speaker: .silent)) }
        #expect(d.count(\.isFinish) == 0)
        d.feed(.frame(frame(loud: false), speaker: .silent))
        #expect(d.count(\.isFinish) == 1)
        let out = d.feed(.relayFinished(id: "w1", TalkMachine.Finished(outcome: .transcript("openclaw"), audioMs: 1000, hasVoiceNote: true)))
        #expect(out.compactMap { $0.deliver }.isEmpty)
        #expect(out.contains { if case .wakeOutcome("empty") = $0 { return true }; return false })
    }

    @Test func noWakeListeningRightAfterASendOrWhileSpeakingOnALoudspeaker() {
        var d = wakeDriver()
        d.feed(.wakeHeard(phrase: "openclaw", triggers: ["openclaw"], routedSession: nil, freshId: "w1"))
        d.command(.stop)
        d.feed(.relayFinished(id: "w1", TalkMachine.Finished(outcome: .transcript("openclaw lights on"), audioMs: 3000, hasVoiceNote: true)))
        d.feed(.delivered(id: "w1", .queued, idempotencyKey: "turn-w1"))
        func listens(_ out: [TalkMachine.Action]) -> Bool { out.contains { if case .listen(_, true) = $0 { return true }; return false } }
        #expect(!listens(d.feed(.frame(frame(loud: false), speaker: .silent))), "debounce after a send")
        d.now += 400
        #expect(listens(d.feed(.frame(frame(loud: false), speaker: .silent))))
        #expect(!listens(d.feed(.frame(frame(loud: false), speaker: SpeakerState(playing: true)))))
    }

    @Test func aWakeDuringPushToTalkIsBusy() {
        var d = wakeDriver()
        d.command(.start)
        let out = d.feed(.wakeHeard(phrase: "openclaw", triggers: ["openclaw"], routedSession: nil, freshId: "w1"))
        #expect(!out.contains { $0.isOpen })
        #expect(out.contains { if case .wakeOutcome("busy") = $0 { return true }; return false })
    }

    @Test func theChimeOnALoudspeakerDoesNotCountAsSpeech() {
        var d = wakeDriver()
        d.feed(.wakeHeard(phrase: "openclaw", triggers: ["openclaw"], routedSession: nil, freshId: "w1"))
        // Loud chime frames while the speaker plays: the endpointer hears silence, so the
        // trigger-only window still runs out.
        for _ in 0..<50 { d.feed(.frame(frame(loud: true), speaker: SpeakerState(playing: true))) }
        #expect(d.count(\.isFinish) == 1)
    }
}

/// Issue 14 item 5: after a reply, a few seconds for a next turn without the wake word.
@Suite struct TalkMachineFollowUpTests {
    func driver(_ ms: Int) -> MachineDriver {
        var s = TalkMachine.Settings()
        s.followUpMs = ms
        s.silenceTimeoutMs = 200
        return MachineDriver(settings: s)
    }

    @Test func offByDefault() {
        var d = MachineDriver()
        #expect(!d.feed(.replyDone(stopped: false)).contains { $0.isOpen })
    }

    @Test func aReplyHeardToItsEndOpensAFollowUpThatBecomesATurn() {
        var d = driver(4_000)
        let out = d.feed(.replyDone(stopped: false))
        #expect(out.contains { if case .openCapture(_, "agent:main:main", .preRoll) = $0 { return true }; return false })
        guard case .capturing(let c) = d.m.phase else { Issue.record("no follow-up capture"); return }
        for _ in 0..<25 { d.feed(.frame(frame(loud: false), speaker: .silent)) }
        for _ in 0..<15 { d.feed(.frame(frame(loud: true), speaker: .silent)) }
        for _ in 0..<10 { d.feed(.frame(frame(loud: false), speaker: .silent)) }
        #expect(d.count { $0.isFinish } == 1)
        let sent = d.feed(.relayFinished(id: c.id, transcript))
        #expect(sent.compactMap { $0.deliver }.first?.message == "hello there")
    }

    @Test func nothingSaidInTheWindowIsDroppedQuietly() {
        var d = driver(1_000)
        d.feed(.replyDone(stopped: false))
        for _ in 0..<49 { d.feed(.frame(frame(loud: false), speaker: .silent)) }
        #expect(!d.m.isIdle)
        let out = d.feed(.frame(frame(loud: false), speaker: .silent))
        #expect(out.contains { $0.isCancel }, "the relay is closed")
        #expect(d.m.isIdle)
        #expect(!d.log.contains { $0.deliver != nil })
    }

    @Test func aReplyThatWasCutOffOrABusyNodeGetsNoFollowUp() {
        var d = driver(4_000)
        #expect(!d.feed(.replyDone(stopped: true)).contains { $0.isOpen })
        d.command(.start)
        #expect(!d.feed(.replyDone(stopped: false)).contains { $0.isOpen })
    }
}

@Suite struct TalkMachineVoiceNoteTests {
    @Test func withoutARelayTheVoiceNoteIsTheTurn() {
        var d = MachineDriver()
        d.command(.start)
        let (s, _) = d.command(.stop)
        let out = d.feed(.relayFinished(id: "c1", TalkMachine.Finished(outcome: .unavailable("no relay"), audioMs: 900, hasVoiceNote: true)))
        #expect(out.compactMap { $0.deliver }.first?.voiceNote == true)
        d.feed(.delivered(id: "c1", .queued, idempotencyKey: "turn-c1"))
        #expect(d.answers(s) == [.result(PTTResult(captureId: "c1", status: .queued))])
    }

    @Test func aTooShortCaptureWithoutARelayIsEmpty() {
        var d = MachineDriver()
        d.command(.start)
        let (s, _) = d.command(.stop)
        d.feed(.relayFinished(id: "c1", TalkMachine.Finished(outcome: .unavailable("no relay"), audioMs: 100, hasVoiceNote: true)))
        #expect(d.answers(s) == [.result(PTTResult(captureId: "c1", status: .empty))])
    }

    @Test func aFailedOutboxWriteIsNotQueuedAndDropsTheReply() {
        var d = MachineDriver()
        d.command(.start)
        let (s, _) = d.command(.stop)
        d.feed(.relayFinished(id: "c1", transcript))
        let out = d.feed(.delivered(id: "c1", .notQueued, idempotencyKey: "turn-c1"))
        #expect(out.contains { if case .closeReply("turn-c1") = $0 { return true }; return false })
        #expect(d.answers(s) == [.result(PTTResult(captureId: "c1", transcript: "hello there", status: .notQueued))])
    }
}

/// The endpointer with the voice detector's probability as an input (issue 14): loud noise that
/// is not voice does not hold a capture open, a pause shorter than the window does not end it,
/// and the window is the gateway's when it sends one.
@Suite struct TalkMachineVoiceEndpointTests {
    /// `ms` of frames: loud or quiet, with the detector's probability.
    static func feed(_ d: inout MachineDriver, ms: Int, loud: Bool, voice: Double?) {
        for _ in 0..<(ms / 20) { d.feed(.frame(frame(loud: loud), speaker: .silent, voice: voice)) }
    }

    func once(_ detector: VoiceDetectorChoice, windowMs: Int = 700) -> MachineDriver {
        var s = TalkMachine.Settings()
        s.silenceTimeoutMs = windowMs
        s.voiceDetector = detector
        var d = MachineDriver(settings: s)
        d.command(.once)
        Self.feed(&d, ms: 600, loud: false, voice: 0.02)   // calibrate on a quiet room
        Self.feed(&d, ms: 1_000, loud: true, voice: 0.95)  // speech
        return d
    }

    @Test func loudNoiseAfterSpeechDoesNotHoldTheCaptureOpen() {
        var d = once(.model)
        Self.feed(&d, ms: 680, loud: true, voice: 0.05)    // a loud fan starts as the user stops
        #expect(d.count(\.isFinish) == 0, "680 ms is still inside the 700 ms window")
        Self.feed(&d, ms: 20, loud: true, voice: 0.05)
        #expect(d.count(\.isFinish) == 1, "700 ms of noise without voice ends the utterance")
    }

    @Test func withTheLevelRuleTheSameNoiseHoldsItOpen() {
        var d = once(.level)
        Self.feed(&d, ms: 5_000, loud: true, voice: 0.05)
        #expect(d.count(\.isFinish) == 0, "the level rule hears the noise as speech")
        #expect(d.m.activeCaptureId == "c1")
    }

    @Test func withoutAProbabilityTheModelSettingFallsBackToLevel() {
        var d = once(.model)
        Self.feed(&d, ms: 2_000, loud: true, voice: nil)   // no detector ran (its model is missing)
        #expect(d.count(\.isFinish) == 0)
        Self.feed(&d, ms: 700, loud: false, voice: nil)
        #expect(d.count(\.isFinish) == 1)
    }

    @Test func aPauseShorterThanTheWindowDoesNotEndTheSentence() {
        var d = once(.model)
        Self.feed(&d, ms: 660, loud: true, voice: 0.1)     // a comma's pause, noisy
        Self.feed(&d, ms: 800, loud: true, voice: 0.9)     // the next clause
        Self.feed(&d, ms: 500, loud: false, voice: 0.02)   // a breath
        Self.feed(&d, ms: 400, loud: true, voice: 0.9)     // the last words
        #expect(d.count(\.isFinish) == 0, "no pause reached the window")
        Self.feed(&d, ms: 700, loud: false, voice: 0.02)
        #expect(d.count(\.isFinish) == 1)
    }

    @Test func voiceTooQuietToBeAnythingIsNotSpeech() {
        var s = TalkMachine.Settings()
        s.silenceTimeoutMs = 400
        var d = MachineDriver(settings: s)
        d.command(.once)
        // Digital near-silence that the detector happens to score high does not start speech.
        for _ in 0..<100 { d.feed(.frame(PCMBuffer(format: .voice, samples: [Int16](repeating: 1, count: 320)), speaker: .silent, voice: 0.99)) }
        Self.feed(&d, ms: 1_000, loud: false, voice: 0.01)
        #expect(d.count(\.isFinish) == 0, "no speech was heard, so silence does not end it")
    }

    @Test func theGatewaysSilenceTimeoutWins() {
        // The controller puts the gateway's talk.config silenceTimeoutMs into the settings
        // (TalkTests' TalkSettingsTests checks that half: 1 500 ms and the model detector).
        var d = once(.model, windowMs: 1_500)
        Self.feed(&d, ms: 1_000, loud: true, voice: 0.05)
        #expect(d.count(\.isFinish) == 0, "1 s is inside the gateway's 1.5 s")
        Self.feed(&d, ms: 500, loud: true, voice: 0.05)
        #expect(d.count(\.isFinish) == 1)
    }
}
