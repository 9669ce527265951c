// Replies spoken as they stream: the first sentence is heard before the reply's final event.

import Audio
import ClawvoiceCore
import Foundation
import GatewayClient
import GatewayProtocol
import LoopbackGateway
import Talk
import Testing

extension TalkAudio {
@Suite struct StreamingReplyTests {
    @Test func `the first sentence of a long reply is heard at the speaker before the final event`() async throws {
        let rig = try await TalkRig.make { $0.echoDeltaDelayMs = 700 }
        defer { Task { await rig.shutdown() } }
        try await rig.waitForMicrophone()
        let finalAt = Locked<ContinuousClock.Instant?>(nil)
        let capture = PulseCapture(connection: rig.speakerTap, source: "cv_speaker.monitor")
        try await capture.start()
        let loudAt = Locked<ContinuousClock.Instant?>(nil)
        let reader = Task {
            for await f in capture.frames where f.pcm.rms > 0.01 { loudAt.withLock { if $0 == nil { $0 = f.receivedAt } } }
        }
        // Watch the reply's final event on a second operator connection's broadcasts.
        let message = "This is the first sentence. Here comes a second one with more words in it. And a third sentence closes the reply nicely."
        await rig.gateway.supplyTranscript(message)
        let watcher = Task {
            while finalAt.withLock({ $0 }) == nil {
                if let last = await rig.gateway.requests(method: "chat.send").last?.params?["idempotencyKey"]?.stringValue,
                   await rig.gateway.isRunFinished(last) {
                    finalAt.withLock { $0 = ContinuousClock.now }
                }
                try? await Task.sleep(for: .milliseconds(10))
            }
        }
        _ = try await rig.talk.start()
        _ = try await rig.micPlayer.play(try Signal.speech("tell me something"))
        let r = await rig.talk.stop()
        #expect(r.status == .queued)
        let deadline = ContinuousClock.now + .seconds(30)
        while (finalAt.withLock { $0 } == nil || loudAt.withLock { $0 } == nil) && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        watcher.cancel()
        let heard = try #require(loudAt.withLock { $0 }, "the reply was heard")
        let final = try #require(finalAt.withLock { $0 }, "the reply finished")
        #expect(heard < final, "first audio \(heard) before final \(final)")
        let stream = try #require(await rig.talk.lastReply)
        await stream.done()
        #expect(await stream.sentences.count >= 3)
        #expect(await stream.sentences.first == "You said: This is the first sentence.")
        capture.stop()
        await reader.value
    }
}
}
