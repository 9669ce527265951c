// The wire values of a realtime call (protocol-drift-2026-12b.md D1, D5, D7, §2.4): the
// talk.start/talk.stop contract, talk.client.create's params and the exact validation of its
// result, talk.client.close, the talk.event that ends a call, and what talk.catalog offers for
// the gateway relay. Pure values, no I/O.

import Foundation
public import GatewayProtocol

/// `talk.start` / `talk.stop` params must be exactly `{}` (the room node's rule).
public enum CallCommandParams {
    /// nil when the params are `{}`; else the room node's INVALID_PARAMS message.
    public static func refusal(command: String, params: JSONValue) -> String? {
        if case .object(let o) = params, o.isEmpty { return nil }
        return "\(command) accepts only {}"
    }
}

/// What the gateway hands back for a Gateway-controlled WebRTC call (D1), after validation.
public struct CallGrant: Sendable, Equatable {
    public var offerPath: String
    public var clientSecret: String
    public var voiceSessionId: String
    /// Extra headers for the offer POST (never authorization, content-type or host).
    public var offerHeaders: [String: String]
    public var provider: String?
    public var model: String?
    public var voice: String?

    public init(offerPath: String, clientSecret: String, voiceSessionId: String, offerHeaders: [String: String] = [:],
                provider: String? = nil, model: String? = nil, voice: String? = nil) {
        self.offerPath = offerPath
        self.clientSecret = clientSecret
        self.voiceSessionId = voiceSessionId
        self.offerHeaders = offerHeaders
        self.provider = provider
        self.model = model
        self.voice = voice
    }
}

/// Why a create result is not usable: anything the room node would call "upgrade required".
public struct CreateRejection: Error, Sendable, Equatable, CustomStringConvertible {
    public var reason: String
    /// The `voiceSessionId` that came back anyway: the session must still be closed.
    public var voiceSessionId: String?
    public var description: String { reason }
}

public enum CallCreateResult {
    /// The capability that asks the gateway to own the provider's control channel.
    public static let gatewayControl = "gateway-control-v1"

    /// talk.client.create params: realtime over WebRTC, the agent as brain, gateway control.
    /// `agentId` only when the gateway advertises talk-session-target-v1 (D2).
    public static func params(sessionKey: String, agentId: String? = nil, provider: String? = nil, model: String? = nil,
                              voice: String? = nil, silenceDurationMs: Int? = nil) -> JSONValue {
        var o: [String: JSONValue] = [
            "mode": "realtime", "transport": "webrtc", "brain": "agent-consult",
            "sessionKey": .string(sessionKey), "capabilities": [.string(gatewayControl)],
        ]
        if let agentId { o["agentId"] = .string(agentId) }
        if let provider { o["provider"] = .string(provider) }
        if let model { o["model"] = .string(model) }
        if let voice { o["voice"] = .string(voice) }
        if let silenceDurationMs { o["silenceDurationMs"] = .number(Double(silenceDurationMs)) }
        return .object(o)
    }

    /// Validates a create result exactly as the official room node does (D1); any failure is
    /// "gateway upgrade required" and carries the voiceSessionId to close, when one came back.
    public static func validate(_ payload: JSONValue) -> Result<CallGrant, CreateRejection> {
        guard case .object(let o) = payload else { return .failure(CreateRejection(reason: "the create result is not an object")) }
        var voiceSessionId: String?
        if let v = o["voiceSessionId"]?.stringValue, !v.isEmpty, v.utf8.count <= 128 { voiceSessionId = v }
        func reject(_ why: String) -> Result<CallGrant, CreateRejection> {
            .failure(CreateRejection(reason: why, voiceSessionId: voiceSessionId))
        }
        guard o["clientControl"] == .object(["owner": "gateway"]) else {
            return reject("clientControl is not exactly {\"owner\":\"gateway\"} (the gateway does not own the call's control: gateway-control-v1 missing)")
        }
        guard o["transport"]?.stringValue == "webrtc" else { return reject("transport is not \"webrtc\"") }
        guard let offerPath = o["offerUrl"]?.stringValue, offerPath.hasPrefix("/") else {
            return reject("offerUrl is not a path starting with \"/\"")
        }
        guard let secret = o["clientSecret"]?.stringValue, !secret.isEmpty else { return reject("clientSecret is missing") }
        guard let raw = o["voiceSessionId"]?.stringValue, (1...128).contains(raw.utf8.count) else {
            return reject("voiceSessionId is missing or not 1…128 bytes")
        }
        var headers: [String: String] = [:]
        if let h = o["offerHeaders"] {
            guard case .object(let ho) = h else { return reject("offerHeaders is not an object") }
            for (name, value) in ho {
                guard let s = value.stringValue else { return reject("offerHeaders.\(name) is not a string") }
                if ["authorization", "content-type", "host"].contains(name.lowercased()) {
                    return reject("offerHeaders may not set \(name)")
                }
                headers[name] = s
            }
        }
        return .success(CallGrant(offerPath: offerPath, clientSecret: secret, voiceSessionId: raw, offerHeaders: headers,
                                  provider: o["provider"]?.stringValue, model: o["model"]?.stringValue,
                                  voice: o["voice"]?.stringValue))
    }

    /// talk.client.close: both exact keys (D5).
    public static func closeParams(sessionKey: String, voiceSessionId: String) -> JSONValue {
        ["sessionKey": .string(sessionKey), "voiceSessionId": .string(voiceSessionId)]
    }
}

/// A `talk.event` as far as a call cares: which voice session it names and whether it closes it.
public struct CallTalkEvent: Sendable, Equatable {
    public var voiceSessionId: String?
    /// The nested `talkEvent.sessionId`, when sent.
    public var nestedSessionId: String?
    public var type: String

    public init(voiceSessionId: String?, nestedSessionId: String? = nil, type: String) {
        self.voiceSessionId = voiceSessionId
        self.nestedSessionId = nestedSessionId
        self.type = type
    }

    public init?(payload: JSONValue?) {
        guard let p = payload, let t = p["talkEvent"]?["type"]?.stringValue else { return nil }
        self.init(voiceSessionId: p["voiceSessionId"]?.stringValue, nestedSessionId: p["talkEvent"]?["sessionId"]?.stringValue, type: t)
    }

    /// Only an exact `session.closed` for this voice session ends the call (esp PR #35): every id
    /// the event names must be ours, and it must name one. `session.error` never ends it.
    public func closes(_ voiceSessionId: String) -> Bool {
        guard type == "session.closed" else { return false }
        let named = [self.voiceSessionId, nestedSessionId].compactMap { $0 }
        return !named.isEmpty && named.allSatisfy { $0 == voiceSessionId }
    }
}

/// What the gateway offers for a call, from hello-ok's methods and `talk.catalog` (§2.4).
public struct CallOffer: Sendable, Equatable, Codable {
    /// `talk.client.create` is among the gateway's methods.
    public var webrtc: Bool
    /// The realtime provider group offers `gateway-relay` with `agent-consult`.
    public var relay: Bool
    public init(webrtc: Bool, relay: Bool) { self.webrtc = webrtc; self.relay = relay }

    /// Reads the realtime group of a talk.catalog result: the active provider (else any
    /// configured one) must list mode realtime, transport gateway-relay and brain agent-consult;
    /// a provider that lists none of a kind inherits the catalog's top-level list.
    public static func relayOffered(catalog: JSONValue?) -> Bool {
        guard let c = catalog, let group = c["realtime"], group["ready"]?.boolValue != false,
              let providers = group["providers"]?.arrayValue else { return false }
        func names(_ v: JSONValue?) -> [String]? { v?.arrayValue?.compactMap(\.stringValue) }
        let active = group["activeProvider"]?.stringValue
        let candidates = providers.filter { p in
            guard p["configured"]?.boolValue == true else { return false }
            return active == nil || p["id"]?.stringValue == active
        }
        return candidates.contains { p in
            let modes = names(p["modes"]) ?? names(c["modes"]) ?? []
            let transports = names(p["transports"]) ?? names(c["transports"]) ?? []
            let brains = names(p["brains"]) ?? names(c["brains"]) ?? []
            return modes.contains("realtime") && transports.contains("gateway-relay") && brains.contains("agent-consult")
        }
    }
}
