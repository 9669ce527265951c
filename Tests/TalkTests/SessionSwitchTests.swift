// Session switches and barge-in: every trigger silences the speaker within 50 ms and drops
// late results; talking over the assistant cuts it off on a headset and not on a loudspeaker.

import Audio
import ClawvoiceCore
import Foundation
import GatewayClient
import GatewayProtocol
import LoopbackGateway
import Talk
import Testing

/// Speaker-monitor frames with their arrival times.
final class SpeakerLog: Sendable {
    let frames = Locked<[(ContinuousClock.Instant, Double)]>([])
    let capture: PulseCapture
    let task: Task<Void, Never>
    init(_ rig: TalkRig) async throws {
        capture = PulseCapture(connection: rig.speakerTap, source: "cv_speaker.monitor")
        try await capture.start()
        let frames = self.frames
        let c = capture
        task = Task { for await f in c.frames { frames.withLock { $0.append((f.receivedAt, f.pcm.rms)) } } }
    }
    func waitUntilLoud(timeout: Duration = .seconds(15)) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if frames.withLock({ $0.last?.1 ?? 0 }) > 0.01 { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return false
    }
    /// Loud frames that arrived more than `graceMs` after `t`.
    func loud(after t: ContinuousClock.Instant, graceMs: Int = 70) -> Int {
        frames.withLock { $0.filter { $0.0 > t + .milliseconds(graceMs) && $0.1 >= 0.005 }.count }
    }
    func stop() async { capture.stop(); await task.value }
}

extension TalkAudio {
@Suite struct SessionSwitchTests {
    /// Starts a long spoken reply through the real path (PTT turn → echo → streamed speech).
    func speakLongReply(_ rig: TalkRig, speaker: SpeakerLog) async throws {
        await rig.gateway.supplyTranscript("One two three four five six seven eight nine ten. Eleven twelve thirteen fourteen fifteen sixteen. Seventeen eighteen nineteen twenty and on and on for a long while.")
        _ = try await rig.talk.start()
        _ = try await rig.micPlayer.play(try Signal.speech("go"))
        _ = await rig.talk.stop()
        #expect(await speaker.waitUntilLoud(), "the reply started playing")
    }

    enum Trigger: String, CaseIterable, Sendable { case sessionUse, mainKeyChange, connectionLost, gatewaySwitch }

    // Every trigger's decision is a machine test (TalkMachineSessionTests); through real audio,
    // one switch the user makes and one the connection makes prove that the speaker goes quiet.
    @Test(arguments: [Trigger.sessionUse, .connectionLost])
    func `a session switch silences the speaker within 50 ms and drops late results`(trigger: Trigger) async throws {
        let rig = try await TalkRig.make { $0.echoDeltaDelayMs = 400 }
        defer { Task { await rig.shutdown() } }
        try await rig.waitForMicrophone()
        await rig.talk.operatorChanged(connected: true, mainSessionKey: "agent:main:main")
        let speaker = try await SpeakerLog(rig)
        try await speakLongReply(rig, speaker: speaker)
        let at = ContinuousClock.now
        switch trigger {
        case .sessionUse: await rig.talk.switchSession(to: "agent:main:kitchen")
        case .mainKeyChange: await rig.talk.operatorChanged(connected: true, mainSessionKey: "agent:main:other")
        case .connectionLost: await rig.talk.operatorChanged(connected: false, mainSessionKey: nil)
        case .gatewaySwitch: await rig.talk.interrupt(reason: "gateway switched")
        }
        // Late deltas and the final event of the old run keep arriving for a while: none may play.
        try await Task.sleep(for: .seconds(2))
        let late = speaker.loud(after: at)
        await speaker.stop()
        #expect(late == 0, "\(trigger): \(late) loud frames after the switch")
        if trigger == .sessionUse { #expect(await rig.talk.sessionKey == "agent:main:kitchen") }
    }

    @Test func `a switch during a capture cancels it and closes the relay session`() async throws {
        let rig = try await TalkRig.make(speakReplies: false)
        defer { Task { await rig.shutdown() } }
        try await rig.waitForMicrophone()
        let held = Task { try await rig.talk.once() }
        try await Task.sleep(for: .milliseconds(400))
        await rig.talk.switchSession(to: "agent:main:elsewhere")
        let r = try await held.value
        #expect(r.status == .cancelled)
        let deadline = ContinuousClock.now + .seconds(5)
        while await rig.gateway.relayRecords().first?.closed != true && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(await rig.gateway.relayRecords().first?.closed == true)
        #expect(await rig.gateway.requests(method: "chat.send").isEmpty)
    }

    @Test(arguments: [true, false])
    func `talking over the reply cuts it off on a headset and not on a loudspeaker`(headset: Bool) async throws {
        let rig = try await TalkRig.make(headset: headset) { $0.echoDeltaDelayMs = 200 }
        defer { Task { await rig.shutdown() } }
        try await rig.waitForMicrophone()
        let speaker = try await SpeakerLog(rig)
        try await speakLongReply(rig, speaker: speaker)
        try await Task.sleep(for: .milliseconds(600))
        let interruptAt = ContinuousClock.now
        _ = try await rig.micPlayer.play(try Signal.speech("wait, stop, that is not what I meant"))
        try await Task.sleep(for: .milliseconds(300))
        let stillLoud = speaker.loud(after: interruptAt + .milliseconds(1500))
        await speaker.stop()
        if headset {
            #expect(await rig.talk.bargeIns == 1)
            #expect(stillLoud == 0, "playback went on after the barge-in")
            let prefix = try #require(await rig.talk.pendingInterruption)
            #expect(prefix.hasPrefix("Assistant speech interrupted at ") && prefix.hasSuffix("s."))
            // The next prompt carries it.
            _ = try await rig.talk.start()
            _ = try await rig.micPlayer.play(try Signal.speech("next"))
            _ = await rig.talk.stop()
            let deadline = ContinuousClock.now + .seconds(5)
            while await rig.gateway.requests(method: "chat.send").count < 2 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
            let sent = await rig.gateway.requests(method: "chat.send").last?.params?["message"]?.stringValue ?? ""
            #expect(sent.hasPrefix(prefix + "\n\n"), "\(sent)")
        } else {
            #expect(await rig.talk.bargeIns == 0)
            #expect(stillLoud > 0, "a loudspeaker reply is not cut by the microphone")
            #expect(await rig.talk.gatedFrames > 0, "the microphone was muted while the loudspeaker spoke")
        }
    }
}
}
