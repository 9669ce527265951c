// PTT turns through the durable outbox: `queued` means written to SQLite; a full queue
// answers `not_queued` with the transcript; the queued turn is delivered and answered.

import Audio
import ClawvoiceCore
import Foundation
import GatewayProtocol
import LoopbackGateway
import Store
import Talk
import Testing

extension TalkAudio {
@Suite struct OutboxTurnTests {
    @Test func `a queued turn is in the outbox before the answer, then delivered and its reply spoken`() async throws {
        let rig = try await TalkRig.make(outbox: true)
        defer { Task { await rig.shutdown() } }
        try await rig.waitForMicrophone()
        await rig.gateway.supplyTranscript("what is on my calendar")
        _ = try await rig.talk.start()
        _ = try await rig.micPlayer.play(try Signal.speech("what is on my calendar"))
        let r = await rig.talk.stop()
        #expect(r.status == .queued && r.transcript == "what is on my calendar")
        let deadline = ContinuousClock.now + .seconds(20)
        while await rig.talk.lastSpeech == nil && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(await rig.talk.lastSpeech?.outcome == .finished)
        let sends = await rig.gateway.requests(method: "chat.send")
        #expect(sends.count == 1 && sends.first?.params?["message"]?.stringValue == "what is on my calendar")
        while try rig.store.outboxCount(gateway: "lb") > 0 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(try rig.store.outboxCount(gateway: "lb") == 0, "confirmed through chat.history and removed")
    }

    @Test func `a full outbox answers not_queued with the transcript`() async throws {
        let rig = try await TalkRig.make(speakReplies: false, outbox: true, startOutbox: false)
        defer { Task { await rig.shutdown() } }
        try await rig.waitForMicrophone()
        for i in 0..<50 {
            _ = try rig.store.enqueueOutbox(gateway: "lb", sessionKey: "main", message: "turn \(i)", attachmentsJSON: nil,
                                            thinking: nil, idempotencyKey: "k\(i)", nowMs: Int64(Date().timeIntervalSince1970 * 1000))
        }
        await rig.gateway.supplyTranscript("one more thing")
        _ = try await rig.talk.start()
        _ = try await rig.micPlayer.play(try Signal.speech("one more thing"))
        let r = await rig.talk.stop()
        #expect(r.status == .notQueued)
        #expect(r.transcript == "one more thing", "the transcript comes back so nothing said is lost")
        #expect(rig.log.contains("50 turns are already waiting"))
    }
}
}
