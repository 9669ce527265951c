// The loopback gateway's side of the handshake: the connect request checked as the spec says
// (schema, protocol range, device proof, shared secret, device token, bootstrap token), pairing
// requests with their ids, hello-ok with the tokens, and refusals with a close frame after them.

import Foundation
import GatewayProtocol
import WebSocketTransport

extension LoopbackGateway {
    func reject(_ req: RequestFrame, _ conn: Connection, _ error: ErrorShape, close code: Int = 1008, reason: String? = nil) {
        fail(req.id, error, to: conn.id)
        log("connect rejected: \(error)")
        let server = self.server
        let id = conn.id
        let closeReason = String((reason ?? error.message).prefix(120))
        // Give the response a moment to leave before the close frame, as the real gateway's ws library does.
        spawn {
            try? await Task.sleep(for: .milliseconds(20))
            server?.close(id, code: code, reason: closeReason)
        }
    }

    func handshake(_ req: RequestFrame, _ conn: Connection) {
        guard req.method == "connect" else {
            reject(req, conn, ErrorShape(code: "INVALID_REQUEST", message: "invalid handshake: first request must be connect"))
            return
        }
        connectAttemptLog.append(ConnectAttempt(nonce: conn.nonce, params: req.params ?? .null, connectionId: Int(conn.id.raw)))
        if !forcedConnectErrors.isEmpty {
            reject(req, conn, forcedConnectErrors.removeFirst())
            return
        }
        if startingConnects > 0 {
            startingConnects -= 1
            reject(req, conn, ErrorShape(code: "UNAVAILABLE", message: "gateway starting; retry shortly",
                                         details: ["reason": "startup-sidecars"], retryable: true,
                                         retryAfterMs: startingRetryAfterMs), close: 1013, reason: "gateway starting")
            return
        }
        if let origin = conn.origin {
            reject(req, conn, ErrorShape(code: "INVALID_REQUEST", message: "origin not allowed: \(origin)",
                                         details: ["code": "CONTROL_UI_ORIGIN_NOT_ALLOWED", "reason": "origin-not-allowed"]))
            return
        }
        let p: ConnectParams
        switch HandshakeCheck.validate(req.params) {
        case .failure(let e): reject(req, conn, e); return
        case .success(let v): p = v
        }
        let isNode = p.role == "node" && p.client.mode == "node"
        let offered = p.minProtocol...max(p.minProtocol, p.maxProtocol)
        switch configuration.protocolMode {
        case .current:
            guard offered.contains(4) || (isNode && offered.contains(3)) else {
                reject(req, conn, ErrorShape(code: "INVALID_REQUEST", message: "protocol mismatch",
                                             details: ["code": "PROTOCOL_MISMATCH", "clientMinProtocol": .number(Double(p.minProtocol)),
                                                       "clientMaxProtocol": .number(Double(p.maxProtocol)), "expectedProtocol": 4,
                                                       "minimumProbeProtocol": 3]), close: 1002)
                return
            }
        case .releasedV3, .releasedV3Exact:
            let refuses = !offered.contains(3) || (configuration.protocolMode == .releasedV3Exact && offered.upperBound > 3)
            if refuses {
                // The released-v3 shape: no details.code (openclaw-gateway-client tests/session.rs).
                reject(req, conn, ErrorShape(code: "INVALID_REQUEST", message: "protocol mismatch",
                                             details: ["expectedProtocol": 3]), close: 1002)
                return
            }
        }
        let helloProtocol = configuration.protocolMode == .current ? 4 : 3
        guard p.role == "node" || p.role == "operator" else {
            reject(req, conn, ErrorShape(code: "INVALID_REQUEST", message: "invalid role"))
            return
        }
        if p.role == "node" && !p.scopes.isEmpty {
            reject(req, conn, HandshakeCheck.invalidParams("/scopes", "must be empty for nodes"))
            return
        }
        guard let device = p.device else {
            reject(req, conn, ErrorShape(code: "NOT_PAIRED", message: "device identity required", details: ["code": "DEVICE_IDENTITY_REQUIRED"]))
            return
        }
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        if let e = HandshakeCheck.verifyDevice(p, expectedNonce: conn.nonce, nowMs: now, acceptV3: !configuration.legacySignaturesOnly) {
            reject(req, conn, e)
            return
        }
        // Credentials: shared secret first, then the device token (shared-token fallback), then bootstrap.
        let auth = p.auth ?? ConnectAuth()
        var known = devices[device.id]
        var viaBootstrap = false
        var authorised = false
        // A device token is accepted in either slot: `auth.deviceToken` (newest official clients)
        // or `auth.token` (older ones, checked as the shared secret first, then as a device token).
        if let t = auth.token, let dt = known?.tokens[p.role], t == dt { authorised = true }
        if !authorised, let t = auth.deviceToken {
            if let dt = known?.tokens[p.role], t == dt {
                authorised = true
            } else if auth.token == nil && auth.password == nil {
                reject(req, conn, authError("AUTH_DEVICE_TOKEN_MISMATCH", "unauthorized: device token mismatch (rotated or revoked)"))
                return
            }
        }
        if !authorised, let b = auth.bootstrapToken {
            guard bootstrapTokens.contains(b), p.role == "node" else {
                reject(req, conn, authError("AUTH_BOOTSTRAP_TOKEN_INVALID", "unauthorized: bootstrap token invalid or expired"))
                return
            }
            viaBootstrap = true
            authorised = true
        }
        if !authorised {
            switch configuration.auth {
            case .none:
                authorised = true
            case .token(let shared):
                if let t = auth.token, t == shared { authorised = true }
                else if let t = auth.token, known?.revoked.contains(t) == true || known?.tokens.isEmpty == false || revokedAfterRemoval.contains(t) {
                    reject(req, conn, authError("AUTH_DEVICE_TOKEN_MISMATCH", "unauthorized: device token mismatch (rotated or revoked)"))
                    return
                } else if auth.token != nil {
                    reject(req, conn, authError("AUTH_TOKEN_MISMATCH", "unauthorized: gateway token mismatch (provide gateway auth token)"))
                    return
                } else if auth.password == nil {
                    reject(req, conn, authError("AUTH_TOKEN_MISSING", "unauthorized: gateway token missing (provide gateway auth token)"))
                    return
                }
            case .password(let pw):
                if let given = auth.password {
                    guard given == pw else {
                        reject(req, conn, authError("AUTH_PASSWORD_MISMATCH", "unauthorized: gateway password mismatch"))
                        return
                    }
                    authorised = true
                } else if let t = auth.token, known?.revoked.contains(t) == true {
                    reject(req, conn, authError("AUTH_DEVICE_TOKEN_MISMATCH", "unauthorized: device token mismatch (rotated or revoked)"))
                    return
                } else {
                    reject(req, conn, authError("AUTH_PASSWORD_MISSING", "unauthorized: gateway password missing"))
                    return
                }
            }
            if !authorised {
                reject(req, conn, authError("AUTH_UNAUTHORIZED", "unauthorized"))
                return
            }
        }
        // Pairing: the device record pins platform and family; each role is approved separately.
        if known == nil {
            known = Device(publicKey: device.publicKey, platform: p.client.platform, deviceFamily: p.client.deviceFamily ?? "")
            devices[device.id] = known
        }
        var deviceTokens: [JSONValue] = []
        if viaBootstrap {
            // The node-pairing profile for node-host: approve the node and hand over an operator token too.
            bootstrapTokens.remove(auth.bootstrapToken!)
            devices[device.id]!.roles["node"] = []
            if configuration.bootstrapHandsOverOperator {
                devices[device.id]!.roles["operator"] = ["operator.read", "operator.write", "operator.talk"]
                let opToken = issueToken(device.id, role: "operator")
                deviceTokens.append(["deviceToken": .string(opToken), "role": "operator",
                                     "scopes": ["operator.read", "operator.write", "operator.talk"], "issuedAtMs": .number(Double(now))])
            }
        }
        if known!.platform != p.client.platform || known!.deviceFamily != (p.client.deviceFamily ?? "") {
            pairingRequired(req, conn, deviceId: device.id, role: p.role, scopes: p.scopes, reason: "metadata-upgrade")
            return
        }
        let approvedScopes = devices[device.id]!.roles[p.role]
        if approvedScopes == nil || !Set(p.scopes).isSubset(of: Set(approvedScopes!)) {
            if configuration.autoApprove {
                devices[device.id]!.roles[p.role] = p.scopes
            } else {
                pairingRequired(req, conn, deviceId: device.id, role: p.role, scopes: p.scopes,
                                reason: approvedScopes == nil ? (devices[device.id]!.roles.isEmpty ? "not-paired" : "role-upgrade") : "scope-upgrade")
                return
            }
        }
        if let refusal = accessPolicyRefusal(role: p.role) {
            reject(req, conn, refusal)
            return
        }
        let token = devices[device.id]!.tokens[p.role] ?? issueToken(device.id, role: p.role)
        var c = conn
        c.helloDone = true
        c.role = p.role
        c.scopes = p.scopes
        c.deviceId = device.id
        connections[conn.id] = c
        var auth2: [String: JSONValue] = ["role": .string(p.role), "scopes": .array(p.scopes.map { .string($0) }),
                                          "deviceToken": .string(token), "issuedAtMs": .number(Double(now))]
        if !deviceTokens.isEmpty { auth2["deviceTokens"] = .array(deviceTokens) }
        let hello: JSONValue = [
            "type": "hello-ok", "protocol": .number(Double(helloProtocol)),
            "server": ["version": "loopback-1", "connId": .string("conn-\(conn.id.raw)")],
            "features": features,
            "snapshot": ["presence": [], "health": [:], "stateVersion": ["presence": 1, "health": 1],
                         "uptimeMs": .number(Double(Int64(Date().timeIntervalSince(startedAt) * 1000))),
                         "sessionDefaults": ["defaultAgentId": "main", "mainKey": "main", "mainSessionKey": .string(configuration.mainSessionKey)],
                         "authMode": .string(authModeName)],
            "auth": .object(auth2),
            "policy": ["maxPayload": 26_214_400, "maxBufferedBytes": 52_428_800, "tickIntervalMs": .number(Double(configuration.tickIntervalMs))],
        ]
        reply(req.id, hello, to: conn.id)
        log("\(p.role) connected: device \(device.id.prefix(12))…")
        if p.role == "node" {
            sendEvent("voicewake.changed", VoiceWakeTriggers(triggers: triggers).payload, to: conn.id)
            sendEvent("voicewake.routing.changed", wakeRoutingPayload, to: conn.id)
        }
    }

    var advertisedMethods: [String] {
        Self.methods + ["talk.speak", "tts.speak", "talk.config"]
            + (configuration.relay == .disabled ? [] : ["talk.session.create", "talk.session.appendAudio", "talk.session.close"])
            + callMethods
    }

    var authModeName: String {
        switch configuration.auth { case .none: "none"; case .token: "token"; case .password: "password" }
    }

    func authError(_ code: String, _ message: String) -> ErrorShape {
        ErrorShape(code: "INVALID_REQUEST", message: message, details: ["code": .string(code), "authReason": .string(code.lowercased())])
    }

    func issueToken(_ deviceId: String, role: String) -> String {
        let t = "dt_\(role)_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        devices[deviceId]?.tokens[role] = t
        return t
    }

    func pairingRequired(_ req: RequestFrame, _ conn: Connection, deviceId: String, role: String, scopes: [String], reason: String) {
        let existing = pending.values.first { $0.deviceId == deviceId && $0.role == role && $0.scopes == scopes }
        let requestId = existing?.requestId ?? "r_" + String(UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(12))
        pending[requestId] = PendingPairing(requestId: requestId, deviceId: deviceId, role: role, scopes: scopes, reason: reason)
        let message = reason == "role-upgrade" ? "pairing required: device is asking for a higher role than currently approved"
            : reason == "scope-upgrade" ? "pairing required: device is asking for more scopes than currently approved"
            : reason == "metadata-upgrade" ? "pairing required: device metadata changed"
            : "pairing required: device is not approved yet"
        let error = ErrorShape(code: "NOT_PAIRED", message: message, details: [
            "code": "PAIRING_REQUIRED", "reason": .string(reason), "requestId": .string(requestId),
            "remediationHint": "Approve this device from the pending pairing requests.",
            "deviceId": .string(deviceId), "requestedRole": .string(role), "requestedScopes": .array(scopes.map { .string($0) })])
        reject(req, conn, error, reason: "\(message) (requestId: \(requestId))")
    }
}
