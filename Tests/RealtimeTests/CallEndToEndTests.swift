// Whole calls through the real parts (issue 23): the loopback gateway (talk.client.create with the
// exact D1 result, its offer route checking the single-use secret, talk.client.close), real
// gateway sessions for both roles, CallService carrying out CallMachine's actions, and the aiortc
// peer as the gateway's media end. The gateway invokes talk.start on the node, the node creates
// the call, media flows both ways, talk.stop ends it with both keys closed.

import ClawvoiceCore
import ClawvoiceTesting
import Synchronization
import Foundation
import GatewayClient
import GatewayProtocol
import LoopbackGateway
import Store
import Testing
@testable import Realtime

/// A paired node + operator on a loopback gateway with calls on, and a CallService wired to them.
final class CallRig: @unchecked Sendable {
    let dir: String
    let store: ClawStore
    let gateway: LoopbackGateway
    let node: GatewaySession
    let op: GatewaySession
    let service: CallService
    let played = Received()
    let events = Mutex_<[CallEvent]>([])
    let runTask: Task<Void, Never>
    static let rate = 16_000

    /// `tlsPin`: the sessions' pin of a TLS gateway; `offerPin` (default: the sessions' pin) is
    /// what the offer POST checks, as the daemon's edge does.
    init(calls: LoopbackGateway.CallsMode, settings: CallMachine.Settings = CallService.defaultSettings, tlsPin: String? = nil,
         offerPin: String?? = nil, configure: (inout LoopbackGateway.Configuration) -> Void = { _ in }) async throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("cv-call-\(UUID().uuidString.prefix(8))").path
        store = try ClawStore(directory: dir)
        let (identity, instance) = try store.loadOrCreateIdentity()
        var c = LoopbackGateway.Configuration()
        c.auth = .token("shared-t")
        c.autoApprove = true
        c.tickIntervalMs = 1_000
        c.calls = calls
        configure(&c)
        let g = LoopbackGateway(configuration: c)
        try await g.start()
        gateway = g
        let url = await g.url
        try store.upsertGateway(GatewayRecord(name: "lb", url: url, sharedToken: "shared-t", isActive: true,
                                              addedAtMs: Int64(Date().timeIntervalSince1970 * 1000)))
        var options = SessionOptions(displayName: "call test node", version: "0.1.0-test")
        options.timing.backoffBaseMs = 50
        options.timing.backoffMaxMs = 400
        options.timing.pairingPollFastMs = 100
        let registry = NodeCommandRegistry()
        let serviceBox = Mutex_<CallService?>(nil)
        let sink = LogSink(minimum: .warning) { _, _, _ in }
        op = GatewaySession(role: .operator, endpoint: GatewayEndpoint(name: "lb", url: url, tlsFingerprint: tlsPin), credentials: GatewayCredentials(sharedToken: "shared-t"),
                            identity: identity, instanceId: instance, store: store, options: options, log: sink,
                            onEvent: { frame in
                                guard frame.event == "talk.event", let s = serviceBox.value else { return }
                                Task { await s.talkEvent(frame.payload) }
                            })
        node = GatewaySession(role: .node, endpoint: GatewayEndpoint(name: "lb", url: url, tlsFingerprint: tlsPin), credentials: GatewayCredentials(sharedToken: "shared-t"),
                              identity: identity, instanceId: instance, store: store, options: options, commands: registry, log: sink)
        let op = self.op, played = self.played, events = self.events
        service = CallService(sampleRate: Self.rate, settings: settings, localAddress: "127.0.0.1", edges: CallService.Edges(
            request: { method, params in try await op.request(method, params: params) },
            resolveTarget: {
                guard let t = await op.talkTarget()?.target else { return .failure(.init(code: "NO_TARGET", message: "no talk target")) }
                return .success(CallMachine.Target(sessionKey: t.sessionKey, agentId: t.gatewayTakesAgentId ? t.agentId : nil))
            },
            httpOrigin: { await g.callOfferOrigin },
            play: { chunk in Task { await played.add(chunk, rate: CallRig.rate) } },
            event: { e in events.append(e) },
            offerTLSPin: {
                if let offerPin { return offerPin }
                return await g.callOfferOrigin.flatMap { OfferExchange.tlsPin(origin: $0, gatewayURL: url, gatewayPin: tlsPin) }
            }))
        serviceBox.set(service)
        let service = self.service
        CallCommands.register(on: registry, start: { await service.start(origin: .invoke) }, stop: { await service.stop(cause: .talkStop) })
        runTask = Task { await service.run() }
        await op.start()
        await node.start()
        try await waitFor("both roles connected", seconds: 20) { let a = await op.isConnected; let b = await node.isConnected; return a && b }
        try await waitFor("the talk target resolved", seconds: 5) { await op.talkTarget() != nil }
        let methods = await op.currentHello()?.methods ?? []
        let catalog = try? await op.request("talk.catalog", params: [:])
        await service.offer(CallOffer(webrtc: methods.contains("talk.client.create"), relay: CallOffer.relayOffered(catalog: catalog)))
        await service.operatorState(connected: true, incarnation: 1)
    }

    func invoke(_ command: String) async throws -> NodeInvokeResult {
        try await gateway.invoke(command: command, paramsJSON: "{}")
    }

    func stop() async {
        runTask.cancel()
        await node.stop()
        await op.stop()
        await gateway.stop()
        try? FileManager.default.removeItem(atPath: dir)
    }
}

@Suite(.serialized) struct CallEndToEndTests {
    @Test(.timeLimit(.minutes(2)))
    func talkStartByTheGatewayMediaBothWaysTalkStopEnds() async throws {
        let peer = try AiortcPeer(showLog: true)
        defer { peer.stop() }
        let rig = try await CallRig(calls: .gatewayControl)
        await rig.gateway.setCallMediaEnd { offer in
            try await OfferExchange.post(origin: peer.origin, path: "/talk/offer", secret: peer.secret, offer: offer)
        }
        let start = try await rig.invoke("talk.start")
        #expect(start.ok && start.payload == ["started": true], "talk.start: \(start)")
        let again = try await rig.invoke("talk.start")
        #expect(again.payload == ["started": false, "alreadyActive": true])
        try await waitFor("the call to connect", seconds: 30) { await rig.service.status.phase == "connected" }
        let status = await rig.service.status
        #expect(status.path == "webrtc" && status.sessionKey == "agent:main:main", "\(status)")

        // The gateway saw the exact create (D1) with the resolved, frozen key, and one offer with its secret.
        let record = try #require(await rig.gateway.callRecords.first)
        #expect(record.params["capabilities"] == ["gateway-control-v1"])
        #expect(record.params["sessionKey"] == "agent:main:main" && record.params["mode"] == "realtime" && record.params["brain"] == "agent-consult")
        #expect(record.secretUsed && record.offersPosted == 1)

        // Wait for the peer's media (its SRTP is up), then one 800 ms utterance from the microphone side.
        try await waitFor("the peer's audio", seconds: 5) { await rig.played.totalMs > 200 }
        let rate = CallRig.rate
        let utterance = speechLike(ms: 800, rate: rate) + [Int16](repeating: 0, count: rate * 2)
        let clock = ContinuousClock()
        var next = clock.now
        let mediaStart = clock.now, cpuStart = processCPUSeconds()
        for i in stride(from: 0, to: utterance.count, by: rate / 50) {
            await rig.service.capture(Array(utterance[i..<min(i + rate / 50, utterance.count)]))
            next += .milliseconds(20)
            try await Task.sleep(until: next)
        }
        let cpu = (processCPUSeconds() - cpuStart) / (clock.now - mediaStart).seconds
        let replyAfter = await rig.played.firstVoiceAt.map { ($0 - (mediaStart + .milliseconds(800))).seconds * 1000 }
        print("call over the loopback gateway (CallService, debug build): \(String(format: "%.1f", cpu * 100)) % of one core for this process (the gateway included) over \(String(format: "%.1f", (clock.now - mediaStart).seconds)) s of two-way media; "
              + "first answer audio \(replyAfter.map { String(format: "%.0f", $0) } ?? "-") ms after the utterance ended (the peer's 400 ms endpoint included)")
        // The peer may still be working through a backlog: wait for it, up to 5 s.
        let stats = try #require(await peer.stats(within: 5) { ($0["heardVoiceMs"]?.intValue ?? 0) >= 400 && ($0["playedMs"]?.intValue ?? 0) >= 400 })
        #expect((stats["heardVoiceMs"]?.intValue ?? 0) >= 400, "the peer heard \(stats)")
        #expect((stats["playedMs"]?.intValue ?? 0) >= 400, "the peer played \(stats)")
        let voice = await rig.played.voiceMs
        #expect(voice >= 300, "the speaker side got \(voice) ms of voice")

        // talk.stop: {"stopped":true}, the media stops, talk.client.close carries both keys.
        let stop = try await rig.invoke("talk.stop")
        #expect(stop.payload == ["stopped": true])
        try await waitFor("the gateway's session closed", seconds: 5) { await rig.gateway.callRecords.first?.closed == true }
        let closed = try #require(await rig.gateway.callRecords.first)
        #expect(closed.closeParams == ["sessionKey": "agent:main:main", "voiceSessionId": .string(closed.voiceSessionId)])
        try await waitFor("idle", seconds: 5) { await rig.service.status.phase == "idle" }
        #expect(await rig.service.status.lastEnd?.cause == "talk.stop")
        #expect(rig.events.value.contains { if case .ended(_, .webrtc, .talkStop) = $0 { return true }; return false })
        let order = rig.events.value.map { e -> String in
            switch e { case .dialing: "dialing"; case .started: "started"; case .ended: "ended"; case .upgradeRequired: "upgrade" }
        }
        #expect(order == ["dialing", "started", "ended"], "\(order)")
        let after = await rig.played.totalMs
        try await Task.sleep(for: .milliseconds(600))
        #expect(await rig.played.totalMs == after, "nothing plays after the end")
        let idle = try await rig.invoke("talk.stop")
        #expect(idle.payload == ["stopped": false])
        await rig.stop()
    }

    @Test(.timeLimit(.minutes(1)))
    func aClientOwnedCreateResultIsUpgradeRequiredAndClosed() async throws {
        let rig = try await CallRig(calls: .clientOwned)
        let start = try await rig.invoke("talk.start")
        #expect(start.payload == ["started": true])
        try await waitFor("the call to end", seconds: 10) { await rig.service.status.lastEnd != nil }
        let status = await rig.service.status
        #expect(status.lastEnd?.cause == "upgrade-required", "\(status)")
        #expect(status.upgradeRequired?.contains("clientControl") == true, "\(status)")
        // The voiceSessionId that came back is closed with both keys (D1, D5); no offer was posted.
        try await waitFor("the returned session closed", seconds: 5) { await rig.gateway.callRecords.first?.closed == true }
        #expect(await rig.gateway.callRecords.first?.offersPosted == 0)
        await rig.stop()
    }

    @Test(.timeLimit(.minutes(1)))
    func theGatewaysSessionClosedEndsTheCall() async throws {
        let peer = try AiortcPeer(showLog: true)
        defer { peer.stop() }
        let rig = try await CallRig(calls: .gatewayControl)
        await rig.gateway.setCallMediaEnd { offer in
            try await OfferExchange.post(origin: peer.origin, path: "/talk/offer", secret: peer.secret, offer: offer)
        }
        #expect(try await rig.invoke("talk.start").payload == ["started": true])
        try await waitFor("the call to connect", seconds: 30) { await rig.service.status.phase == "connected" }
        let id = try #require(await rig.gateway.callRecords.first?.voiceSessionId)
        await rig.gateway.closeCallFromGateway(voiceSessionId: "voice-other")
        try await Task.sleep(for: .milliseconds(300))
        #expect(await rig.service.status.phase == "connected", "a session.closed for another call changes nothing")
        await rig.gateway.closeCallFromGateway(voiceSessionId: id)
        try await waitFor("idle", seconds: 5) { await rig.service.status.phase == "idle" }
        #expect(await rig.service.status.lastEnd?.cause == "session-closed")
        await rig.stop()
    }

    @Test(.timeLimit(.minutes(1)))
    func theOfferRouteTakesEachSecretOnce() async throws {
        let rig = try await CallRig(calls: .gatewayControl)
        await rig.gateway.setCallMediaEnd { _ in "v=0\r\n" }
        let result = try await rig.op.request("talk.client.create", params: CallCreateResult.params(sessionKey: "agent:main:main"))
        let grant = try CallCreateResult.validate(result).get()
        let origin = try #require(await rig.gateway.callOfferOrigin)
        let offer = "v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n"
        await #expect(throws: WebRTCError.self) {
            _ = try await OfferExchange.post(origin: origin, path: grant.offerPath, secret: "wrong", offer: offer)
        }
        let answer = try await OfferExchange.post(origin: origin, path: grant.offerPath, secret: grant.clientSecret, offer: offer)
        #expect(answer.hasPrefix("v=0"))
        do {
            _ = try await OfferExchange.post(origin: origin, path: grant.offerPath, secret: grant.clientSecret, offer: offer)
            Issue.record("a used secret was taken again")
        } catch let e as WebRTCError {
            #expect(e.message.contains("HTTP 401"), "\(e)")
        }
        await rig.stop()
    }

    /// Speaks one 800 ms utterance into the call, then 2 s of quiet, paced at 20 ms.
    func speak(into rig: CallRig) async throws {
        let rate = CallRig.rate
        let utterance = speechLike(ms: 800, rate: rate) + [Int16](repeating: 0, count: rate * 2)
        var next = ContinuousClock.now
        for i in stride(from: 0, to: utterance.count, by: rate / 50) {
            await rig.service.capture(Array(utterance[i..<min(i + rate / 50, utterance.count)]))
            next += .milliseconds(20)
            try await Task.sleep(until: next)
        }
    }

    @Test(.timeLimit(.minutes(1)))
    func aRelayOnlyGatewayCarriesTheCallOverTheRelay() async throws {
        let rig = try await CallRig(calls: .disabled) { $0.realtimeRelay = true }
        #expect(try await rig.invoke("talk.start").payload == ["started": true])
        try await waitFor("the relay call to connect", seconds: 10) { await rig.service.status.phase == "connected" }
        #expect(await rig.service.status.path == "relay")
        try await speak(into: rig)
        let r = try #require(await rig.gateway.realtimeRelayRecords.first)
        #expect(r.sessionKey == "agent:main:main")
        #expect(r.heardVoiceMs >= 600 && r.utterances == 1, "the relay heard \(r.heardVoiceMs) ms of voice, \(r.utterances) utterances")
        let voice = await rig.played.voiceMs
        #expect(voice >= 500, "the speaker side got \(voice) ms of the relay's answer")
        #expect(try await rig.invoke("talk.stop").payload == ["stopped": true])
        try await waitFor("the relay session closed", seconds: 5) { await rig.gateway.realtimeRelayRecords.first?.closed == true }
        #expect(await rig.service.status.lastEnd?.cause == "talk.stop" && rig.events.value.contains { if case .ended(_, .relay, .talkStop) = $0 { return true }; return false })
        await rig.stop()
    }

    @Test(.timeLimit(.minutes(1)))
    func webRTCFailingBeforeItConnectsFallsBackToTheRelay() async throws {
        let rig = try await CallRig(calls: .gatewayControl) { $0.realtimeRelay = true }
        await rig.gateway.setCallMediaEnd { _ in throw WebRTCError("no provider behind the broker") }
        #expect(try await rig.invoke("talk.start").payload == ["started": true])
        try await waitFor("the call to connect", seconds: 20) { await rig.service.status.phase == "connected" }
        let status = await rig.service.status
        #expect(status.path == "relay" && status.upgradeRequired == nil, "\(status)")
        // The WebRTC session that failed is closed with both keys; the relay holds the call.
        try await waitFor("the WebRTC session closed", seconds: 5) { await rig.gateway.callRecords.first?.closed == true }
        #expect(await rig.gateway.callRecords.first?.offersPosted == 1)
        await rig.gateway.closeRealtimeRelayFromGateway(sessionId: try #require(await rig.gateway.realtimeRelayRecords.first?.sessionId))
        try await waitFor("idle", seconds: 5) { await rig.service.status.phase == "idle" }
        #expect(await rig.service.status.lastEnd?.cause == "session-closed")
        await rig.stop()
    }

    @Test(.timeLimit(.minutes(1)))
    func talkingOverTheRelaysAnswerCancelsItsTurn() async throws {
        let rig = try await CallRig(calls: .disabled) { $0.realtimeRelay = true }
        #expect(try await rig.invoke("talk.start").payload == ["started": true])
        try await waitFor("the relay call to connect", seconds: 10) { await rig.service.status.phase == "connected" }
        let rate = CallRig.rate, frame = rate / 50
        let utterance = speechLike(ms: 800, rate: rate)
        let quiet = [Int16](repeating: 0, count: frame)
        var next = ContinuousClock.now
        func send(_ f: [Int16]) async throws {
            await rig.service.capture(f)
            next += .milliseconds(20)
            try await Task.sleep(until: next)
        }
        for i in stride(from: 0, to: utterance.count, by: frame) { try await send(Array(utterance[i..<i + frame])) }
        // Quiet until the answer has played for 300 ms, then talk over it for 300 ms.
        var waited = 0
        while await rig.played.voiceMs < 300, waited < 150 { try await send(quiet); waited += 1 }
        for i in stride(from: 0, to: rate * 3 / 10, by: frame) { try await send(Array(utterance[i..<i + frame])) }
        for _ in 0..<50 { try await send(quiet) }
        let r = try #require(await rig.gateway.realtimeRelayRecords.first)
        #expect(r.cancels == ["turn-1"], "cancelOutput named the answer's turn: \(r.cancels)")
        #expect(r.playedMs < 700, "the answer stopped early at the gateway: \(r.playedMs) ms of 800")
        let voice = await rig.played.voiceMs
        #expect(voice < 700, "the speaker side got \(voice) ms of an 800 ms answer")
        #expect(await rig.service.status.bargeIns == 1)
        await rig.stop()
    }

    @Test(.timeLimit(.minutes(1)))
    func aGatewayTooOldForTheCapabilityOrWithoutGatewayControlEndsTheCallVisibly() async throws {
        // D4: a closed schema refuses `capabilities`: upgrade required, nothing retried without it.
        let old = try await CallRig(calls: .tooOld)
        #expect(try await old.invoke("talk.start").payload == ["started": true])
        try await waitFor("the call to end", seconds: 10) { await old.service.status.lastEnd != nil }
        let s = await old.service.status
        #expect(s.lastEnd?.cause == "upgrade-required" && s.upgradeRequired?.contains("unexpected property 'capabilities'") == true, "\(s)")
        #expect(await old.gateway.callRecords.isEmpty, "no create without the capability was sent")
        await old.stop()
        // D6: the provider's authentication cannot do gateway control: UNAVAILABLE, said as it came.
        let oauth = try await CallRig(calls: .unavailable)
        #expect(try await oauth.invoke("talk.start").payload == ["started": true])
        try await waitFor("the call to end", seconds: 10) { await oauth.service.status.lastEnd != nil }
        let u = await oauth.service.status
        #expect(u.lastEnd?.cause == "unavailable" && u.lastEnd?.detail?.contains("does not support gateway-control-v1") == true, "\(u)")
        await oauth.stop()
    }

    @Test(.timeLimit(.minutes(1)))
    func aCallWithoutSpeechEndsOnTheIdleTimer() async throws {
        let peer = try AiortcPeer(showLog: true)
        defer { peer.stop() }
        var settings = CallService.defaultSettings
        settings.idleTimeoutMs = 1_500
        let rig = try await CallRig(calls: .gatewayControl, settings: settings)
        await rig.gateway.setCallMediaEnd { offer in
            try await OfferExchange.post(origin: peer.origin, path: "/talk/offer", secret: peer.secret, offer: offer)
        }
        #expect(try await rig.invoke("talk.start").payload == ["started": true])
        try await waitFor("the call to connect", seconds: 30) { await rig.service.status.phase == "connected" }
        let connectedAt = ContinuousClock.now
        // The peer's silence keeps the media flowing but is no speech: the idle timer ends the call.
        try await waitFor("the idle end", seconds: 5) { await rig.service.status.lastEnd != nil }
        let after = ContinuousClock.now - connectedAt
        #expect(await rig.service.status.lastEnd?.cause == "idle")
        #expect(after >= .milliseconds(1_300), "not before the idle time: \(after)")
        try await waitFor("the gateway's session closed", seconds: 5) { await rig.gateway.callRecords.first?.closed == true }
        await rig.stop()
    }
}
