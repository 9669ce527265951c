// The loopback gateway's configuration and the values it records: how it authenticates, which
// protocol generation it plays, what `invoke` stamps, and the devices and connections it keeps.

import Foundation
public import GatewayProtocol
import WebSocketTransport

extension LoopbackGateway {
    public enum AuthMode: Sendable, Equatable {
        case none
        case token(String)
        case password(String)
    }

    public struct Configuration: Sendable {
        public var auth: AuthMode = .token("loopback-shared-token")
        /// Approve pairing requests at once (the demo); tests approve explicitly.
        public var autoApprove = false
        /// Whether a setup code's bootstrap pairing hands over an operator token too (newer
        /// gateways); false is a gateway whose codes pair the node only.
        public var bootstrapHandsOverOperator = true
        public var tickIntervalMs = 15_000
        public var mainSessionKey = "agent:main:main"
        public var port = 0
        /// Send frames as binary WebSocket messages, as newer gateways may.
        public var binaryFrames = false
        /// Accept only v2 signatures, like gateways deployed before v3.
        public var legacySignaturesOnly = false
        public var triggers = VoiceWakeTriggers.defaults
        public var tlsCertificatePath: String?
        public var tlsKeyPath: String?
        /// Delay before each echo delta, so tests can watch a reply stream.
        public var echoDeltaDelayMs = 20
        /// The transcription relay's input contract. G.711 µ-law at 8 kHz is the only one the real
        /// relay takes (transcription-relay.ts); the Opus mode stays for relays that name it.
        public var relay: RelayMode = .g711MuLaw
        /// talk.session.create fails with `UNAVAILABLE` and `details.talkIssue` (no provider).
        public var relayUnavailable = false
        /// Which protocol generation the gateway plays (see `ProtocolMode`).
        public var protocolMode: ProtocolMode = .current
        /// The top-level `sessionKey` that `invoke` stamps on `node.invoke.request` by default.
        public var invokeSessionKey: InvokeSessionKeyForm = .mainSession
        /// Extra top-level keys put on every event frame, as newer gateways add them
        /// (`recipientProfileId`, a partial `stateVersion`); clients must ignore them.
        public var extraEventKeys: [String: JSONValue] = [:]
        /// talk.speak's format when the request names none.
        public var talkSpeakDefaultFormat = "pcm_24000"
        /// What `talk.config` reports as `talk.silenceTimeoutMs` (nil: the key is absent).
        public var silenceTimeoutMs: Int? = nil
        /// tts.speak has no format parameter; this is what it returns.
        public var ttsSpeakFormat = "wav"
        /// `talk.config`'s `talk.agentId` (nil: absent) and `session.mainKey` (D2).
        public var talkAgentId: String? = nil
        public var talkMainKey = "main"
        /// hello-ok's `features.capabilities` (e.g. `talk-session-target-v1`); empty: the key is absent.
        public var capabilities: [String] = []
        /// A multi-agent gateway: a talk.* `sessionKey` that is the bare "main" has no owner and
        /// is refused (D2, openclaw/openclaw#133958).
        public var multiAgentTalk = false
        /// Which `chat` deltas carry the cumulative `message` (D3).
        public var deltaSnapshots: DeltaSnapshots = .every
        /// Realtime calls (talk.client.*, talk.catalog and the offer route, LoopbackCalls.swift).
        public var calls: CallsMode = .disabled
        /// The realtime gateway relay (§2.4, LoopbackRealtimeRelay.swift), offered in talk.catalog.
        public var realtimeRelay = false
        public init() {}
    }

    /// D3: today's gateways put the cumulative `message` on every delta; the newest protocol
    /// docs put it only on the first text frame of a run, later ones carry only `deltaText`.
    public enum DeltaSnapshots: Sendable, Equatable { case every, firstOnly }

    /// The protocol the gateway speaks and how it refuses a range it cannot serve.
    public enum ProtocolMode: Sendable, Equatable {
        /// Protocol 4; nodes may use 3 (`min ≤ 4 ≤ max`, or node with `min ≤ 3 ≤ max`); mismatch
        /// details `{code:"PROTOCOL_MISMATCH", clientMinProtocol, clientMaxProtocol, expectedProtocol:4, minimumProbeProtocol:3}`.
        case current
        /// A released protocol-3 gateway: accepts `min ≤ 3 ≤ max`, answers hello-ok with protocol 3,
        /// refuses with `INVALID_REQUEST "protocol mismatch"`, `details:{expectedProtocol:3}` and no `code`.
        case releasedV3
        /// As `releasedV3`, but it also refuses any range that reaches above 3 (what makes the
        /// official node hosts' exact-4 first attempt fail), so a client's 3…3 retry is exercised.
        case releasedV3Exact
    }

    /// What `invoke` sends as the request's top-level `sessionKey`.
    public enum InvokeSessionKeyForm: Sendable, Equatable {
        /// The configured main session key, as a gateway stamps the invoking agent's session.
        case mainSession
        case key(String)
        /// `"sessionKey": null`.
        case null
        /// No key at all, like gateways before July 2026.
        case omitted
    }

    /// One connect request as it arrived, for tests of what the client offered.
    public struct ConnectAttempt: Sendable {
        public var nonce: String
        public var params: JSONValue
        public var connectionId: Int
    }

    /// A pairing request waiting for `approve`.
    public struct PendingPairing: Sendable, Equatable {
        public var requestId: String
        public var deviceId: String
        public var role: String
        public var scopes: [String]
        public var reason: String
    }

    struct Device {
        var publicKey: String
        var platform: String
        var deviceFamily: String
        var roles: [String: [String]] = [:]   // approved role → scopes
        var tokens: [String: String] = [:]     // role → device token
        var revoked: Set<String> = []
    }

    struct Connection {
        var id: ConnectionID
        var nonce: String
        var helloDone = false
        var role: String?
        var scopes: [String] = []
        var deviceId: String?
        var seq: Int64 = 0
        var origin: String?
        var subscriptions: Set<String> = []
    }
}
