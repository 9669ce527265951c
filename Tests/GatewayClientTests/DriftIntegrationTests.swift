// The December 2026 protocol drift against the loopback gateway (issue 12): sessionKey on
// node.invoke.request in all three forms, unknown top-level keys on frames, the released-v3
// protocol fallback and the cases where it must not happen, the device token in auth.deviceToken
// (and the loopback taking it in either slot), and revocation that really stops the node.

import Foundation
import GatewayClient
import GatewayCrypto
import GatewayProtocol
import LoopbackGateway
import Store
import Testing
import WebSocketTransport

/// Records what each invoke carried, for the sessionKey tests.
final class InvokeLog: Sendable {
    private let items = Locked<[NodeInvokeRequest]>([])
    var all: [NodeInvokeRequest] { items.withLock { $0 } }
    func add(_ r: NodeInvokeRequest) { items.withLock { $0.append(r) } }
}

private func connectParams(_ attempt: LoopbackGateway.ConnectAttempt) -> (min: Int64?, max: Int64?, auth: JSONValue?, signature: String?) {
    (attempt.params["minProtocol"]?.intValue, attempt.params["maxProtocol"]?.intValue, attempt.params["auth"],
     attempt.params["device"]?["signature"]?.stringValue)
}

@Suite struct DriftIntegrationTests {
    func connectedNode(_ h: Harness, _ g: LoopbackGateway, commands: NodeCommandRegistry? = nil) async throws -> GatewaySession {
        let url = await g.url
        try h.addGateway(url, token: "shared-t")
        let node = h.session(.node, url: url, credentials: GatewayCredentials(sharedToken: "shared-t"), commands: commands)
        await node.start()
        #expect(await eventually("node connected") { await node.isConnected })
        return node
    }

    // MARK: item 1 and 2

    @Test func `the invoke's top-level sessionKey reaches the command in all three forms, never the nested one`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        // Every event also carries keys this client does not know (item 2).
        let g = try await gateway {
            $0.autoApprove = true
            $0.extraEventKeys = ["recipientProfileId": "profile-1", "stateVersion": ["presence": 9]]
        }
        let seen = InvokeLog()
        let registry = NodeCommandRegistry()
        registry.register("probe.session") { request, params in
            seen.add(request)
            return ["session": request.sessionKey.map { .string($0) } ?? .null, "nested": params["sessionKey"] ?? .null]
        }
        let node = try await connectedNode(h, g, commands: registry)
        let forms: [(LoopbackGateway.InvokeSessionKeyForm, InvokeSessionKey)] = [
            (.mainSession, .value("agent:main:main")), (.key("agent:main:kitchen"), .value("agent:main:kitchen")),
            (.null, .null), (.omitted, .omitted),
        ]
        for (form, expected) in forms {
            let r = try await g.invoke(command: "probe.session", paramsJSON: #"{"sessionKey":"agent:evil:main"}"#, sessionKey: form)
            #expect(r.ok, "\(String(describing: r.error))")
            #expect(seen.all.last?.session == expected, "\(form)")
            #expect(r.payload?["session"] == (expected.key.map { .string($0) } ?? .null),
                    "the nested params sessionKey is not the session")
            #expect(r.payload?["nested"] == "agent:evil:main", "the params themselves are passed through untouched")
        }
        #expect(seen.all.count == 4)
        // Events with unknown top-level keys still flow: tick keeps the session alive, voicewake arrives.
        // Two and a half tick intervals (the harness's 1 s): the link lives on the ticks alone.
        let connectedCount = h.statuses.count(.connected, role: "node")
        try await Task.sleep(for: .milliseconds(2_500))
        let stillUp = await node.isConnected
        #expect(stillUp && h.statuses.count(.connected, role: "node") == connectedCount,
                "ticks with recipientProfileId keep the link up")
        #expect(!h.log.contains("malformed frame"))
        await node.stop()
        await g.stop()
    }

    @Test func `the loopback's default invoke stamps the main session`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true; $0.mainSessionKey = "agent:main:desk" }
        let seen = InvokeLog()
        let registry = NodeCommandRegistry()
        registry.register("probe.session") { request, _ in seen.add(request); return [:] }
        let node = try await connectedNode(h, g, commands: registry)
        _ = try await g.invoke(command: "probe.session")
        #expect(seen.all.first?.sessionKey == "agent:main:desk")
        await node.stop()
        await g.stop()
    }

    // MARK: item 3

    @Test func `a released-v3 gateway that refuses 3…4 gets one retry with 3…3 on a fresh socket`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true; $0.protocolMode = .releasedV3Exact }
        let node = try await connectedNode(h, g)
        #expect(await node.currentHello()?.protocolVersion == 3)
        let attempts = await g.connectAttempts()
        try #require(attempts.count == 2, "\(attempts.map(\.params))")
        let (first, second) = (connectParams(attempts[0]), connectParams(attempts[1]))
        #expect(first.min == 3 && first.max == 4)
        #expect(second.min == 3 && second.max == 3)
        #expect(attempts[0].nonce != attempts[1].nonce && attempts[0].connectionId != attempts[1].connectionId,
                "a new socket and a new challenge")
        #expect(attempts[1].params["device"]?["nonce"]?.stringValue == attempts[1].nonce)
        #expect(first.signature != second.signature, "signed again for the new challenge")
        #expect(attempts[1].params["client"]?["deviceFamily"] == "Linux", "the pinned metadata stays as paired")
        await node.stop()
        await g.stop()
    }

    @Test func `a released-v3 gateway that takes a range containing 3 connects at once`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true; $0.protocolMode = .releasedV3 }
        let node = try await connectedNode(h, g)
        #expect(await node.currentHello()?.protocolVersion == 3)
        let attempts = await g.connectAttempts()
        #expect(attempts.count == 1 && connectParams(attempts[0]).max == 4, "3…4 in one connect: no extra round trip")
        await node.stop()
        await g.stop()
    }

    struct NoRetry: Sendable, CustomTestStringConvertible {
        var name: String
        var error: ErrorShape
        /// What the session's status detail must contain once it settles.
        var paused: String?
        var testDescription: String { name }
    }

    static let noRetry: [NoRetry] = [
        NoRetry(name: "AUTH_TOKEN_MISMATCH naming protocol 3",
                error: ErrorShape(code: "INVALID_REQUEST", message: "rejected", details: ["code": "AUTH_TOKEN_MISMATCH", "expectedProtocol": 3]),
                paused: "the gateway rejected the shared token"),
        NoRetry(name: "PROTOCOL_MISMATCH without a version",
                error: ErrorShape(code: "INVALID_REQUEST", message: "rejected", details: ["code": "PROTOCOL_MISMATCH"]),
                paused: "protocol another version"),
        NoRetry(name: "mismatch expecting 4",
                error: ErrorShape(code: "INVALID_REQUEST", message: "protocol mismatch", details: ["code": "PROTOCOL_MISMATCH", "expectedProtocol": 4]),
                paused: "protocol 4"),
        NoRetry(name: "unrelated rejection naming protocol 3",
                error: ErrorShape(code: "INVALID_REQUEST", message: "unrelated rejection", details: ["expectedProtocol": 3]), paused: nil),
    ]

    @Test(arguments: noRetry)
    func `rejections the official clients do not retry never bring a 3…3 connect`(c: NoRetry) async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true }
        await g.failNextConnects(with: [c.error])
        let url = await g.url
        try h.addGateway(url, token: "shared-t")
        let node = h.session(.node, url: url, credentials: GatewayCredentials(sharedToken: "shared-t"))
        await node.start()
        if let paused = c.paused {
            #expect(await eventually("paused") { await node.currentStatus().state == .paused })
            let detail = await node.currentStatus().detail
            #expect(detail.contains(paused), "\(detail)")
            try await Task.sleep(for: .milliseconds(300))
            #expect(await g.connectAttempts().count == 1, "no retry at all")
        } else {
            // An ordinary rejection: retried with backoff, with the same range (and then accepted).
            #expect(await eventually("connected after the backoff") { await node.isConnected })
        }
        #expect(await g.connectAttempts().allSatisfy { connectParams($0).max == 4 })
        await node.stop()
        await g.stop()
    }

    @Test func `a mismatch after the 3…3 retry is terminal`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true }
        let v3 = ErrorShape(code: "INVALID_REQUEST", message: "protocol mismatch", details: ["expectedProtocol": 3])
        await g.failNextConnects(with: [v3, ErrorShape(code: "INVALID_REQUEST", message: "protocol mismatch",
                                                       details: ["code": "PROTOCOL_MISMATCH", "expectedProtocol": 4])])
        let url = await g.url
        try h.addGateway(url, token: "shared-t")
        let node = h.session(.node, url: url, credentials: GatewayCredentials(sharedToken: "shared-t"))
        await node.start()
        #expect(await eventually("paused") { await node.currentStatus().state == .paused })
        try await Task.sleep(for: .milliseconds(300))
        let attempts = await g.connectAttempts()
        #expect(attempts.map { connectParams($0).max } == [4, 3], "one fallback, no loop")
        #expect(await node.currentStatus().detail.contains("protocol 4"))
        await node.stop()
        await g.stop()
    }

    // MARK: item 4

    /// Pairs both roles with the shared token, then returns fresh sessions built the way `run` builds them.
    func pairBoth(_ h: Harness, _ g: LoopbackGateway, keepSharedSecret: Bool = false) async throws -> (GatewaySession, GatewaySession) {
        let url = await g.url
        try h.addGateway(url, token: "shared-t")
        for role in SessionRole.allCases {
            let s = h.session(role, url: url, credentials: GatewayCredentials(sharedToken: "shared-t"))
            await s.start()
            #expect(await eventually("\(role) paired") { await s.isConnected })
            await s.stop()
        }
        #expect(try h.store.gateway(named: "lb")?.sharedToken == "shared-t", "pairing itself keeps the secret")
        var options = SessionOptions(displayName: "test node", version: "0.1.0-test")
        options.timing = Harness.fastTiming
        options.keepSharedSecret = keepSharedSecret
        let record = try #require(try h.store.gateway(named: "lb"))
        let creds = GatewayCredentials(sharedToken: record.sharedToken, password: record.password)
        func make(_ role: SessionRole) -> GatewaySession {
            GatewaySession(role: role, endpoint: GatewayEndpoint(name: "lb", url: url), credentials: creds, identity: h.identity,
                           instanceId: h.instanceId, store: h.store, options: options,
                           commands: role == .node ? NodeCommandRegistry() : nil, log: h.log.sink, onStatus: h.statuses.callback)
        }
        return (make(.node), make(.operator))
    }

    @Test func `run signs in with auth.deviceToken, forgets the shared secret, and a revoke stops the node`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true }
        let (node, op) = try await pairBoth(h, g)
        let before = await g.connectAttempts().count
        await node.start()
        await op.start()
        #expect(await eventually("both connected on device tokens") { let n = await node.isConnected; let o = await op.isConnected; return n && o })
        let attempts = Array(await g.connectAttempts().dropFirst(before))
        try #require(attempts.count == 2)
        for a in attempts {
            let role = a.params["role"]?.stringValue ?? "?"
            let stored = try #require(try h.store.token(gateway: "lb", role: role))
            #expect(a.params["auth"] == ["deviceToken": .string(stored.token)], "\(role): the device token alone, in its own slot")
        }
        // Both roles are in on their device tokens: the shared secret leaves SQLite.
        #expect(await eventually("shared secret removed") { (try? h.store.gateway(named: "lb"))?.sharedToken == nil })
        #expect(h.log.contains("the shared gateway secret is no longer stored"))

        // Revoking the device's tokens now locks it out for good: no shared secret to fall back on.
        for role in ["node", "operator"] { await g.revokeToken(deviceId: h.identity.deviceId, role: role) }
        await g.dropAll()
        #expect(await eventually("node paused") { await node.currentStatus().state == .paused })
        #expect(await eventually("operator paused") { await op.currentStatus().state == .paused })
        #expect(await node.currentStatus().detail == "the gateway requires a token")
        #expect(await g.connectedRoles().isEmpty)
        let last = try #require(await g.connectAttempts().last)
        #expect(last.params["auth"] == nil, "the last try carried no credential at all")
        await node.stop()
        await op.stop()
        await g.stop()
    }

    @Test func `with keepSharedSecret the secret stays and a revoked node signs in again with it`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true }
        let (node, op) = try await pairBoth(h, g, keepSharedSecret: true)
        await node.start()
        await op.start()
        #expect(await eventually("both connected") { let n = await node.isConnected; let o = await op.isConnected; return n && o })
        try await Task.sleep(for: .milliseconds(200))
        #expect(try h.store.gateway(named: "lb")?.sharedToken == "shared-t")
        let old = try #require(try h.store.token(gateway: "lb", role: "node"))
        await g.revokeToken(deviceId: h.identity.deviceId, role: "node")
        await g.dropAll()
        #expect(await eventually("node back with a fresh token") {
            let up = await node.isConnected
            return up && ((try? h.store.token(gateway: "lb", role: "node"))?.token ?? old.token) != old.token
        })
        let last = try #require(await g.connectAttempts().last(where: { $0.params["role"] == "node" }))
        #expect(last.params["auth"] == ["token": "shared-t"])
        await node.stop()
        await op.stop()
        await g.stop()
    }

    @Test func `the secret stays while the other role has no device token yet`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true }
        let url = await g.url
        try h.addGateway(url, token: "shared-t")
        let first = h.session(.node, url: url, credentials: GatewayCredentials(sharedToken: "shared-t"))
        await first.start()
        #expect(await eventually("node paired") { await first.isConnected })
        await first.stop()
        let again = h.session(.node, url: url, credentials: GatewayCredentials(sharedToken: "shared-t"))
        await again.start()
        #expect(await eventually("node on its device token") { await again.isConnected })
        try await Task.sleep(for: .milliseconds(200))
        #expect(try h.store.gateway(named: "lb")?.sharedToken == "shared-t", "the operator still needs it to pair")
        await again.stop()
        await g.stop()
    }

    @Test(arguments: ["token", "deviceToken"])
    func `the loopback takes a device token in either auth slot, signed over that token`(slot: String) async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true }
        let node = try await connectedNode(h, g)
        await node.stop()
        let token = try #require(try h.store.token(gateway: "lb", role: "node")).token
        let ok = try await RawConnect.connect(url: await g.url, identity: h.identity, auth: [slot: .string(token)])
        #expect(ok.ok, "\(String(describing: ok.error))")
        // The same token with a signature over another token is refused.
        let forged = try await RawConnect.connect(url: await g.url, identity: h.identity, auth: [slot: .string(token)], signedToken: "other")
        #expect(!forged.ok && forged.error?.detailCode == "DEVICE_AUTH_SIGNATURE_INVALID")
        await g.stop()
    }

    @Test func `a pair-time password is forgotten the same way`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true; $0.auth = .password("hunter2") }
        let url = await g.url
        try h.addGateway(url, password: "hunter2")
        for role in SessionRole.allCases {
            let s = h.session(role, url: url, credentials: GatewayCredentials(password: "hunter2"))
            await s.start()
            #expect(await eventually("\(role) paired") { await s.isConnected })
            await s.stop()
        }
        let node = h.session(.node, url: url, credentials: GatewayCredentials(password: "hunter2"))
        await node.start()
        #expect(await eventually("node on its device token") { await node.isConnected })
        #expect(await eventually("password removed") { (try? h.store.gateway(named: "lb"))?.password == nil })
        await node.stop()
        await g.stop()
    }
}

/// A bare connect, as another client would send it, to check what the loopback accepts.
enum RawConnect {
    static func connect(url: String, identity: DeviceIdentity, auth: [String: JSONValue], signedToken: String? = nil) async throws -> ResponseFrame {
        let client = try WebSocketClient(url: try WebSocketURL(parsing: url), options: WebSocketClientOptions())
        client.connect()
        defer { client.close(code: 1000, reason: "done") }
        var connectId: String?
        for await e in client.events {
            guard case .message(let m) = e else {
                if case .closed = e { break }
                if case .failed = e { break }
                continue
            }
            let frame: GatewayFrame
            switch m {
            case .text(let s): frame = try GatewayFrame.decode(s)
            case .binary(let b): frame = try GatewayFrame.decode(b)
            }
            switch frame {
            case .event(let ev) where ev.event == "connect.challenge":
                guard let c = ConnectChallenge(payload: ev.payload) else { throw CancellationError() }
                let token = signedToken ?? auth["token"]?.stringValue ?? auth["deviceToken"]?.stringValue ?? ""
                let payload = DeviceAuthPayload.build(version: .v3, deviceId: identity.deviceId, clientId: "node-host", clientMode: "node",
                                                      role: "node", scopes: [], signedAtMs: c.ts, token: token, nonce: c.nonce,
                                                      platform: "linux", deviceFamily: "Linux")
                let params: JSONValue = [
                    "minProtocol": 3, "maxProtocol": 4, "role": "node", "scopes": [],
                    "client": ["id": "node-host", "version": "raw", "platform": "linux", "deviceFamily": "Linux", "mode": "node"],
                    "device": ["id": .string(identity.deviceId), "publicKey": .string(identity.publicKeyBase64URL),
                               "signature": .string(try identity.sign(payload)), "signedAt": .number(Double(c.ts)), "nonce": .string(c.nonce)],
                    "auth": .object(auth)]
                connectId = "raw-1"
                client.send(.text(try GatewayFrame.request(RequestFrame(id: "raw-1", method: "connect", params: params)).encodedString()))
            case .response(let r) where r.id == connectId:
                return r
            default:
                continue
            }
        }
        throw CancellationError()
    }
}
