// Issue 26 end to end: a push-to-talk turn on a multi-agent loopback gateway with
// `talk.agentId` set goes to the agent-scoped session the room node would pick (D2), the
// transcription relay stays sessionless, and a reply whose later deltas carry no `message`
// (D3) is spoken whole.

import Audio
import ClawvoiceCore
import Foundation
import GatewayClient
import GatewayProtocol
import LoopbackGateway
import Talk
import Testing

extension TalkAudio {
@Suite struct TalkTargetTurnTests {
    @Test func `a spoken turn goes to agent:<talk.agentId>:<mainKey>, the relay names no session, every sentence is spoken`() async throws {
        let rig = try await TalkRig.make {
            $0.talkAgentId = "Work"
            $0.talkMainKey = "desk"
            $0.multiAgentTalk = true
            $0.capabilities = [TalkTarget.capability]
            $0.deltaSnapshots = .firstOnly
        }
        defer { Task { await rig.shutdown() } }
        try await rig.waitForMicrophone()
        await rig.gateway.supplyTranscript("Plan the day. Then rest a while. And call home tonight.")
        _ = try await rig.talk.start()
        _ = try await rig.micPlayer.play(try Signal.speech("plan my day"))
        let r = await rig.talk.stop()
        #expect(r.status == .queued, "\(r)")
        let create = try #require(await rig.gateway.requests(method: "talk.session.create").last)
        #expect(create.params?["mode"] == "transcription")
        #expect(create.params?["sessionKey"] == nil && create.params?["agentId"] == nil, "sessionless: \(String(describing: create.params))")
        // `queued` is answered as the turn leaves for chat.send (no outbox here): wait for it.
        let deadline = ContinuousClock.now + .seconds(10)
        while await rig.gateway.requests(method: "chat.send").isEmpty || rig.talk.lastReply == nil, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        let send = try #require(await rig.gateway.requests(method: "chat.send").last)
        #expect(send.params?["sessionKey"] == "agent:work:desk")
        let stream = try #require(rig.talk.lastReply)
        // The stream's worker starts with its first sentence: wait for the run's end at the gateway
        // and for the three sentences (or the deadline) before waiting for the speaking to finish.
        let runId = send.params?["idempotencyKey"]?.stringValue ?? ""
        while ContinuousClock.now < deadline + .seconds(20) {
            let finished = await rig.gateway.isRunFinished(runId)
            let count = await stream.sentences.count
            if finished && count >= 3 { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        await stream.done()
        // The echo agent answers "You said: <transcript>" in three deltas; only the first carries `message`.
        let sentences = await stream.sentences
        #expect(sentences == ["You said: Plan the day.", "Then rest a while.", "And call home tonight."], "\(sentences)")
    }
}
}
