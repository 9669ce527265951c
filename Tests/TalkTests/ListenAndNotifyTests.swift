// Listen and spoken notifications on the talk tests' private PulseAudio: what reaches the
// speaker monitor, what the loopback gateway was asked to synthesise, and in which order.

import Audio
import ClawvoiceCore
import ClawvoiceTesting
import Foundation
import GatewayClient
import GatewayProtocol
import LoopbackGateway
import Store
import Talk
import Testing

private let longText = "This message is long enough to be interrupted: it keeps going, clause after clause, so that a test can stop it in the middle."

/// Level frames of the speaker monitor, stamped as they arrive.
private final class SpeakerMeter: Sendable {
    let frames = Locked<[(ContinuousClock.Instant, Double)]>([])
    private let capture: PulseCapture
    private let reader: Task<Void, Never>

    init(_ rig: TalkRig) async throws {
        let capture = PulseCapture(connection: rig.speakerTap, source: "cv_speaker.monitor")
        try await capture.start()
        self.capture = capture
        let frames = self.frames
        reader = Task { for await f in capture.frames { frames.withLock { $0.append((f.receivedAt, f.pcm.rms)) } } }
    }

    var loud: Bool { frames.withLock { $0.last?.1 ?? 0 } >= 0.01 }

    /// Waits until the speaker is audible.
    func waitUntilAudible(_ timeout: Duration = .seconds(10)) async throws {
        let deadline = ContinuousClock.now + timeout
        while !loud {
            guard ContinuousClock.now < deadline else { throw TestFailure("the speaker stayed silent") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    func levels(after instant: ContinuousClock.Instant) -> [Double] {
        frames.withLock { $0 }.filter { $0.0 > instant }.map(\.1)
    }

    func heardAnything() -> Bool { frames.withLock { $0 }.contains { $0.1 >= 0.01 } }

    func stop() async {
        capture.stop()
        await reader.value
    }
}

/// How `messageId` ended, once it has (nil after 10 s).
private func ending(of messageId: String, _ player: ListenPlayer) async throws -> SpeechReport? {
    let deadline = ContinuousClock.now + .seconds(10)
    while ContinuousClock.now < deadline {
        if let e = await player.lastEnded, e.messageId == messageId { return e.report }
        try await Task.sleep(for: .milliseconds(5))
    }
    return nil
}

/// The texts the gateway was asked to speak, with their method.
private func spoken(_ rig: TalkRig) async -> [String] {
    await rig.gateway.speakCalls().map { "\($0.0): \($0.1["text"]?.stringValue ?? "")" }
}

extension TalkAudio {
@Suite struct `Listen` {
    @Test func `a message is spoken through tts.speak and asking again stops it within 100 ms`() async throws {
        let rig = try await TalkRig.make(speakReplies: false)
        defer { Task { await rig.shutdown() } }
        let meter = try await SpeakerMeter(rig)
        let player = ListenPlayer(talk: rig.talk)
        #expect(await player.toggle(messageId: "m1", text: longText) == .speaking(messageId: "m1", replaced: nil))
        #expect(await player.playingMessageId == "m1")
        try await meter.waitUntilAudible()
        let stopAt = ContinuousClock.now
        #expect(await player.toggle(messageId: "m1", text: longText) == .stopped(messageId: "m1"))
        let report = try await ending(of: "m1", player)
        try await Task.sleep(for: .milliseconds(500))
        await meter.stop()
        #expect(report?.outcome == .stopped && report?.engine != "espeak-ng", "a user stop never falls back: \(String(describing: report))")
        #expect(await player.playingMessageId == nil)
        // Frames are stamped on arrival: allow one 20 ms fragment of transport past the 100 ms.
        let after = meter.levels(after: stopAt + .milliseconds(120))
        #expect(!after.isEmpty && after.allSatisfy { $0 < 0.005 }, "loud frames after the stop: \(after.filter { $0 >= 0.005 }.count)")
        #expect(await spoken(rig) == ["tts.speak: \(longText)"])
    }

    @Test func `another message replaces the one playing`() async throws {
        let rig = try await TalkRig.make(speakReplies: false)
        defer { Task { await rig.shutdown() } }
        let meter = try await SpeakerMeter(rig)
        let player = ListenPlayer(talk: rig.talk)
        _ = await player.toggle(messageId: "m1", text: longText)
        try await meter.waitUntilAudible()
        #expect(await player.toggle(messageId: "m2", text: "The second message.") == .speaking(messageId: "m2", replaced: "m1"))
        #expect(await player.playingMessageId == "m2")
        let first = try await ending(of: "m1", player)
        #expect(first?.outcome == .stopped && first?.engine != "espeak-ng", "\(String(describing: first))")
        let second = try await ending(of: "m2", player)
        await meter.stop()
        #expect(second?.outcome == .finished && second?.engine == "gateway", "\(String(describing: second))")
        #expect(await player.playingMessageId == nil, "a finished message leaves the player idle")
        #expect(await spoken(rig) == ["tts.speak: \(longText)", "tts.speak: The second message."])
        // Idle again: the same id plays again instead of stopping.
        #expect(await player.toggle(messageId: "m2", text: "The second message.") == .speaking(messageId: "m2", replaced: nil))
        _ = await player.waitUntilDone()
    }

    @Test func `a tts.speak error falls back to espeak-ng`() async throws {
        let rig = try await TalkRig.make(speakReplies: false)
        defer { Task { await rig.shutdown() } }
        // Not fallback-eligible for talk.speak; for tts.speak any error falls back.
        await rig.gateway.setAudioFault(.errorNotEligible)
        let meter = try await SpeakerMeter(rig)
        let player = ListenPlayer(talk: rig.talk)
        _ = await player.toggle(messageId: "m1", text: "Spoken on this device.")
        let report = await player.waitUntilDone()
        try await Task.sleep(for: .milliseconds(200))
        await meter.stop()
        #expect(report?.engine == "espeak-ng" && report?.outcome == .finished, "\(String(describing: report))")
        #expect(report?.fallbackReason?.contains("synthesis failed") == true)
        #expect(meter.heardAnything(), "espeak-ng audio reached the speaker")
        #expect(await spoken(rig) == ["tts.speak: Spoken on this device."])
    }

    @Test func `a listen interrupts a Talk reply`() async throws {
        let rig = try await TalkRig.make(speakReplies: false)
        defer { Task { await rig.shutdown() } }
        let meter = try await SpeakerMeter(rig)
        let reply = Task { await rig.speech.speak(longText, route: .talkSpeak) }
        try await meter.waitUntilAudible()
        let player = ListenPlayer(talk: rig.talk)
        _ = await player.toggle(messageId: "m1", text: "Listen wins.")
        #expect(await reply.value.outcome == .stopped)
        #expect(await player.waitUntilDone()?.outcome == .finished)
        await meter.stop()
    }
}

@Suite struct `Spoken notifications` {
    @Test func `title then body through tts.speak, with the result payload`() async throws {
        let rig = try await TalkRig.make(speakReplies: false)
        defer { Task { await rig.shutdown() } }
        let meter = try await SpeakerMeter(rig)
        let speaker = NotificationSpeaker(talk: rig.talk)
        let result = try await speaker.deliver(params: ["title": "Dinner", "body": "  It is on the table.  ", "sound": "default"])
        await meter.stop()
        #expect(await spoken(rig) == ["tts.speak: Dinner", "tts.speak: It is on the table."])
        #expect(result.priority == .active)
        #expect(result.spoken == "Dinner\nIt is on the table.")
        #expect(result.outcome == "finished" && result.engine == "gateway")
        #expect(result.interrupted == false && result.queued == false)
        #expect(meter.heardAnything())
    }

    @Test(arguments: [["title": "Only a title"], ["body": "Only a body"], ["title": " ", "body": "Blank title"]] as [JSONValue])
    func `an empty title or body is skipped`(params: JSONValue) async throws {
        let rig = try await TalkRig.make(speakReplies: false)
        defer { Task { await rig.shutdown() } }
        let result = try await NotificationSpeaker(talk: rig.talk).deliver(params: params)
        let expected = (params["title"]?.stringValue ?? "").trimmingCharacters(in: .whitespaces).isEmpty
            ? params["body"]!.stringValue! : params["title"]!.stringValue!
        #expect(await spoken(rig) == ["tts.speak: \(expected)"])
        #expect(result.spoken == expected)
    }

    @Test(arguments: [[:], ["title": "", "body": "   "], ["title": 3, "body": nil]] as [JSONValue])
    func `no title and no body is INVALID_REQUEST`(params: JSONValue) async throws {
        let rig = try await TalkRig.make(speakReplies: false)
        defer { Task { await rig.shutdown() } }
        await #expect(throws: NodeInvokeError(code: .invalidRequest, message: "empty notification")) {
            try await NotificationSpeaker(talk: rig.talk).deliver(params: params)
        }
        #expect(await rig.gateway.speakCalls().isEmpty)
    }

    @Test func `an ordinary notification waits for the reply that is playing`() async throws {
        let rig = try await TalkRig.make(speakReplies: false)
        defer { Task { await rig.shutdown() } }
        let meter = try await SpeakerMeter(rig)
        let reply = Task { await rig.speech.speak(longText, route: .talkSpeak) }
        try await meter.waitUntilAudible()
        let speaker = NotificationSpeaker(talk: rig.talk)
        let note = Task { try await speaker.deliver(params: ["title": "Reminder", "body": "Water the plants.", "priority": "active"]) }
        // While the reply plays, the notification does not even fetch its audio.
        try await Task.sleep(for: .milliseconds(600))
        #expect(await spoken(rig) == ["talk.speak: \(longText)"])
        let replyReport = await reply.value
        #expect(replyReport.outcome == .finished, "the reply was not cut off")
        let result = try await note.value
        await meter.stop()
        #expect(result.queued == true && result.interrupted == false)
        #expect(result.outcome == "finished")
        #expect(await spoken(rig) == ["talk.speak: \(longText)", "tts.speak: Reminder", "tts.speak: Water the plants."])
    }

    @Test func `an ordinary notification waits for a streamed Talk reply to end, not for a gap between its sentences`() async throws {
        let rig = try await TalkRig.make()
        defer { Task { await rig.shutdown() } }
        let meter = try await SpeakerMeter(rig)
        let idem = UUID().uuidString.lowercased()
        await rig.talk.followReply(runId: idem)
        _ = try await rig.session.request(GatewayMethod.chatSend, params: [
            "sessionKey": "agent:main:main", "idempotencyKey": .string(idem),
            "message": "First sentence here. A second sentence follows it. And the third one ends the reply.",
        ], timeoutMs: 5_000)
        try await meter.waitUntilAudible()
        let note = Task { try await NotificationSpeaker(talk: rig.talk).deliver(params: ["title": "Timer", "body": "Tea is ready."]) }
        let stream = try #require(await rig.talk.lastReply)
        await stream.done()
        let result = try await note.value
        await meter.stop()
        let reports = await stream.spoken
        #expect(reports.count >= 3 && reports.allSatisfy { $0.outcome == .finished }, "the reply was not cut: \(reports)")
        let calls = await spoken(rig)
        let firstNotification = try #require(calls.firstIndex(of: "tts.speak: Timer"))
        #expect(calls[..<firstNotification].allSatisfy { $0.hasPrefix("talk.speak: ") }, "\(calls)")
        #expect(calls[firstNotification...] == ["tts.speak: Timer", "tts.speak: Tea is ready."], "\(calls)")
        #expect(result.queued == true && result.outcome == "finished")
    }

    @Test(arguments: [["priority": "timeSensitive"], ["priority": "critical"], ["delivery": "interrupt"], ["interrupt": true]] as [JSONValue])
    func `an urgent notification interrupts the reply`(urgency: JSONValue) async throws {
        let rig = try await TalkRig.make(speakReplies: false)
        defer { Task { await rig.shutdown() } }
        let meter = try await SpeakerMeter(rig)
        let reply = Task { await rig.speech.speak(longText, route: .talkSpeak) }
        try await meter.waitUntilAudible()
        var params = urgency.objectValue ?? [:]
        params["title"] = "Doorbell"
        params["body"] = "Someone is at the door."
        let result = try await NotificationSpeaker(talk: rig.talk).deliver(params: .object(params))
        await meter.stop()
        #expect(await reply.value.outcome == .stopped, "the reply was cut off")
        #expect(result.interrupted == true && result.outcome == "finished")
        if urgency["priority"] != nil { #expect(result.priority == .timeSensitive) }
        #expect(await spoken(rig) == ["talk.speak: \(longText)", "tts.speak: Doorbell", "tts.speak: Someone is at the door."])
    }

    /// Issue 12 item 5: a passive notification is not spoken while the user is talking (a capture
    /// is live: the talk machine's speaker sub-state holds it).
    @Test func `a passive notification waits until the user has finished talking`() async throws {
        let rig = try await TalkRig.make(speakReplies: false)
        defer { Task { await rig.shutdown() } }
        try await rig.waitForMicrophone()
        _ = try await rig.talk.start()  // the user talks
        let speaker = NotificationSpeaker(talk: rig.talk)
        let note = Task { try await speaker.notify(params: ["title": "Laundry", "body": "done.", "priority": "passive"]) }
        try await Task.sleep(for: .milliseconds(600))
        #expect(await rig.gateway.speakCalls().isEmpty, "nothing is said over the user")
        _ = await rig.talk.cancel()  // the user has finished
        _ = try await note.value
        #expect(await spoken(rig) == ["tts.speak: Laundry", "tts.speak: done."])
    }

    @Test func `queued notifications keep their order`() async throws {
        let rig = try await TalkRig.make(speakReplies: false)
        defer { Task { await rig.shutdown() } }
        let speaker = NotificationSpeaker(talk: rig.talk)
        let first = Task { try await speaker.deliver(params: ["title": "One", "body": "First body."]) }
        // Let the first one take its place in the queue before the second arrives.
        while await rig.gateway.speakCalls().isEmpty { try await Task.sleep(for: .milliseconds(5)) }
        let second = Task { try await speaker.deliver(params: ["title": "Two", "body": "Second body."]) }
        _ = try await first.value
        _ = try await second.value
        #expect(await spoken(rig) == ["tts.speak: One", "tts.speak: First body.", "tts.speak: Two", "tts.speak: Second body."])
    }

    @Test func `system.notify through node.invoke answers ok true, like the Linux node`() async throws {
        let rig = try await TalkRig.make(speakReplies: false)
        defer { Task { await rig.shutdown() } }
        let store = try ClawStore(directory: rig.dir)
        let (identity, instanceId) = try store.loadOrCreateIdentity()
        let speaker = NotificationSpeaker(talk: rig.talk)
        let registry = NodeCommandRegistry()
        registry.register("system.notify", speaker.handler)
        let node = GatewaySession(role: .node, endpoint: GatewayEndpoint(name: "lb", url: await rig.gateway.url),
                                  credentials: GatewayCredentials(sharedToken: "t"), identity: identity, instanceId: instanceId,
                                  store: store, options: SessionOptions(displayName: "notify test", version: "test"),
                                  commands: registry, log: rig.log.sink)
        await node.start()
        defer { Task { await node.stop() } }
        let status = await node.waitUntilSettled(timeout: .seconds(10))
        try #require(status.state == .connected, "\(status.detail)")

        let result = try await rig.gateway.invoke(command: "system.notify", paramsJSON: #"{"title":"Hi","body":"Dinner"}"#)
        #expect(result.ok, "\(String(describing: result.error))")
        let payload = try #require(result.payload)
        #expect(payload == ["ok": true])
        #expect(await spoken(rig) == ["tts.speak: Hi", "tts.speak: Dinner"])

        let empty = try await rig.gateway.invoke(command: "system.notify", paramsJSON: #"{"title":"","body":""}"#)
        #expect(!empty.ok && empty.error?.code == "INVALID_REQUEST")
        #expect(empty.error?.message == "INVALID_REQUEST: empty notification")
    }

    @Test func `system.notify answers NOTIFICATIONS_DISABLED when spoken notifications are off`() async throws {
        let rig = try await TalkRig.make(speakReplies: false)
        defer { Task { await rig.shutdown() } }
        let store = try ClawStore(directory: rig.dir)
        let (identity, instanceId) = try store.loadOrCreateIdentity()
        let registry = NodeCommandRegistry()
        registry.register("system.notify", NotificationSpeaker(talk: rig.talk, enabled: false).handler)
        let node = GatewaySession(role: .node, endpoint: GatewayEndpoint(name: "lb", url: await rig.gateway.url),
                                  credentials: GatewayCredentials(sharedToken: "t"), identity: identity, instanceId: instanceId,
                                  store: store, options: SessionOptions(displayName: "notify off", version: "test"),
                                  commands: registry, log: rig.log.sink)
        await node.start()
        defer { Task { await node.stop() } }
        let status = await node.waitUntilSettled(timeout: .seconds(10))
        try #require(status.state == .connected, "\(status.detail)")
        let result = try await rig.gateway.invoke(command: "system.notify", paramsJSON: #"{"title":"Hi","body":"Dinner"}"#)
        #expect(!result.ok && result.error?.code == "NOTIFICATIONS_DISABLED")
        #expect(result.error?.message.hasPrefix("NOTIFICATIONS_DISABLED: ") == true)
        #expect(await rig.gateway.speakCalls().isEmpty, "nothing was spoken")
    }
}
}
