// A whole call on a wss:// gateway (the normal deployment off loopback): both sessions pinned to
// the loopback gateway's self-signed certificate, the offer POSTed over https to its offer route
// (same certificate) and checked against the same pin, media both ways through the aiortc peer.
// A pin that does not match the offer endpoint ends the call before the secret is sent.

import ClawvoiceTesting
import Foundation
import GatewayProtocol
import LoopbackGateway
import Testing
import WebSocketTransport
@testable import Realtime

/// A throwaway certificate for the gateway: (cert path, key path, sha256 pin, dir to remove).
func gatewayCertificate() throws -> (cert: String, key: String, pin: String, dir: String) {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cv-calltls-\(UUID().uuidString.prefix(8))").path
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    let cert = dir + "/gateway.pem", key = dir + "/gateway.key"
    try SelfSignedCertificate.generate(commonName: "127.0.0.1", certPath: cert, keyPath: key)
    return (cert, key, try TLSCertificateFingerprint.sha256Hex(pemFile: cert), dir)
}

@Suite(.serialized) struct CallOverTLSTests {
    @Test(.timeLimit(.minutes(2)))
    func aCallOnAWssGatewayPostsItsOfferOverHTTPSWithTheGatewaysPin() async throws {
        let tls = try gatewayCertificate()
        defer { try? FileManager.default.removeItem(atPath: tls.dir) }
        let peer = try AiortcPeer(showLog: true)
        defer { peer.stop() }
        let rig = try await CallRig(calls: .gatewayControl, tlsPin: tls.pin) { c in
            c.tlsCertificatePath = tls.cert
            c.tlsKeyPath = tls.key
        }
        #expect(await rig.gateway.url.hasPrefix("wss://"))
        let origin = try #require(await rig.gateway.callOfferOrigin)
        #expect(origin.hasPrefix("https://127.0.0.1:"), "\(origin)")
        await rig.gateway.setCallMediaEnd { offer in
            try await OfferExchange.post(origin: peer.origin, path: "/talk/offer", secret: peer.secret, offer: offer)
        }
        #expect(try await rig.invoke("talk.start").payload == ["started": true])
        try await waitFor("the call to connect", seconds: 30) { await rig.service.status.phase == "connected" }
        #expect(await rig.service.status.path == "webrtc")
        let record = try #require(await rig.gateway.callRecords.first)
        #expect(record.secretUsed && record.offersPosted == 1, "the offer came over https: \(record.offersPosted)")

        // Media both ways: the peer's audio reaches us, and an utterance of ours reaches the peer.
        try await waitFor("the peer's audio", seconds: 5) { await rig.played.totalMs > 200 }
        let rate = CallRig.rate
        let utterance = speechLike(ms: 600, rate: rate) + [Int16](repeating: 0, count: rate)
        var next = ContinuousClock.now
        for i in stride(from: 0, to: utterance.count, by: rate / 50) {
            await rig.service.capture(Array(utterance[i..<min(i + rate / 50, utterance.count)]))
            next += .milliseconds(20)
            try await Task.sleep(until: next)
        }
        // The peer may still be working through a backlog: wait for it, up to 5 s.
        let stats = try #require(await peer.stats(within: 5) { ($0["heardVoiceMs"]?.intValue ?? 0) >= 300 })
        #expect((stats["heardVoiceMs"]?.intValue ?? 0) >= 300, "the peer heard \(stats)")

        #expect(try await rig.invoke("talk.stop").payload == ["stopped": true])
        try await waitFor("idle", seconds: 5) { await rig.service.status.phase == "idle" }
        #expect(await rig.service.status.lastEnd?.cause == "talk.stop")
        try await waitFor("the gateway's session closed", seconds: 5) { await rig.gateway.callRecords.first?.closed == true }
        await rig.stop()
    }

    @Test(.timeLimit(.minutes(1)))
    func anOfferEndpointThatFailsThePinEndsTheCallBeforeTheSecretIsSent() async throws {
        let tls = try gatewayCertificate()
        defer { try? FileManager.default.removeItem(atPath: tls.dir) }
        let wrong = String(repeating: "5a", count: 32)
        let rig = try await CallRig(calls: .gatewayControl, tlsPin: tls.pin, offerPin: .some(wrong)) { c in
            c.tlsCertificatePath = tls.cert
            c.tlsKeyPath = tls.key
        }
        #expect(try await rig.invoke("talk.start").payload == ["started": true])
        try await waitFor("the call to end", seconds: 20) { await rig.service.status.lastEnd != nil }
        let end = try #require(await rig.service.status.lastEnd)
        #expect(end.cause == "link-failed", "\(end)")
        #expect(end.detail?.contains("pin mismatch: expected sha256 \(wrong), it presented \(tls.pin)") == true, "\(end)")
        let record = try #require(await rig.gateway.callRecords.first)
        #expect(!record.secretUsed && record.offersPosted == 0, "nothing reached the offer route")
        try await waitFor("the gateway's session closed", seconds: 5) { await rig.gateway.callRecords.first?.closed == true }
        await rig.stop()
    }
}
