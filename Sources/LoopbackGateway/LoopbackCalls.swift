// The loopback gateway's Gateway-controlled realtime calls (issue 23; protocol-drift-2026-12b.md
// D1, D4, D5, D6, §2.4): talk.client.create answering the exact create result when the client asks
// for gateway-control-v1, talk.client.close with both exact keys, talk.catalog, `talk.event`
// `session.closed`, and the offer route (LoopbackOfferBroker) that checks the single-use secret
// and hands the SDP offer to the call's media end (in the tests, the aiortc peer).

import Foundation
public import GatewayProtocol
import WebSocketTransport

extension LoopbackGateway {
    /// How the gateway answers realtime calls.
    public enum CallsMode: Sendable, Equatable {
        /// No talk.client.* methods (a gateway before realtime Talk).
        case disabled
        /// The current gateway: gateway-control-v1 honoured, the exact create result (D1).
        case gatewayControl
        /// A gateway that knows the field but hands the client the control (`clientControl.owner:"client"`).
        case clientOwned
        /// A 2026.7-era closed schema: `capabilities` is an unexpected property (D4).
        case tooOld
        /// The provider's authentication cannot do gateway control (D6).
        case unavailable
    }

    /// One call as the gateway saw it.
    public struct CallRecord: Sendable {
        public var voiceSessionId: String
        public var sessionKey: String
        public var params: JSONValue
        public var secret: String
        public var secretUsed = false
        public var offersPosted = 0
        public var closed = false
        public var closeParams: JSONValue?
        var owner: ConnectionID
    }

    public static let callOfferPath = "/plugins/openai/realtime/calls"

    /// Where the offer route is: the node's HTTP-origin override for the loopback (https with
    /// the gateway's own certificate when the gateway runs TLS).
    public var callOfferOrigin: String? { offerBroker.map { "\($0.tls == nil ? "http" : "https")://127.0.0.1:\($0.port)" } }
    public var callRecords: [CallRecord] { callOrder.compactMap { calls[$0] } }

    /// The call's media end: offer SDP in, answer SDP out (the provider behind the broker).
    public func setCallMediaEnd(_ answer: @escaping @Sendable (String) async throws -> String) { callMediaEnd = answer }

    /// The gateway ends a call itself: `talk.event` `session.closed` to the connection that created it.
    public func closeCallFromGateway(voiceSessionId: String) {
        guard let r = calls[voiceSessionId] else { return }
        emit("talk.event", ["voiceSessionId": .string(voiceSessionId),
                            "talkEvent": ["id": .string(UUID().uuidString.lowercased()), "type": "session.closed", "seq": 1,
                                          "sessionId": .string(voiceSessionId), "final": true, "payload": ["reason": "gateway"]]],
             to: r.owner, seq: true)
    }

    func startOfferBroker() throws {
        guard configuration.calls != .disabled, offerBroker == nil else { return }
        var tls: TLSServerContext?
        if let cert = configuration.tlsCertificatePath, let key = configuration.tlsKeyPath {
            tls = try TLSServerContext(certificatePEMPath: cert, privateKeyPEMPath: key)
        }
        offerBroker = try LoopbackOfferBroker(tls: tls, spawn: { [weak self] job in self?.spawn(job) ?? false }) { [weak self] path, bearer, ctype, body in
            guard let self else { return (502, "gateway stopped") }
            return await self.offer(path: path, bearer: bearer, contentType: ctype, sdp: body)
        }
    }

    func stopOfferBroker() { offerBroker?.stop(); offerBroker = nil }

    var callMethods: [String] {
        var m = configuration.calls == .disabled ? [] : ["talk.client.create", "talk.client.close"]
        if configuration.calls != .disabled || configuration.realtimeRelay { m.append("talk.catalog") }
        if configuration.realtimeRelay {
            m += ["talk.session.create", "talk.session.appendAudio", "talk.session.close", "talk.session.cancelOutput"]
                .filter { configuration.relay == .disabled || $0 == "talk.session.cancelOutput" }
        }
        return m
    }

    func callMethod(_ req: RequestFrame, _ p: JSONValue, _ conn: Connection) -> Bool {
        if req.method == "talk.catalog", configuration.realtimeRelay || configuration.calls != .disabled {
            reply(req.id, catalog, to: conn.id)
            return true
        }
        guard configuration.calls != .disabled else { return false }
        switch req.method {
        case "talk.client.create": create(req, p, conn)
        case "talk.client.close": closeCall(req, p, conn)
        case "talk.catalog": reply(req.id, catalog, to: conn.id)
        default: return false
        }
        return true
    }

    private func create(_ req: RequestFrame, _ p: JSONValue, _ conn: Connection) {
        var allowed: Set<String> = ["mode", "transport", "brain", "sessionKey", "provider", "model", "voice", "silenceDurationMs"]
        if configuration.calls != .tooOld { allowed.insert("capabilities") }
        if takesAgentId { allowed.insert("agentId") }
        if let extra = p.objectValue?.keys.sorted().first(where: { !allowed.contains($0) }) {
            fail(req.id, ErrorShape(code: "INVALID_REQUEST", message: "invalid talk.client.create params: at root: unexpected property '\(extra)'"), to: conn.id)
            return
        }
        if let e = ownerRefusal(p) { fail(req.id, e, to: conn.id); return }
        if p["transport"]?.stringValue == "gateway-relay" {
            fail(req.id, ErrorShape(code: "INVALID_REQUEST", message: "talk.client.create is client-owned; use talk.session.create for gateway-relay"), to: conn.id)
            return
        }
        guard p["mode"]?.stringValue == "realtime", p["brain"]?.stringValue == "agent-consult", p["transport"]?.stringValue == "webrtc" else {
            fail(req.id, ErrorShape(code: "INVALID_REQUEST", message: "talk.client.create requires mode realtime, transport webrtc and brain agent-consult"), to: conn.id)
            return
        }
        guard let key = p["sessionKey"]?.stringValue, !key.isEmpty else {
            fail(req.id, ErrorShape(code: "INVALID_REQUEST", message: "talk.client.create requires sessionKey"), to: conn.id)
            return
        }
        let wantsControl = (p["capabilities"]?.arrayValue ?? []).contains(.string("gateway-control-v1"))
        if configuration.calls == .unavailable && wantsControl {
            fail(req.id, ErrorShape(code: "UNAVAILABLE", message: "Realtime provider \"loopback\" does not support gateway-control-v1 with its configured authentication"), to: conn.id)
            return
        }
        let id = "voice-" + String(UUID().uuidString.prefix(8)).lowercased()
        let secret = "ek_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        calls[id] = CallRecord(voiceSessionId: id, sessionKey: key, params: p, secret: secret, owner: conn.id)
        callOrder.append(id)
        let expires = Date().timeIntervalSince1970 * 1000 + 60_000
        var result: [String: JSONValue] = [
            "transport": "webrtc", "offerUrl": .string(Self.callOfferPath), "clientSecret": .string(secret),
            "voiceSessionId": .string(id), "provider": "loopback", "model": "loopback-echo", "voice": "loopback",
            "expiresAt": .number(expires)]
        // Without gateway-control-v1 (or on a gateway that will not own it) the control stays with the client.
        result["clientControl"] = wantsControl && configuration.calls == .gatewayControl ? ["owner": "gateway"] : ["owner": "client"]
        reply(req.id, .object(result), to: conn.id)
    }

    private func closeCall(_ req: RequestFrame, _ p: JSONValue, _ conn: Connection) {
        guard let key = p["sessionKey"]?.stringValue, let id = p["voiceSessionId"]?.stringValue,
              p.objectValue?.keys.allSatisfy({ ["sessionKey", "voiceSessionId", "agentId"].contains($0) }) == true else {
            fail(req.id, ErrorShape(code: "INVALID_REQUEST", message: "talk.client.close requires sessionKey and voiceSessionId"), to: conn.id)
            return
        }
        // D5: both exact; an equivalent alias of the key is no replacement.
        guard var r = calls[id], r.sessionKey == key else {
            fail(req.id, ErrorShape(code: "INVALID_REQUEST", message: "no realtime session \(id) for sessionKey \(key)"), to: conn.id)
            return
        }
        r.closed = true
        r.closeParams = p
        calls[id] = r
        reply(req.id, ["ok": true, "voiceSessionId": .string(id)], to: conn.id)
    }

    /// The realtime group: WebRTC with the agent as brain; the relay only when configured.
    private var catalog: JSONValue {
        var transports: [JSONValue] = configuration.calls == .disabled ? [] : ["webrtc"]
        if configuration.realtimeRelay { transports.append("gateway-relay") }
        return ["modes": ["realtime", "transcription"], "transports": ["webrtc", "gateway-relay"], "brains": ["agent-consult", "none"],
                "realtime": ["ready": true, "activeProvider": "loopback",
                             "providers": [["id": "loopback", "label": "Loopback", "configured": true, "modes": ["realtime"],
                                            "transports": .array(transports), "brains": ["agent-consult"]]]]]
    }

    /// The offer route: path, content type, the single-use secret, then the media end's answer.
    func offer(path: String, bearer: String?, contentType: String?, sdp: String) async -> (Int, String) {
        guard path == Self.callOfferPath else { return (404, "no route \(path)") }
        guard contentType?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces) == "application/sdp" else {
            return (415, "Content-Type must be application/sdp")
        }
        guard let bearer, let id = calls.first(where: { $0.value.secret == bearer })?.key, var r = calls[id], !r.secretUsed, !r.closed else {
            return (401, "bad, used or expired client secret")
        }
        r.secretUsed = true
        r.offersPosted += 1
        calls[id] = r
        guard sdp.hasPrefix("v=0"), sdp.contains("\nm=audio"), !sdp.contains("\nm=application"), !sdp.contains("\nm=video") else {
            return (400, "the offer must be audio-only SDP")
        }
        guard let media = callMediaEnd else { return (502, "the loopback gateway has no media end for calls") }
        do { return (201, try await media(sdp)) } catch { return (502, "the media end refused the offer: \(error)") }
    }
}
