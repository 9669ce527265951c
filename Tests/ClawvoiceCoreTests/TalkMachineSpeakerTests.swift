// TalkMachine and the speaker: the loudspeaker gate, barge-in and what an interrupted reply
// tells the agent. Pure: no audio, no sockets (MachineDriver is in TalkMachineTests.swift).

@testable import ClawvoiceCore
import Foundation
import GatewayProtocol
import Testing

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

    /// In a clip's first second the canceller may still be finding the clip's echo delay and let
    /// the echo through for up to 160 ms: barge-in then needs 300 ms of voice; after it, 120 ms again.
    @Test func aClipsFirstSecondNeedsLongerVoiceToBargeIn() {
        var s = TalkMachine.Settings()
        s.echoCancelled = true
        func bargeIns(frames: Int, startingMsIntoClip start: Int64) -> Int {
            var d = MachineDriver(settings: s)
            for i in 0..<frames {
                d.now += 20
                d.feed(.frame(frame(loud: true), speaker: SpeakerState(playing: true, msIntoClip: start + Int64(i) * 20)))
            }
            return d.m.bargeIns
        }
        // The leak's length (160 ms) 0.6 s into a clip: not a barge-in.
        #expect(bargeIns(frames: 8, startingMsIntoClip: 600) == 0)
        // Someone talking over it for 300 ms (fifteen frames) is.
        #expect(bargeIns(frames: 15, startingMsIntoClip: 600) == 1)
        // From a second into the clip, 120 ms again.
        #expect(bargeIns(frames: 6, startingMsIntoClip: 1_000) == 1)
        // But a leak that began in the first second keeps the longer bar past it: 140 ms from
        // 0.88 s is not a barge-in at 1.0 s (once in 72 own-words replies, cut at 1.02 s).
        #expect(bargeIns(frames: 7, startingMsIntoClip: 880) == 0)
        #expect(bargeIns(frames: 15, startingMsIntoClip: 880) == 1)
        // Not known how long the clip has played (an older speaker): 120 ms, as before.
        var d = MachineDriver(settings: s)
        for _ in 0..<6 { d.feed(.frame(frame(loud: true), speaker: SpeakerState(playing: true))) }
        #expect(d.m.bargeIns == 1)
        // On a headset the clip's age changes nothing: 300 ms there always.
        s.headset = true
        #expect(bargeIns(frames: 14, startingMsIntoClip: 1_500) == 0)
        #expect(bargeIns(frames: 16, startingMsIntoClip: 1_500) == 1)
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
