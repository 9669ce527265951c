// TalkMachine's controls, input by input: `stop` (speech off as a barge-in), mute and unmute
// (the microphone and wake off, commands refused, a capture cancelled), and the cues. Pure.

@testable import ClawvoiceCore
import Foundation
import Testing

@Suite struct TalkMachineControlTests {
    func has(_ out: [TalkMachine.Action], _ match: (TalkMachine.Action) -> Bool) -> Bool { out.contains(where: match) }

    @Test func `stop while a reply plays closes it, stops the speaker, and the next turn says where`() {
        var d = MachineDriver()
        d.feed(.followReply(runId: "r1"))
        let out = d.feed(.stopSpeaking(speaking: true))
        #expect(has(out) { $0.isStopSpeech })
        #expect(has(out) { if case .measureBargeIn = $0 { return true }; return false })
        #expect(has(out) { if case .closeReply(runId: "r1") = $0 { return true }; return false })
        #expect(d.m.replies.isEmpty)
        d.feed(.bargeInPosition(ms: 2_400))
        d.command(.start)
        d.command(.stop)
        let delivered = d.feed(.relayFinished(id: "c1", transcript))
        #expect(delivered.compactMap { $0.deliver }.first?.message == "Assistant speech interrupted at 2.4s.\n\nhello there")
    }

    @Test func `stop with nothing playing records no interruption and leaves a capture alone`() {
        var d = MachineDriver()
        d.command(.start)
        let out = d.feed(.stopSpeaking(speaking: false))
        #expect(!has(out) { if case .measureBargeIn = $0 { return true }; return false })
        #expect(!has(out) { $0.isCancel })
        #expect(d.m.activeCaptureId == "c1")
        #expect(d.m.bargeIns == 0)
    }

    @Test func `mute cancels the capture, drops frames, refuses start and once; unmute lets them through`() {
        var d = MachineDriver()
        let (t, _) = d.command(.once)
        let out = d.feed(.setMuted(true, announce: true))
        #expect(has(out) { $0.isCancel })
        #expect(d.answers(t) == [.result(PTTResult(captureId: "c1", status: .cancelled))])
        #expect(has(out) { if case .mutedChanged(true, announce: true) = $0 { return true }; return false })
        #expect(has(out) { if case .clearPreRoll = $0 { return true }; return false })
        #expect(d.m.muted)
        // Nothing hears a frame while muted: no pre-roll, no wake, no gate.
        #expect(d.feed(.frame(frame(loud: true), speaker: .silent)).filter { if case .wakeAt = $0 { return false }; return true }.isEmpty)
        let (s, _) = d.command(.start)
        let (o, _) = d.command(.once)
        #expect(d.answers(s) == [.failed(.muted)] && d.answers(o) == [.failed(.muted)])
        let wake = d.feed(.wakeHeard(phrase: "openclaw", triggers: ["openclaw"], routedSession: nil, freshId: "w1"))
        #expect(!has(wake) { $0.isOpen })
        // Muting again changes nothing (no second sound).
        #expect(!has(d.feed(.setMuted(true, announce: true))) { if case .mutedChanged = $0 { return true }; return false })
        let un = d.feed(.setMuted(false, announce: true))
        #expect(has(un) { if case .mutedChanged(false, announce: true) = $0 { return true }; return false })
        #expect(has(d.feed(.frame(frame(loud: false), speaker: .silent))) { if case .listen = $0 { return true }; return false })
        let (again, _) = d.command(.start)
        #expect(d.answers(again) == [.captureId("c4")])
    }

    @Test func `a command waiting for the microphone fails MUTED when mute comes first`() {
        var d = MachineDriver(ready: false)
        d.feed(.operatorState(connected: true, mainSessionKey: "agent:main:main"))
        let (t, _) = d.command(.once)
        #expect(d.answers(t).isEmpty, "waits for the microphone")
        d.feed(.setMuted(true, announce: false))
        #expect(d.answers(t) == [.failed(.muted)])
    }

    func cues(_ out: [TalkMachine.Action]) -> [TalkCue] { out.compactMap { if case .cue(let c) = $0 { return c }; return nil } }

    @Test func `end of listening when a capture ends, error when a turn cannot start or be queued, none on cancel`() {
        var d = MachineDriver()
        d.command(.start)
        #expect(cues(d.command(.stop).actions) == [.endOfListening])
        #expect(cues(d.feed(.relayFinished(id: "c1", transcript))).isEmpty)
        #expect(cues(d.feed(.delivered(id: "c1", .notQueued, idempotencyKey: "turn-c1"))) == [.error])
        d.command(.start)
        #expect(cues(d.command(.cancel).actions).isEmpty)
        var waiting = MachineDriver(ready: false)
        waiting.command(.once)
        #expect(cues(waiting.advance(3_500)) == [.error])
    }
}
