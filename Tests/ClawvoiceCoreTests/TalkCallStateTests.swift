// A realtime call as a talk state (issue 23): TalkMachine input by input, no I/O. While a call
// holds the room push-to-talk and wake are refused BUSY and frames reach no capture or wake; a
// call that starts cancels the capture and the speech in progress; a session or gateway switch
// ends the call; mute closes the call's microphone; the end gives the room back.

@testable import ClawvoiceCore
import Foundation
import Testing

@Suite struct TalkCallStateTests {
    func has(_ out: [TalkMachine.Action], _ match: (TalkMachine.Action) -> Bool) -> Bool { out.contains(where: match) }
    func endCall(_ out: [TalkMachine.Action]) -> String? { out.compactMap { if case .endCall(let r) = $0 { return r }; return nil }.first }

    @Test func `during a call push-to-talk and wake are refused BUSY and frames reach nothing`() {
        var d = MachineDriver()
        d.feed(.callStarted(id: "call-1"))
        #expect(d.m.call == "call-1" && d.m.callMicrophoneOpen)
        let (s, _) = d.command(.start)
        let (o, _) = d.command(.once)
        #expect(d.answers(s) == [.failed(.inCall)])
        #expect(d.answers(o) == [.result(PTTResult(captureId: "c2", status: .busy))])
        #expect(PTTError.inCall.code == "BUSY")
        let wake = d.feed(.wakeHeard(phrase: "openclaw", triggers: ["openclaw"], routedSession: nil, freshId: "w1"))
        #expect(!has(wake) { $0.isOpen })
        #expect(has(wake) { if case .wakeOutcome("busy") = $0 { return true }; return false })
        let heard = d.feed(.frame(frame(loud: true), speaker: .silent))
        #expect(!has(heard) { if case .listen = $0 { return true }; return false }, "no wake listening during a call")
        #expect(d.m.isIdle)
        // The end gives the room back: the same commands work again.
        let end = d.feed(.callEnded(id: "call-1"))
        #expect(d.m.call == nil)
        #expect(end.contains { if case .cue(.callEnd) = $0 { return true }; return false }, "the end sound")
        let (again, _) = d.command(.start)
        #expect(d.answers(again) == [.captureId("c3")])
    }

    @Test func `a call that starts cancels the capture and the reply in progress`() {
        var d = MachineDriver()
        d.feed(.followReply(runId: "r1"))
        let (t, _) = d.command(.once)
        let out = d.feed(.callStarted(id: "call-1"))
        #expect(has(out) { $0.isCancel })
        #expect(has(out) { $0.isStopSpeech })
        #expect(has(out) { if case .closeReply(runId: "r1") = $0 { return true }; return false })
        #expect(d.answers(t) == [.result(PTTResult(captureId: "c1", status: .cancelled))])
        #expect(d.m.isIdle && d.m.replies.isEmpty)
    }

    @Test func `a session switch or a gateway switch ends the call; without a call they end none`() {
        var d = MachineDriver()
        #expect(endCall(d.feed(.switchSession("agent:main:other", reason: "session switched"))) == nil)
        d.feed(.callStarted(id: "call-1"))
        #expect(endCall(d.feed(.switchSession("agent:main:work", reason: "session switched"))) == "session switched")
        var g = MachineDriver()
        g.feed(.callStarted(id: "call-2"))
        #expect(endCall(g.feed(.restoreSession("agent:x:main"))) == "gateway switched")
    }

    @Test func `mute closes the call's microphone and keeps the call; a stale end changes nothing`() {
        var d = MachineDriver()
        d.feed(.callStarted(id: "call-1"))
        d.feed(.setMuted(true, announce: false))
        #expect(d.m.call == "call-1" && !d.m.callMicrophoneOpen)
        d.feed(.setMuted(false, announce: false))
        #expect(d.m.callMicrophoneOpen)
        d.feed(.callEnded(id: "call-0"))
        #expect(d.m.call == "call-1", "the end of another call does not free the room")
        let (s, _) = d.command(.start)
        #expect(d.answers(s) == [.failed(.inCall)])
    }

    @Test func `the call's wake phrase starts a call instead of a turn; other triggers still start turns`() {
        var settings = TalkMachine.Settings()
        settings.wakeEnabled = true
        settings.callWakePhrase = "Hey Computer"
        var d = MachineDriver(settings: settings)
        let call = d.feed(.wakeHeard(phrase: "hey_computer", triggers: ["openclaw", "hey computer"], routedSession: nil, freshId: "w1"))
        #expect(call.contains { if case .startCall("hey_computer") = $0 { return true }; return false }, "\(call)")
        #expect(!has(call) { $0.isOpen }, "no capture for the call's phrase")
        #expect(!has(call) { if case .playChime = $0 { return true }; return false })
        #expect(has(call) { if case .wakeOutcome("call") = $0 { return true }; return false })
        #expect(d.m.isIdle)
        // Another trigger is an ordinary wake turn.
        let turn = d.feed(.wakeHeard(phrase: "openclaw", triggers: ["openclaw", "hey computer"], routedSession: nil, freshId: "w2"))
        #expect(has(turn) { $0.isOpen } && !has(turn) { if case .startCall = $0 { return true }; return false })
        // During a call the phrase is refused as any wake is (no second call from the talk loop).
        var c = MachineDriver(settings: settings)
        c.feed(.callStarted(id: "call-1"))
        let busy = c.feed(.wakeHeard(phrase: "hey computer", triggers: [], routedSession: nil, freshId: "w3"))
        #expect(!has(busy) { if case .startCall = $0 { return true }; return false } && has(busy) { if case .wakeOutcome("busy") = $0 { return true }; return false })
        // Without the setting the phrase starts a turn.
        var plain = MachineDriver(settings: { var s = settings; s.callWakePhrase = nil; return s }())
        let ordinary = plain.feed(.wakeHeard(phrase: "hey computer", triggers: [], routedSession: nil, freshId: "w4"))
        #expect(has(ordinary) { $0.isOpen } && !has(ordinary) { if case .startCall = $0 { return true }; return false })
    }
}
