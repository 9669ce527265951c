// The stop word on a real PulseAudio (issue 14): the node speaks on a loudspeaker whose monitor
// is looped back into the microphone (module-loopback, 40 ms, about −9 dB), its echo cancelled;
// "stop" said over it stops the speech, with voice barge-in off so that only the stop word can.
// "stop" said to a quiet node starts and stops nothing.

import Audio
import Foundation
import Talk
import Testing
import WakeWord

extension TalkAudio {
@Suite struct StopWordTests {
    static var models: String { WakeModelCatalog.defaultDirectory() }

    @Test func `"stop" said over the assistant's speech stops it`() async throws {
        #expect(FileManager.default.fileExists(atPath: Self.models + "/stop.json"), "no models/stop.json (make wake-model TRIGGER=stop)")
        let rig = try await TalkRig.make(speakReplies: false, echoCancel: true, interruptOnSpeech: false, stopWordModels: Self.models)
        defer { Task { await rig.shutdown() } }
        try await rig.waitForMicrophone()
        let room = try LoopbackRoom.load(server: TalkPulse.server)
        defer { room.unload() }
        try await Task.sleep(for: .milliseconds(300))
        let speech = rig.speech
        let speaking = Task { await speech.speak(EchoCancelTests.reply, route: .local) }
        try await Task.sleep(for: .seconds(3))
        #expect(rig.talk.stopWords == 0, "nothing stopped it before the word")
        let said = ContinuousClock.now
        _ = try await rig.micPlayer.play(try Signal.speech("stop"))
        // The playing task ends when the speech is cut (or, failing that, when the reply ends).
        let report = await speaking.value
        let stoppedAfter = ContinuousClock.now - said
        #expect(report.outcome == .stopped, "\(report); \(rig.log.all.withLock { $0.filter { $0.contains("stop") }.suffix(10) })")
        #expect(rig.talk.stopWords == 1)
        #expect(rig.talk.bargeIns == 0, "voice barge-in is off: the stop word stopped it")
        #expect(stoppedAfter < .seconds(3), "stopped \(stoppedAfter) after the word began")
        print("stop word: the assistant stopped \(stoppedAfter) after \"stop\" began")
    }

    @Test func `"stop" said to a quiet node does nothing`() async throws {
        let rig = try await TalkRig.make(speakReplies: false, echoCancel: true, stopWordModels: Self.models)
        defer { Task { await rig.shutdown() } }
        try await rig.waitForMicrophone()
        try await Task.sleep(for: .milliseconds(300))
        _ = try await rig.micPlayer.play(try Signal.speech("stop"))
        try await Task.sleep(for: .milliseconds(800))
        #expect(rig.talk.stopWords == 0)
        #expect(rig.talk.bargeIns == 0)
        #expect(rig.talk.phase == .idle, "no capture opened")
        #expect(!rig.log.contains("heard the stop word"), "the stop head does not even listen while the node is quiet")
    }
}
}
