// The gateway's side of the handshake as pure checks: closed-schema validation of connect
// params and the device proof, in the spec's order, with its exact error codes.

import Foundation
import GatewayCrypto
import GatewayProtocol

enum HandshakeCheck {
    static let clientIds: Set<String> = ["webchat-ui", "openclaw-control-ui", "openclaw-browser-copilot", "openclaw-tui", "webchat",
        "cli", "gateway-client", "openclaw-macos", "openclaw-linux", "openclaw-ios", "openclaw-watchos", "openclaw-android",
        "node-host", "openclaw-worker", "test", "fingerprint", "openclaw-probe"]
    static let clientModes: Set<String> = ["webchat", "cli", "ui", "backend", "node", "worker", "probe", "test"]
    static let signatureSkewMs: Int64 = 120_000

    static func invalidParams(_ path: String, _ what: String) -> ErrorShape {
        ErrorShape(code: "INVALID_REQUEST", message: "invalid connect params: at \(path) \(what)")
    }

    /// Validates the closed connect schema; returns the decoded params or the gateway's error.
    static func validate(_ params: JSONValue?) -> Result<ConnectParams, ErrorShape> {
        guard let o = params?.objectValue else { return .failure(invalidParams("/", "must be object")) }
        func closed(_ obj: [String: JSONValue], _ allowed: Set<String>, _ path: String) -> ErrorShape? {
            for k in obj.keys.sorted() where !allowed.contains(k) {
                return invalidParams(path, "must NOT have additional properties (\(k))")
            }
            return nil
        }
        if let e = closed(o, ConnectParams.allowedKeys, "/") { return .failure(e) }
        guard let client = o["client"]?.objectValue else { return .failure(invalidParams("/client", "is required")) }
        if let e = closed(client, ConnectParams.allowedClientKeys, "/client") { return .failure(e) }
        guard let cid = client["id"]?.stringValue, clientIds.contains(cid) else {
            return .failure(invalidParams("/client/id", "must be equal to one of the allowed values"))
        }
        guard let mode = client["mode"]?.stringValue, clientModes.contains(mode) else {
            return .failure(invalidParams("/client/mode", "must be equal to one of the allowed values"))
        }
        for key in ["version", "platform"] where (client[key]?.stringValue ?? "").isEmpty {
            return .failure(invalidParams("/client/\(key)", "is required"))
        }
        if let auth = o["auth"] {
            guard let a = auth.objectValue else { return .failure(invalidParams("/auth", "must be object")) }
            if let e = closed(a, ConnectParams.allowedAuthKeys, "/auth") { return .failure(e) }
            for (k, v) in a where v.stringValue == nil { return .failure(invalidParams("/auth/\(k)", "must be string")) }
        }
        if let device = o["device"] {
            guard let d = device.objectValue else { return .failure(invalidParams("/device", "must be object")) }
            if let e = closed(d, ConnectParams.allowedDeviceKeys, "/device") { return .failure(e) }
            for k in ["id", "publicKey", "signature", "nonce"] where (d[k]?.stringValue ?? "").isEmpty {
                return .failure(invalidParams("/device/\(k)", "is required"))
            }
            guard let t = d["signedAt"]?.intValue, t >= 0 else { return .failure(invalidParams("/device/signedAt", "must be integer")) }
        }
        for k in ["minProtocol", "maxProtocol"] where (o[k]?.intValue ?? 0) < 1 {
            return .failure(invalidParams("/\(k)", "is required"))
        }
        if let s = o["scopes"], s.arrayValue?.allSatisfy({ $0.stringValue != nil }) != true {
            return .failure(invalidParams("/scopes", "must be array of strings"))
        }
        do {
            return .success(try params!.decode(ConnectParams.self))
        } catch {
            return .failure(invalidParams("/", "does not match the schema"))
        }
    }

    static func proofError(_ message: String, _ code: String, _ reason: String) -> ErrorShape {
        ErrorShape(code: "INVALID_REQUEST", message: message, details: ["code": .string(code), "reason": .string(reason)])
    }

    /// Verifies the device proof in the server's order: id, skew, nonce, nonce match, signature (v3 then v2), key.
    static func verifyDevice(_ p: ConnectParams, expectedNonce: String, nowMs: Int64, acceptV3: Bool) -> ErrorShape? {
        guard let d = p.device else { return nil }
        guard let pk = Base64URL.decode(d.publicKey), pk.count == 32 else {
            return proofError("device public key invalid", "DEVICE_AUTH_PUBLIC_KEY_INVALID", "device-public-key")
        }
        if Hex.encode(SHA256.digest(pk)) != d.id {
            return proofError("device identity mismatch", "DEVICE_AUTH_DEVICE_ID_MISMATCH", "device-id-mismatch")
        }
        if abs(nowMs - d.signedAt) > signatureSkewMs {
            return proofError("device signature expired", "DEVICE_AUTH_SIGNATURE_EXPIRED", "device-signature-stale")
        }
        if d.nonce.trimmingCharacters(in: .whitespaces).isEmpty {
            return proofError("device nonce required", "DEVICE_AUTH_NONCE_REQUIRED", "device-nonce-missing")
        }
        if d.nonce != expectedNonce {
            return proofError("device nonce mismatch", "DEVICE_AUTH_NONCE_MISMATCH", "device-nonce-mismatch")
        }
        let token = p.auth?.signatureToken ?? ""
        func payload(_ v: DeviceAuthPayload.Version) -> String {
            DeviceAuthPayload.build(version: v, deviceId: d.id, clientId: p.client.id, clientMode: p.client.mode, role: p.role,
                                    scopes: p.scopes, signedAtMs: d.signedAt, token: token, nonce: d.nonce,
                                    platform: p.client.platform, deviceFamily: p.client.deviceFamily)
        }
        let ok = (acceptV3 && DeviceIdentity.verify(publicKey: pk, message: payload(.v3), signature: d.signature))
            || DeviceIdentity.verify(publicKey: pk, message: payload(.v2), signature: d.signature)
        if !ok { return proofError("device signature invalid", "DEVICE_AUTH_SIGNATURE_INVALID", "device-signature") }
        return nil
    }
}
