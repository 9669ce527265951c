// TalkMachine's wake turns, follow-ups, voice notes and the voice endpoint. Pure: no audio, no
// sockets (MachineDriver is in TalkMachineTests.swift).

@testable import ClawvoiceCore
import Foundation
import GatewayProtocol
import Testing

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
