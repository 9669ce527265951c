// The transcription relay contract of the newest gateway (issue 12, item 6), without audio
// devices: RelayUplink against the loopback gateway's relay, which now asks for G.711 µ-law
// at 8 kHz by default (the only input the real relay takes), still serves the Opus path when
// configured to name it, and fails talk.session.create with details.talkIssue on request.
// Also the system.notify parser (item 5), a pure function.

import Audio
import ClawvoiceCore
import Foundation
import GatewayClient
import GatewayProtocol
import LoopbackGateway
import Store
@testable import Talk
import Testing

/// Forwards the operator session's talk.event frames to the uplink under test.
private final class UplinkBox: Sendable {
    let uplink = Locked<RelayUplink?>(nil)
    func forward(_ e: EventFrame) {
        guard e.event == GatewayEvent.talkEvent, let t = TalkTranscriptEvent(payload: e.payload),
              let u = uplink.withLock({ $0 }) else { return }
        Task { await u.handle(t) }
    }
}

private struct RelayRig {
    let gateway: LoopbackGateway
    let session: GatewaySession
    let box: UplinkBox
    let dir: String

    static func make(_ configure: (inout LoopbackGateway.Configuration) -> Void = { _ in }) async throws -> RelayRig {
        var gc = LoopbackGateway.Configuration()
        gc.autoApprove = true
        gc.auth = .token("t")
        gc.tickIntervalMs = 1000
        configure(&gc)
        let g = LoopbackGateway(configuration: gc)
        try await g.start()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cv-relay-\(UUID().uuidString.prefix(8))").path
        let store = try ClawStore(directory: dir)
        let (identity, instanceId) = try store.loadOrCreateIdentity()
        let url = await g.url
        try store.upsertGateway(GatewayRecord(name: "lb", url: url, sharedToken: "t", isActive: true, addedAtMs: 0))
        let box = UplinkBox()
        let session = GatewaySession(role: .operator, endpoint: GatewayEndpoint(name: "lb", url: url),
                                     credentials: GatewayCredentials(sharedToken: "t"), identity: identity, instanceId: instanceId,
                                     store: store, options: SessionOptions(displayName: "relay test", version: "test"),
                                     log: .silent, onEvent: { box.forward($0) })
        await session.start()
        let s = await session.waitUntilSettled(timeout: .seconds(10))
        guard s.state == .connected else { throw CancellationError() }
        return RelayRig(gateway: g, session: session, box: box, dir: dir)
    }

    func uplink() -> RelayUplink {
        let u = RelayUplink(channel: session, sessionKey: "agent:main:main", log: .silent)
        box.uplink.withLock { $0 = u }
        return u
    }

    /// One second of a 440 Hz tone at 16 kHz, in 20 ms frames, streamed and finished.
    func stream(_ u: RelayUplink, seconds: Double = 1) async -> RelayUplink.Outcome {
        await u.start()
        let n = Int(16_000 * seconds)
        let samples = (0..<n).map { Int16(8000 * sin(2 * Double.pi * 440 * Double($0) / 16_000)) }
        for i in stride(from: 0, to: n, by: 320) {
            await u.append(PCMBuffer(format: .voice, samples: Array(samples[i..<min(i + 320, n)])))
        }
        return await u.finish()
    }

    func shutdown() async {
        await session.stop()
        await gateway.stop()
        try? FileManager.default.removeItem(atPath: dir)
    }
}

@Suite struct RelayContractTests {
    @Test func `the loopback relay asks for G.711 µ-law at 8 kHz by default and the uplink sends exactly that`() async throws {
        let rig = try await RelayRig.make()
        let u = rig.uplink()
        let outcome = await rig.stream(u)
        await rig.shutdown()
        guard case .transcript(let text) = outcome else { Issue.record("no transcript: \(outcome)"); return }
        #expect(text?.hasPrefix("audio 1.0") == true, "the relay decoded about a second: \(String(describing: text))")
        let record = try #require(await rig.gateway.relayRecords().last)
        #expect(record.encoding == .g711MuLaw && record.sampleRateHz == 8_000)
        #expect(await u.encoding == .g711MuLaw)
        // One byte per sample at 8 kHz: a second of audio is about 8000 bytes.
        #expect(abs(record.bytes.count - 8_000) < 400, "\(record.bytes.count) bytes")
        #expect(record.decodeError == nil)
        let create = try #require(await rig.gateway.requests(method: "talk.session.create").last)
        #expect(create.params?["mode"] == "transcription" && create.params?["sessionKey"] == nil, "sessionless (issue 26, D2)")
    }

    @Test func `a relay that names Opus still gets an Ogg Opus stream`() async throws {
        let rig = try await RelayRig.make { $0.relay = .oggOpus }
        let u = rig.uplink()
        let outcome = await rig.stream(u)
        await rig.shutdown()
        guard case .transcript = outcome else { Issue.record("no transcript: \(outcome)"); return }
        let record = try #require(await rig.gateway.relayRecords().last)
        #expect(record.encoding == .oggOpus)
        #expect(Array(record.bytes.prefix(4)) == Array("OggS".utf8))
        #expect(record.decodeError == nil && (record.decoded?.durationMilliseconds ?? 0) > 900)
    }

    @Test func `a talk.session.create refused with details.talkIssue names the issue and sends nothing`() async throws {
        let rig = try await RelayRig.make { $0.relayUnavailable = true }
        let u = rig.uplink()
        let outcome = await rig.stream(u, seconds: 0.3)
        let appends = await rig.gateway.requests(method: "talk.session.appendAudio").count
        await rig.shutdown()
        guard case .unavailable(let reason) = outcome else { Issue.record("expected unavailable: \(outcome)"); return }
        #expect(reason.contains("realtime_unavailable") && reason.contains("phase request"), "\(reason)")
        #expect(appends == 0)
    }

    @Test func `the create result's newest fields are read`() async throws {
        let rig = try await RelayRig.make()
        let result = try await rig.session.request("talk.session.create", params: try JSONValue(encoding: TalkSessionCreateParams(sessionKey: nil)),
                                                   timeoutMs: 5_000)
        await rig.shutdown()
        let info = try #require(TalkSessionInfo(payload: result))
        #expect(info.transcriptionSessionId == info.sessionId)
        #expect(info.provider == "loopback")
        #expect(info.expiresAt?.intValue ?? 0 > Int64(Date().timeIntervalSince1970 * 1000))
        #expect(result["transport"] == "gateway-relay" && result["brain"] == "none")
    }
}

@Suite struct SystemNotifyParsingTests {
    @Test func `title and body are trimmed and an empty pair is INVALID_REQUEST: empty notification`() throws {
        let r = try SystemNotifyRequest.parse(["title": "  Dinner ", "body": "\tIt is on the table.\n"], enabled: true)
        #expect(r.title == "Dinner" && r.body == "It is on the table." && r.parts == ["Dinner", "It is on the table."])
        #expect(try SystemNotifyRequest.parse(["body": "only a body"], enabled: true).parts == ["only a body"])
        for empty in [[:], ["title": "", "body": "  "], ["title": 3, "body": .null]] as [JSONValue] {
            #expect(throws: NodeInvokeError(code: .invalidRequest, message: "empty notification")) {
                try SystemNotifyRequest.parse(empty, enabled: true)
            }
        }
        #expect(NodeInvokeError(code: .invalidRequest, message: "empty notification").description == "INVALID_REQUEST: empty notification")
    }

    @Test func `notifications switched off answer NOTIFICATIONS_DISABLED before anything else`() {
        do {
            _ = try SystemNotifyRequest.parse([:], enabled: false)
            Issue.record("no error")
        } catch {
            #expect(error.code == .notificationsDisabled)
            #expect(error.description.hasPrefix("NOTIFICATIONS_DISABLED: "))
        }
    }

    @Test(arguments: [("passive", NotifyPriority.passive), ("active", .active), ("timeSensitive", .timeSensitive),
                      ("critical", .timeSensitive), ("bogus", .active), ("", .active)])
    func `priority is parsed for the talk core, anything unknown is active`(raw: String, expected: NotifyPriority) throws {
        let r = try SystemNotifyRequest.parse(["title": "t", "priority": .string(raw)], enabled: true)
        #expect(r.priority == expected)
        #expect(r.interrupts == (expected == .timeSensitive))
    }

    @Test func `the result is the Linux node's`() {
        #expect(SystemNotifyRequest.result == ["ok": true])
    }
}

@Suite struct TurnSessionTests {
    @Test func `an invoked turn goes to the gateway-stamped session, else to the current one, else to main`() {
        #expect(TurnSession.resolve(invoke: .value("agent:main:room"), current: "agent:main:desk", main: "agent:main:main") == "agent:main:room")
        #expect(TurnSession.resolve(invoke: .null, current: "agent:main:desk", main: "agent:main:main") == "agent:main:desk")
        #expect(TurnSession.resolve(invoke: .omitted, current: nil, main: "agent:main:main") == "agent:main:main")
        #expect(TurnSession.resolve(invoke: nil, current: nil, main: "agent:main:main") == "agent:main:main")
        #expect(TurnSession.resolve(invoke: .null, current: nil, main: nil) == nil)
        // The nested key never reaches this decision: the decoded request does not carry it.
        let r = NodeInvokeRequest(payload: ["id": "i", "command": "talk.ptt.once", "paramsJSON": #"{"sessionKey":"agent:evil:main"}"#])
        #expect(TurnSession.resolve(invoke: r?.session, current: nil, main: "agent:main:main") == "agent:main:main")
    }
}
