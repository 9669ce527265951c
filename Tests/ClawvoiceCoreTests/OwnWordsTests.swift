// The node's own words (OwnWords): where a phrase is said in a clip's text, whether the speaker
// is saying it about now, and the talk machine ignoring a wake or a stop the node said itself on
// an echo-cancelled loudspeaker (and only there).

@testable import ClawvoiceCore
import Foundation
import Testing

@Suite struct OwnWordsTests {
    @Test func aPhraseIsFoundAsTheDetectorsWouldHearIt() {
        #expect(OwnWords.offsets(of: "computer", in: "Your computer is ready.").count == 1)
        #expect(OwnWords.offsets(of: "computer", in: "Computers, computer's and COMPUTER").count == 3)
        #expect(OwnWords.offsets(of: "stop", in: "Stop at the bus stop; it stopped.").count == 3)
        #expect(OwnWords.offsets(of: "openclaw", in: "Open Claw is open. OpenClaw too.").count == 2)
        #expect(OwnWords.offsets(of: "open claw", in: "OpenClaw").count == 1)
        // Not a word that only contains it, or runs on far past it, or letters across words.
        #expect(OwnWords.offsets(of: "stop", in: "nonstop, stopwatches, last op").isEmpty)
        #expect(OwnWords.offsets(of: "claude", in: "the clause was cloudy").isEmpty)
        #expect(OwnWords.offsets(of: "computer", in: "").isEmpty)
        // Where: the fraction of the text before the word.
        let f = OwnWords.offsets(of: "stop", in: "0123456789 stop")
        #expect(f.count == 1 && abs(f[0] - 11.0 / 15.0) < 1e-9)
    }

    @Test func saidAboutNowOnlyNearWhereTheClipSaysIt() {
        let text = "Here is the weather for the whole long week ahead, and then your computer."   // "computer" at 0.88
        func speaker(_ into: Int64, playing: Bool = true, since: Int64? = nil) -> SpeakerState {
            SpeakerState(playing: playing, msSinceStopped: since, msIntoClip: into, saying: text, clipMs: 10_000)
        }
        #expect(OwnWords.saying("computer", speaker: speaker(8_900)))
        #expect(OwnWords.saying("computer", speaker: speaker(7_000)), "2 s early: the pace may be uneven")
        #expect(!OwnWords.saying("computer", speaker: speaker(2_000)), "early in the clip, nowhere near it")
        #expect(!OwnWords.saying("claude", speaker: speaker(8_900)))
        // Just after the clip: its tail; long after: no longer.
        #expect(OwnWords.saying("computer", speaker: speaker(10_500, playing: false, since: 500)))
        #expect(!OwnWords.saying("computer", speaker: speaker(14_000, playing: false, since: 4_000)))
        // A cue (no text) or an unknown clip says nothing.
        #expect(!OwnWords.saying("computer", speaker: SpeakerState(playing: true, msIntoClip: 100, saying: nil, clipMs: 300)))
        #expect(!OwnWords.saying("computer", speaker: SpeakerState(playing: true)))
    }

    func outcomes(_ out: [TalkMachine.Action]) -> [String] {
        out.compactMap { if case .wakeOutcome(let o) = $0 { return o }; return nil }
    }

    @Test func theMachineIgnoresAWakeOrAStopTheNodeSaidItself() {
        var s = TalkMachine.Settings()
        s.echoCancelled = true
        s.wakeEnabled = true
        s.stopWordEnabled = true
        let saying = SpeakerState(playing: true, msIntoClip: 600, saying: "Stop: your computer is ready.", clipMs: 2_000)
        var d = MachineDriver(settings: s)
        d.feed(.frame(frame(loud: false), speaker: saying))
        let wake = d.feed(.wakeHeard(phrase: "computer", triggers: ["computer"], routedSession: nil, freshId: "w1"))
        #expect(outcomes(wake) == ["ignored: the node was saying it"])
        #expect(!wake.contains { $0.isOpen })
        let stop = d.feed(.stopWordHeard)
        #expect(!stop.contains { $0.isStopSpeech }, "its own \"stop\" does not stop the node")
        #expect(d.m.ownWordsIgnored == 2 && d.m.stopWords == 0)
        // A word the clip does not say is the user's: the stop word stops it, a wake goes on.
        var e = MachineDriver(settings: s)
        let other = SpeakerState(playing: true, msIntoClip: 600, saying: "The forecast for Monday.", clipMs: 2_000)
        e.feed(.frame(frame(loud: false), speaker: other))
        #expect(!outcomes(e.feed(.wakeHeard(phrase: "computer", triggers: ["computer"], routedSession: nil, freshId: "w1"))).contains("ignored: the node was saying it"))
        #expect(e.m.ownWordsIgnored == 0)
        var f = MachineDriver(settings: s)
        f.feed(.frame(frame(loud: false), speaker: other))
        #expect(f.feed(.stopWordHeard).contains { $0.isStopSpeech })
        #expect(f.m.ownWordsIgnored == 0)
        // On a headset the microphone does not hear the node: nothing is ignored.
        var h = s
        h.headset = true
        var g = MachineDriver(settings: h)
        g.feed(.frame(frame(loud: false), speaker: saying))
        #expect(g.feed(.stopWordHeard).contains { $0.isStopSpeech })
        #expect(g.m.ownWordsIgnored == 0)
    }
}
