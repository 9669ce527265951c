// Pairing and credentials against the loopback gateway over real sockets.

import Foundation
import GatewayClient
import GatewayCrypto
import GatewayProtocol
import LoopbackGateway
import Store
import Testing
import WebSocketTransport

@Suite struct PairingIntegrationTests {
    @Test func `first pairing waits for approval then reconnects with the stored token`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway()
        let url = await g.url
        try h.addGateway(url, token: "shared-t")
        let node = h.session(.node, url: url, credentials: GatewayCredentials(sharedToken: "shared-t"))
        await node.start()
        #expect(await eventually("a pending pairing request") { await !g.pendingPairings().isEmpty })
        let pendings = await g.pendingPairings()
        #expect(pendings.count == 1)
        let request = try #require(pendings.first)
        #expect(request.role == "node")
        #expect(await eventually("pairing status with the request id") {
            let s = await node.currentStatus()
            return s.state == .pairing && s.requestId == request.requestId
        })
        let status = await node.currentStatus()
        #expect(status.nextStep == "on the gateway host run: openclaw devices approve \(request.requestId)")
        // Retries reuse the same request: one request id however long we wait.
        try await Task.sleep(for: .milliseconds(400))
        #expect(await g.pendingPairings().map(\.requestId) == [request.requestId])
        #expect(h.log.all.filter { $0.contains("pairing required") }.count == 1, "the request id is shown once, then retries are quiet")

        #expect(await g.approve(request.requestId))
        #expect(await eventually("node connected after approval") { await node.isConnected })
        let token = try #require(try h.store.token(gateway: "lb", role: "node"))
        #expect(token.token.hasPrefix("dt_node_"))
        await node.stop()

        // Next run: no shared token at all; the stored device token carries the connect.
        let again = h.session(.node, url: url, credentials: GatewayCredentials())
        await again.start()
        #expect(await eventually("reconnect with stored token") { await again.isConnected })
        await again.stop()
        await g.stop()
    }

    @Test func `operator role is paired separately with its scopes`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway()
        let url = await g.url
        try h.addGateway(url, token: "shared-t")
        let op = h.session(.operator, url: url, credentials: GatewayCredentials(sharedToken: "shared-t"))
        await op.start()
        #expect(await eventually("operator pairing request") { await g.pendingPairings().first?.role == "operator" })
        let req = try #require(await g.pendingPairings().first)
        #expect(req.scopes == ["operator.read", "operator.write", "operator.talk"])
        _ = await g.approve(req.requestId)
        #expect(await eventually("operator connected") { await op.isConnected })
        let history = try await op.request("chat.history", params: ["sessionKey": "agent:main:main"])
        #expect(history["messages"]?.arrayValue != nil)
        await op.stop()
        await g.stop()
    }

    @Test func `a revoked device token is deleted and the shared token takes over`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true }
        let url = await g.url
        try h.addGateway(url, token: "shared-t")
        // First connect with the shared token to get a device token, then run on the device token alone.
        let first = h.session(.node, url: url, credentials: GatewayCredentials(sharedToken: "shared-t"))
        await first.start()
        #expect(await eventually("connected") { await first.isConnected })
        await first.stop()
        let old = try #require(try h.store.token(gateway: "lb", role: "node"))
        await g.revokeToken(deviceId: h.identity.deviceId, role: "node")

        let node = h.session(.node, url: url, credentials: GatewayCredentials())
        await node.start()
        #expect(await eventually("stored token deleted") { (try? h.store.token(gateway: "lb", role: "node")) == nil })
        #expect(h.log.contains("rejected the stored device token"))
        // With neither token nor shared secret the gateway says what is missing, and the loop pauses.
        #expect(await eventually("paused for a missing token") { await node.currentStatus().state == .paused })
        #expect(await node.currentStatus().detail == "the gateway requires a token")
        await node.stop()

        let recovered = h.session(.node, url: url, credentials: GatewayCredentials(sharedToken: "shared-t"))
        await recovered.start()
        #expect(await eventually("connected with the shared token") { await recovered.isConnected })
        let fresh = try #require(try h.store.token(gateway: "lb", role: "node"))
        #expect(fresh.token != old.token)
        await recovered.stop()
        await g.stop()
    }

    @Test func `a wrong shared token stops the retry loop with one line saying what to fix`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway()
        let url = await g.url
        try h.addGateway(url, token: "wrong")
        let node = h.session(.node, url: url, credentials: GatewayCredentials(sharedToken: "wrong"))
        await node.start()
        #expect(await eventually("paused") { await node.currentStatus().state == .paused })
        let s = await node.currentStatus()
        #expect(s.detail == "the gateway rejected the shared token")
        #expect(s.nextStep?.contains("CLAWVOICE_GATEWAY_TOKEN") == true)
        #expect(!(s.detail + (s.nextStep ?? "")).contains("\n"))
        let connections = await g.connectionCount()
        try await Task.sleep(for: .milliseconds(300))
        #expect(await g.connectionCount() <= connections, "no more attempts after the pause")
        await node.stop()
        await g.stop()
    }

    @Test func `a gateway that verifies only v2 signatures gets a v2 retry`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true; $0.legacySignaturesOnly = true }
        let url = await g.url
        try h.addGateway(url, token: "shared-t")
        let node = h.session(.node, url: url, credentials: GatewayCredentials(sharedToken: "shared-t"))
        await node.start()
        #expect(await eventually("connected with v2") { await node.isConnected })
        #expect(h.log.contains("retrying with v2"))
        await node.stop()
        await g.stop()
    }

    @Test func `a setup code pairs the node and hands over the operator token`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway()
        let code = await g.makeSetupCode()
        let setup = try SetupCode.parse(code, nowMs: Int64(Date().timeIntervalSince1970 * 1000))
        try h.addGateway(setup.url, bootstrap: setup.bootstrapToken)
        let creds = GatewayCredentials(bootstrapToken: setup.bootstrapToken)
        let node = h.session(.node, url: setup.url, credentials: creds)
        let op = h.session(.operator, url: setup.url, credentials: creds)
        await op.start()
        await node.start()
        #expect(await eventually("both connected") {
            let a = await node.isConnected
            let b = await op.isConnected
            return a && b
        })
        #expect(try h.store.token(gateway: "lb", role: "node") != nil)
        #expect(try h.store.token(gateway: "lb", role: "operator")?.scopes.contains("operator.write") == true)
        #expect(try h.store.gateway(named: "lb")?.bootstrapToken == nil, "the bootstrap token is erased once a device token exists")
        #expect(await g.pendingPairings().isEmpty)
        await node.stop()
        await op.stop()
        await g.stop()
    }

    // Issue 24: a setup code whose pairing hands over no operator token left the operator
    // "waiting for the node session to finish pairing" forever. Now it pauses saying what to do.
    @Test func `a setup code without an operator part pairs the node and pauses the operator saying what is missing`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.bootstrapHandsOverOperator = false }
        let code = await g.makeSetupCode()
        let setup = try SetupCode.parse(code, nowMs: Int64(Date().timeIntervalSince1970 * 1000))
        try h.addGateway(setup.url, bootstrap: setup.bootstrapToken)
        let creds = GatewayCredentials(bootstrapToken: setup.bootstrapToken)
        let node = h.session(.node, url: setup.url, credentials: creds)
        let op = h.session(.operator, url: setup.url, credentials: creds)
        await op.start()
        await node.start()
        #expect(await eventually("node connected, operator paused") {
            let a = await node.isConnected
            let b = await op.currentStatus().state == .paused
            return a && b
        })
        let st = await op.currentStatus()
        #expect(st.detail.contains("no operator token"), "\(st)")
        #expect(st.nextStep?.contains("clawvoice pair --url \(setup.url) --token-file FILE") == true, "\(st)")
        #expect(try h.store.token(gateway: "lb", role: "node") != nil)
        #expect(try h.store.token(gateway: "lb", role: "operator") == nil)
        await node.stop()
        await op.stop()
        await g.stop()
    }

    @Test func `a pinned TLS gateway connects and a wrong pin is refused showing both fingerprints`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let cert = h.dir + "/cert.pem", key = h.dir + "/key.pem"
        try SelfSignedCertificate.generate(commonName: "127.0.0.1", certPath: cert, keyPath: key)
        let pin = try TLSCertificateFingerprint.sha256Hex(pemFile: cert)
        let g = try await gateway { $0.autoApprove = true; $0.tlsCertificatePath = cert; $0.tlsKeyPath = key }
        let url = await g.url
        #expect(url.hasPrefix("wss://"))
        try h.addGateway(url, token: "shared-t", pin: pin)
        let node = h.session(.node, url: url, credentials: GatewayCredentials(sharedToken: "shared-t"), pin: pin)
        await node.start()
        #expect(await eventually("connected over pinned TLS") { await node.isConnected })
        await node.stop()

        let wrong = String(repeating: "ab", count: 32)
        try h.addGateway(url, name: "lb2", token: "shared-t", pin: wrong)
        let bad = h.session(.node, url: url, name: "lb2", credentials: GatewayCredentials(sharedToken: "shared-t"), pin: wrong)
        await bad.start()
        #expect(await eventually("paused on pin mismatch") { await bad.currentStatus().state == .paused })
        let detail = await bad.currentStatus().detail
        #expect(detail.contains(wrong) && detail.contains(pin))
        await bad.stop()
        await g.stop()
    }

    @Test func `a starting gateway is retried after its retryAfterMs`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true }
        await g.simulateStartup(connects: 2, retryAfterMs: 150)
        let url = await g.url
        try h.addGateway(url, token: "shared-t")
        let node = h.session(.node, url: url, credentials: GatewayCredentials(sharedToken: "shared-t"))
        await node.start()
        #expect(await eventually("connected once started") { await node.isConnected })
        #expect(h.log.all.filter { $0.contains("gateway starting") && $0.contains("retrying in 0.1") }.count == 2)
        await node.stop()
        await g.stop()
    }

    @Test func `password gateways accept the password and name a wrong one`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true; $0.auth = .password("hunter2") }
        let url = await g.url
        try h.addGateway(url, password: "hunter2")
        let node = h.session(.node, url: url, credentials: GatewayCredentials(password: "hunter2"))
        await node.start()
        #expect(await eventually("connected with password") { await node.isConnected })
        await node.stop()
        try h.addGateway(url, name: "lb2", password: "nope")
        let bad = h.session(.node, url: url, name: "lb2", credentials: GatewayCredentials(password: "nope"))
        await bad.start()
        #expect(await eventually("paused") { await bad.currentStatus().state == .paused })
        #expect(await bad.currentStatus().detail.contains("AUTH_PASSWORD_MISMATCH"))
        await bad.stop()
        await g.stop()
    }
}
