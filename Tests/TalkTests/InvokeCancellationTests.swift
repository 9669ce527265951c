// Issue 27, item 3: the gateway giving up on a talk.ptt.* invoke, tried from the outside with
// speech going on at the microphone. A node session on the loopback gateway dispatches
// talk.ptt.* to the controller as the daemon does (NodeCommands.registry); the gateway invokes
// with a timeoutMs, cancels with node.invoke.cancel, and cancels while the turn is being queued.

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

extension TalkAudio {
@Suite struct InvokeCancellationTests {
    /// A node session whose talk.ptt.once and talk.ptt.cancel reach the rig's controller.
    static func pttNode(_ rig: TalkRig) async throws -> GatewaySession {
        let talk = rig.talk
        let commands = NodeCommandRegistry()
        commands.register("talk.ptt.once") { req, _ in
            let session = TurnSession.resolve(invoke: req.session, current: nil, main: nil)
            do { return try JSONValue(encoding: try await talk.once(session: session)) } catch {
                throw NodeInvokeError(code: .unavailable, message: "\(error)")
            }
        }
        commands.register("talk.ptt.cancel") { _, _ in try JSONValue(encoding: await talk.cancel()) }
        let (identity, instanceId) = try rig.store.loadOrCreateIdentity()
        let node = GatewaySession(role: .node, endpoint: GatewayEndpoint(name: "lb", url: await rig.gateway.url),
                                  credentials: GatewayCredentials(sharedToken: "t"), identity: identity, instanceId: instanceId,
                                  store: rig.store, options: SessionOptions(displayName: "ptt node", version: "test"),
                                  commands: commands, log: rig.log.sink)
        await node.start()
        let status = await node.waitUntilSettled(timeout: .seconds(10))
        try #require(status.state == .connected, "\(status.detail)")
        return node
    }

    /// About seven seconds of speech without a pause long enough to end a capture.
    static let longSpeech = "the quick brown fox jumps over the lazy dog while the kitchen lights stay on " +
        "and the radio plays a long song about the weather in the mountains near the lake"

    static func until(_ timeout: Duration, _ condition: () async -> Bool) async -> Bool {
        await eventually(timeout, every: .milliseconds(20), condition)
    }

    /// Defect 1: answered "node invoke timed out" after 12.6 s, when the capture ended on its
    /// own, and its turn sent anyway. Now the answer leaves at the timeout and the capture ends with it.
    @Test func `an invoke's timeout answers on time, ends the capture and sends nothing`() async throws {
        let rig = try await TalkRig.make(speakReplies: false)
        defer { Task { await rig.shutdown() } }
        try await rig.waitForMicrophone()
        let node = try await Self.pttNode(rig)
        defer { Task { await node.stop() } }
        let words = try Signal.speech(Self.longSpeech)
        #expect(words.durationMilliseconds > 6_000, "speech \(words.durationMilliseconds) ms")
        let speechEnds = ContinuousClock.now + .milliseconds(Int64(words.durationMilliseconds))
        let playing = Task { try await rig.micPlayer.play(words) }
        try await Task.sleep(for: .milliseconds(300))

        let started = ContinuousClock.now
        let result = try await rig.gateway.invoke(command: "talk.ptt.once", paramsJSON: "{}", timeoutMs: 1_500)
        let took = ContinuousClock.now - started
        #expect(!result.ok && result.error?.message == "UNAVAILABLE: node invoke timed out")
        // 1.5 s on a quiet machine. What counts is the order, which load does not change: the
        // answer and the end of the capture come while the speech goes on (an answer that waits
        // for the capture comes only after the speech and the silence window).
        #expect(ContinuousClock.now < speechEnds, "answered after \(took), when the speech was over")
        #expect(await Self.until(speechEnds - ContinuousClock.now) { rig.talk.phase == .idle },
                "the capture went on as long as the speech")

        _ = try await playing.value
        try await Task.sleep(for: .seconds(2))  // past where the capture would have ended on silence
        #expect(await rig.gateway.requests(method: "chat.send").isEmpty, "the timed-out turn was sent")
        #expect(await rig.gateway.relayRecords().last?.closed == true, "its relay session is closed")
    }

    /// Defect 2: after node.invoke.cancel {invokeId, nodeId} the capture ran on for 7 s.
    @Test func `node.invoke.cancel ends the capture at once and answers cancelled`() async throws {
        let rig = try await TalkRig.make(speakReplies: false)
        defer { Task { await rig.shutdown() } }
        try await rig.waitForMicrophone()
        let node = try await Self.pttNode(rig)
        defer { Task { await node.stop() } }
        let words = try Signal.speech(Self.longSpeech)
        let speechEnds = ContinuousClock.now + .milliseconds(Int64(words.durationMilliseconds))
        let playing = Task { try await rig.micPlayer.play(words) }
        try await Task.sleep(for: .milliseconds(300))

        let invoke = Task { try await rig.gateway.invoke(command: "talk.ptt.once", paramsJSON: "{}", timeoutMs: 30_000) }
        #expect(await Self.until(.seconds(10)) { rig.talk.activeCaptureId != nil }, "no capture started")
        let id = try #require(await rig.gateway.lastInvokeId())
        try await Task.sleep(for: .milliseconds(700))  // speech is streaming into the capture
        let cancelledAt = ContinuousClock.now
        await rig.gateway.cancelInvoke(id)
        // Milliseconds on a quiet machine; what counts is that the capture ends, and the answer
        // comes, while the speech goes on (before, the capture ran to the end of the speech).
        #expect(await Self.until(speechEnds - ContinuousClock.now) { rig.talk.phase == .idle },
                "the capture went on as long as the speech")
        let result = try await invoke.value
        let took = ContinuousClock.now - cancelledAt
        #expect(result.ok && result.payload?["status"]?.stringValue == "cancelled", "\(result)")
        #expect(ContinuousClock.now < speechEnds, "answered \(took) after the cancel, when the speech was over")

        _ = try await playing.value
        try await Task.sleep(for: .seconds(2))
        #expect(await rig.gateway.requests(method: "chat.send").isEmpty, "the cancelled turn was sent")
        #expect(await rig.gateway.relayRecords().last?.closed == true)
    }

    /// Defect 3: a cancel between deliver and delivered answered `cancelled` while the turn was
    /// still sent and its reply spoken. Another process holds the database's write lock, so the
    /// outbox write waits (as behind `clawvoice send`) and the cancel lands while it does.
    @Test func `a cancel while the turn is being queued answers what really happened`() async throws {
        let rig = try await TalkRig.make(outbox: true)
        defer { Task { await rig.shutdown() } }
        try await rig.waitForMicrophone()
        let node = try await Self.pttNode(rig)
        defer { Task { await node.stop() } }
        await rig.gateway.supplyTranscript("what is the weather like")
        let lock = try await WriteLockHolder(database: rig.store.databasePath)
        defer { lock.release() }

        let once = Task { try await rig.gateway.invoke(command: "talk.ptt.once", paramsJSON: "{}", timeoutMs: 30_000) }
        #expect(await Self.until(.seconds(10)) { rig.talk.activeCaptureId != nil }, "no capture started")
        let id = try #require(await rig.talk.activeCaptureId)
        let words = try Signal.speech("what is the weather like")
        _ = try await rig.micPlayer.play(PCMBuffer(format: .voice, samples: words.samples + [Int16](repeating: 0, count: 16_000 * 2)))
        // The voice note is published as the turn goes to the outbox, whose write now waits for
        // the lock (at most 5 s, the store's busy timeout: the cancel must come well before).
        #expect(await Self.until(.seconds(10)) { rig.talk.lastVoiceNote != nil }, "the capture never ended")
        try await Task.sleep(for: .milliseconds(200))
        #expect(await rig.talk.phase != .idle, "the turn is still being queued")

        let cancel = Task { try await rig.gateway.invoke(command: "talk.ptt.cancel", paramsJSON: "{}", timeoutMs: 30_000) }
        // The lock goes once the cancel has reached the talk machine (which logs it).
        #expect(await Self.until(.seconds(4)) { rig.log.contains("capture \(id) cancelled") }, "the cancel never arrived")
        lock.release()
        let cancelled = try await cancel.value
        let turn = try await once.value
        let status = cancelled.payload?["status"]?.stringValue
        #expect(turn.payload?["status"]?.stringValue == status, "the turn's answer agrees with the cancel's")

        try await Task.sleep(for: .seconds(3))  // time for the outbox to send and the reply to play
        let sends = await rig.gateway.requests(method: "chat.send")
        if status == "cancelled" {
            #expect(sends.isEmpty, "answered cancelled, but the turn was sent")
            #expect(await rig.talk.lastSpeech == nil, "answered cancelled, but its reply was spoken")
        } else {
            #expect(status == "queued" && sends.count == 1, "answered \(status ?? "nil") with \(sends.count) sends")
        }
        // Here the write was still waiting when the cancel came: the turn can be taken back.
        #expect(status == "cancelled")
        #expect(try rig.store.outboxCount(gateway: "lb") == 0)
    }
}
}

/// Another process with the SQLite write lock (BEGIN IMMEDIATE) until `release()`.
final class WriteLockHolder: @unchecked Sendable {
    private let process = Process()
    private let input = Pipe()

    init(database: String) async throws {
        let output = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", """
            import sqlite3, sys
            c = sqlite3.connect(sys.argv[1], isolation_level=None)
            c.execute("BEGIN IMMEDIATE")
            print("locked", flush=True)
            sys.stdin.read()
            c.execute("ROLLBACK")
            """, database]
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        let line = await withCheckedContinuation { (c: CheckedContinuation<String, Never>) in
            DispatchQueue.global().async {
                c.resume(returning: String(decoding: output.fileHandleForReading.availableData, as: UTF8.self))
            }
        }
        guard line.hasPrefix("locked") else { throw TestFailure("the lock holder said \(line)") }
    }

    /// Lets the lock go (idempotent) and waits for the process to end.
    func release() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}
