// The talk loop on its embedded rig (TalkLoopSupport.swift): push-to-talk start/stop, cancel,
// a reply spoken, a session switch stopping the speaker, a timer on the injected clock and the
// microphone's pace, each in milliseconds, without PulseAudio or a gateway.

import Audio
import ClawvoiceCore
import Foundation
import GatewayProtocol
import Testing
@testable import Talk

@Suite struct TalkLoopTests {
    static func chat(_ runId: String, _ state: String, _ text: String) -> EventFrame {
        EventFrame(event: GatewayEvent.chat, payload: ["runId": .string(runId), "sessionKey": "agent:main:main",
                                                      "state": .string(state), "message": .string(text)])
    }

    @Test func `push-to-talk start and stop stream the capture and send its transcript`() async throws {
        let rig = LoopRig()
        try await rig.run { rig in
            rig.talk.setMicrophone(.live)
            let id = try await rig.talk.start()
            #expect(rig.talk.phase == .capturing(id))
            rig.speak(frames: 15)
            let result = await rig.talk.stop()
            #expect(result == PTTResult(captureId: id, transcript: "turn on the lights", status: .queued))
            try await rig.eventually("chat.send") { !rig.channel.requests(GatewayMethod.chatSend).isEmpty }
            let methods = rig.channel.requests.map(\.method).filter { $0.hasPrefix("talk.session") }
            #expect(methods.first == GatewayMethod.talkSessionCreate && methods.last == GatewayMethod.talkSessionClose, "\(methods)")
            #expect(methods.filter { $0 == GatewayMethod.talkSessionAppendAudio }.count == 3, "300 ms in 100 ms calls: \(methods)")
            #expect(rig.channel.requests(GatewayMethod.chatSend).first?.params?["message"]?.stringValue == "turn on the lights")
            #expect(rig.talk.phase == .idle)
        }
    }

    @Test func `cancel ends the capture, closes its relay session and sends nothing`() async throws {
        let rig = LoopRig()
        try await rig.run { rig in
            rig.talk.setMicrophone(.live)
            let id = try await rig.talk.start()
            rig.speak(frames: 10)
            let result = await rig.talk.cancel()
            #expect(result.captureId == id && result.status == .cancelled, "\(result)")
            #expect(rig.talk.phase == .idle)
            try await rig.eventually("the relay session closed") { !rig.channel.requests(GatewayMethod.talkSessionClose).isEmpty }
            await rig.talk.barrier()
            #expect(rig.channel.requests(GatewayMethod.chatSend).isEmpty)
        }
    }

    @Test func `a followed reply is spoken sentence by sentence through the speaker`() async throws {
        let rig = LoopRig()
        try await rig.run { rig in
            rig.talk.followReply(runId: "run-1")
            rig.talk.handle(Self.chat("run-1", "final", "The lights are on. Anything else?"))
            try await rig.eventually("the reply spoken") { rig.talk.lastSpeech != nil }
            #expect(rig.sink.clips.count == 2, "one clip per sentence")
            #expect(rig.channel.requests(GatewayMethod.talkSpeak).compactMap { $0.params?["text"]?.stringValue }
                    == ["The lights are on.", "Anything else?"])
            #expect(rig.talk.lastSpeech?.outcome == .finished)
            #expect(await rig.talk.lastReply?.spoken.count == 2)
        }
    }

    @Test func `a session switch stops the speaker mid-reply`() async throws {
        let rig = LoopRig(holdSpeech: true)
        try await rig.run { rig in
            rig.talk.followReply(runId: "run-1")
            rig.talk.handle(Self.chat("run-1", "final", "A long answer that is still being spoken."))
            try await rig.eventually("the reply playing") { rig.sink.clips.count == 1 }
            let stopsBefore = rig.sink.stops
            await rig.talk.switchSession(to: "agent:main:other")
            #expect(rig.sink.stops > stopsBefore, "the switch stopped the speaker")
            #expect(rig.talk.sessionKey == "agent:main:other")
            try await rig.eventually("the reply's end reported") { rig.talk.lastSpeech != nil }
            #expect(rig.talk.lastSpeech?.outcome == .stopped)
        }
    }

    @Test func `a command waits for the microphone until the clock says, not the wall`() async throws {
        // A minute of talk time against a 30 s bound on the wall: a wait on the wall clock fails
        // it, and a stall of seconds on a loaded machine does not.
        let rig = LoopRig { $0.partsWaitMs = 60_000 }
        try await rig.run { rig in
            let started = ContinuousClock.now
            let once = Task { try await rig.talk.once() }
            try await rig.eventually("the parts timer armed") { rig.clock.sleepers > 0 }
            rig.clock.advance(byMs: 59_999)
            await rig.talk.barrier()
            #expect(rig.clock.sleepers > 0, "still waiting at 59999 ms")
            rig.clock.advance(byMs: 1)
            do {
                _ = try await once.value
                Issue.record("a once without a microphone was answered")
            } catch let e as PTTError {
                #expect(e.code == PTTError.microphone("").code, "\(e)")
            }
            #expect(ContinuousClock.now - started < .seconds(30), "60 s of talk time took \(ContinuousClock.now - started)")
        }
    }

    @Test func `the microphone is relaxed at rest and prompt while a turn or the speaker hears it`() async throws {
        let rig = LoopRig(holdSpeech: true)
        let paces = Locked<[MicrophonePacing]>([])
        rig.talk.onMicrophonePacing { pace in paces.withLock { $0.append(pace) } }
        #expect(paces.withLock { $0 } == [.prompt], "told the pace of now at once")
        try await rig.run { rig in
            rig.talk.setMicrophone(.live)
            try await rig.eventually("relaxed at rest") { paces.withLock { $0.last } == .relaxed }
            let id = try await rig.talk.start()
            #expect(paces.withLock { $0.last } == .prompt, "prompt as soon as the capture is open")
            rig.speak(frames: 15)
            _ = await rig.talk.stop()
            try await rig.eventually("relaxed once the turn is out") { rig.talk.phase == .idle && paces.withLock { $0.last } == .relaxed }
            #expect(id.isEmpty == false)
            // The speaker playing: each frame at once again (barge-in, the stop word, the canceller).
            rig.talk.followReply(runId: "run-1")
            rig.talk.handle(Self.chat("run-1", "final", "A long answer that is still being spoken."))
            try await rig.eventually("the reply playing") { rig.sink.clips.count == 1 }
            rig.speak(frames: 4)
            try await rig.eventually("prompt while the speaker plays") { paces.withLock { $0.last } == .prompt }
            rig.sink.release()
            try await rig.eventually("the reply's end") { rig.talk.lastSpeech != nil }
            rig.speak(frames: 4)
            try await rig.eventually("relaxed after it") { paces.withLock { $0.last } == .relaxed }
            #expect(paces.withLock { $0 } == [.prompt, .relaxed, .prompt, .relaxed, .prompt, .relaxed], "each change once, in order")
        }
    }

    @Test func `relaxed frames reach the loop four to an item, prompt ones one by one`() async throws {
        let rig = LoopRig()
        try await rig.run { rig in
            rig.talk.setMicrophone(.live)
            await rig.talk.barrier()
            #expect(rig.talk.published.withLock { $0.pacing } == .relaxed)
            rig.speak(frames: 3)
            #expect(rig.talk.held.withLock { $0.count } == 3, "three frames wait for a fourth")
            rig.speak(frames: 1)
            #expect(rig.talk.held.withLock { $0.count } == 0, "the fourth posts all four")
            rig.speak(frames: 2)
            _ = try await rig.talk.start()
            #expect(rig.talk.published.withLock { $0.pacing } == .prompt)
            rig.speak(frames: 1)
            #expect(rig.talk.held.withLock { $0.count } == 0, "a prompt frame posts what waited with it")
            _ = await rig.talk.cancel()
        }
    }
}
