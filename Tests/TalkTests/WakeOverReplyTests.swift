// Wake over the node's own voice (issue 22, item 5): on a loudspeaker looped back into the
// microphone (module-loopback, about −9 dB) with its echo cancelled, a trigger said over the
// reply at the echo's level (0 dB) becomes exactly one turn, whether voice barge-in or the wake
// detector fires first. Nine tries, one rig. The issue's bar is 8 of 9; measured here (loaded
// machine): 0 and 3 of 9 before the detectors kept the linear path for a trigger's length after
// the speaker stopped and the thresholds relaxed over the node's voice, 4-6 of 9 after, and 9, 6,
// 8, 9, 9 and 7 of 9 (48 of 54) since the detectors' canceller is speexdsp's, which learns each
// reply's echo path again in about a second (quiet machine, one run after another); and since a
// barge-in relaxes the wake bar further for the tail (TalkMachine.Settings.wakeReliefAfterBargeIn:
// the misses were triggers whose barge-in stopped the reply on their first syllable, scoring
// 0.71-0.75 against 0.82), 104 of 108 tries in twelve runs, the bar held in eleven (one 7 of 9).
// The misses left came with the linear canceller still learning: each clip's echo sits behind its
// reference by a different 28-39 ms, so speexdsp relearnt every reply. Since EchoAlignment moves
// each clip's reference onto the delay the filter learnt on the first, 54 of 54 (six runs).
// WOR_SCALE, WOR_N, WOR_SILENT (speaker silent), WOR_NOBARGE (voice barge-in off) vary it by hand.

import Audio
import ClawvoiceCore
import ClawvoiceTesting
import Foundation
import GatewayProtocol
import LoopbackGateway
@testable import Talk
import Testing

extension TalkAudio {
@Suite struct WakeOverReplyTests {
    @Test func `a trigger said over the reply at the echo's level becomes one turn, never two`() async throws {
        let env = ProcessInfo.processInfo.environment
        let rig = try await TalkRig.make(speakReplies: false, echoCancel: true, interruptOnSpeech: env["WOR_NOBARGE"] == nil)
        defer { Task { await rig.shutdown() } }
        try await rig.waitForMicrophone()
        await rig.talk.enableWake(WakeTurnTests.wakeConfig(), triggers: ["computer"])
        let room = try LoopbackRoom.load(server: TalkPulse.server)
        defer { room.unload() }
        let said = try WakeOverReplyScenario.trigger(scale: Double(env["WOR_SCALE"] ?? "") ?? WakeOverReplyScenario.scale)
        let speech = rig.speech
        var turns: [Int] = []
        var notes: [String] = []
        for attempt in 0..<(Int(env["WOR_N"] ?? "9") ?? 9) {
            await rig.gateway.supplyTranscript(WakeOverReplyScenario.transcript)
            let before = await rig.gateway.requests(method: "chat.send").count
            try await Task.sleep(for: .milliseconds(300))
            let speaking = Task { if env["WOR_SILENT"] == nil { _ = await speech.speak(WakeOverReplyScenario.reply, route: .local) } }
            try await Task.sleep(for: WakeOverReplyScenario.delay(try: attempt))
            _ = try await rig.micPlayer.play(said)
            _ = try await WakeTurnTests.waitFor(WakeOverReplyScenario.turnWaitSeconds) { await rig.gateway.requests(method: "chat.send").count > before }
            await speech.stop()
            _ = await speaking.value
            // Whatever else the trigger started has ended by now (a wake capture ends on silence).
            _ = try await WakeTurnTests.waitFor(5) { rig.talk.phase == .idle }
            let n = await rig.gateway.requests(method: "chat.send").count - before
            turns.append(n)
            notes.append("try \(attempt): \(n) turn(s), barge-ins \(rig.talk.bargeIns), wakes \(rig.talk.wakeStatus?.detections ?? -1)")
        }
        print("wake over reply: \(notes.joined(separator: "; "))")
        let one = turns.filter { $0 == 1 }.count
        // The issue's bar.
        #expect(one >= 8, "\(notes)")
        #expect(!turns.contains { $0 > 1 }, "a trigger became more than one turn: \(notes)")
    }
}
}
