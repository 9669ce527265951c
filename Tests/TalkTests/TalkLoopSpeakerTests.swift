// The speaker sub-state through the talk loop on its embedded rig (TalkLoopSupport.swift): a
// Listen message and notifications played by the loop's reply executor as child tasks, what
// silences them and the order they go in, without PulseAudio or a gateway.

import ClawvoiceCore
import Foundation
import GatewayProtocol
import Testing
@testable import Talk

@Suite struct TalkLoopSpeakerTests {
    @Test func `a Listen message plays in the loop, and push-to-talk silences it`() async throws {
        let rig = LoopRig(holdSpeech: true)
        try await rig.run { rig in
            rig.talk.setMicrophone(.live)
            let player = ListenPlayer(talk: rig.talk)
            #expect(await player.toggle(messageId: "m1", text: "Read this out.") == .speaking(messageId: "m1", replaced: nil))
            #expect(await player.playingMessageId == "m1")
            #expect(rig.talk.speakerPlaying == .listen(messageId: "m1"))
            try await rig.eventually("the clip playing", within: .seconds(10)) { rig.sink.clips.count == 1 }
            let stops = rig.sink.stops
            _ = try await rig.talk.start()
            #expect(rig.sink.stops > stops, "the capture silenced the speaker")
            #expect(rig.talk.speakerPlaying == .nothing)
            try await rig.eventually("the message's end") { await player.lastEnded?.messageId == "m1" }
            #expect(await player.lastEnded?.report.outcome == .stopped)
            #expect(await player.playingMessageId == nil)
            #expect(await player.waitUntilDone() == nil, "nothing plays any more")
        }
    }

    @Test func `notifications go one after another, and one whose invoke gives up while it waits is never spoken`() async throws {
        let rig = LoopRig(holdSpeech: true)
        try await rig.run { rig in
            let speaker = NotificationSpeaker(talk: rig.talk)
            let first = Task { try await speaker.deliver(params: ["title": "One", "body": "First."]) }
            try await rig.eventually("the first title playing", within: .seconds(10)) { rig.sink.clips.count == 1 }
            let second = Task { try await speaker.deliver(params: ["title": "Two"]) }
            let third = Task { try await speaker.deliver(params: ["title": "Three"]) }
            try await Task.sleep(for: .milliseconds(200))
            await rig.talk.barrier()
            #expect(rig.talk.speakerPlaying == .notification(id: 1), "the first one speaks; the others wait")
            second.cancel()
            await #expect(throws: CancellationError.self) { try await second.value }
            rig.sink.release()
            let one = try await first.value
            let three = try await third.value
            #expect(one.spoken == "One\nFirst." && one.outcome == "finished", "\(one)")
            #expect(three.spoken == "Three" && three.outcome == "finished", "\(three)")
            let asked = rig.channel.requests(GatewayMethod.ttsSpeak).compactMap { $0.params?["text"]?.stringValue }
            #expect(asked == ["One", "First.", "Three"], "in order, and Two never: \(asked)")
            try await rig.eventually("the speaker free") { rig.talk.speakerPlaying == .nothing }
        }
    }
}
