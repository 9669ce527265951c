// The vocabulary of CallMachine: its settings, the call, the phases, the end causes, and the
// inputs, answers and actions that cross between the machine and its executor.

import Foundation
public import GatewayProtocol

extension CallMachine {
    public struct Settings: Sendable, Equatable {
        /// No speech either way for this long ends a connected call (the room node's idle timer).
        public var idleTimeoutMs: Int64 = 120_000
        /// From start to a create result (the target's resolution included).
        public var setupTimeoutMs: Int64 = 15_000
        /// From the create result to a connected link: ICE gathering, the offer POST (30 s), ICE and DTLS.
        public var connectTimeoutMs: Int64 = 45_000
        /// How long the close of the call's session may take before the machine is idle anyway.
        public var closeTimeoutMs: Int64 = 5_000
        /// Take the gateway relay when WebRTC is not offered or fails before it connects.
        public var fallbackToRelay = true
        public init() {}
    }

    public enum Origin: Sendable, Equatable {
        /// The agent invoked talk.start.
        case invoke
        /// A trigger, a key or `clawvoice call`.
        case local(String)
    }

    public enum Path: String, Sendable, Equatable { case webrtc, relay }

    /// Why a call ended (D5), with the name events and the log use.
    public enum EndCause: Sendable, Equatable {
        case talkStop, hangup, idleTimeout, linkDisconnected, sessionClosed
        case operatorLost, operatorReplaced, gatewaySwitched, sessionSwitched
        case linkFailed(String)
        /// The gateway cannot hold a Gateway-controlled call and no relay is offered.
        case upgradeRequired(String)
        case unavailable(String)
        case setupFailed(String)
        case timedOut(String)

        public var name: String {
            switch self {
            case .talkStop: return "talk.stop"
            case .hangup: return "hangup"
            case .idleTimeout: return "idle"
            case .linkDisconnected: return "link-disconnected"
            case .sessionClosed: return "session-closed"
            case .operatorLost: return "operator-lost"
            case .operatorReplaced: return "operator-replaced"
            case .gatewaySwitched: return "gateway-switched"
            case .sessionSwitched: return "session-switched"
            case .linkFailed: return "link-failed"
            case .upgradeRequired: return "upgrade-required"
            case .unavailable: return "unavailable"
            case .setupFailed: return "setup-failed"
            case .timedOut: return "timeout"
            }
        }
    }

    /// The session a call belongs to (D2), frozen for the whole call, close included.
    public struct Target: Sendable, Equatable {
        public var sessionKey: String
        /// Sent only when the gateway advertises talk-session-target-v1.
        public var agentId: String?
        public init(sessionKey: String, agentId: String? = nil) { self.sessionKey = sessionKey; self.agentId = agentId }
    }

    public struct Call: Sendable, Equatable {
        public var id: String
        public var origin: Origin
        public var path: Path
        public var target: Target?
        /// The gateway's id for the call: voiceSessionId (WebRTC) or the relay's sessionId.
        public var sessionId: String?
        /// A create or relay create is on the wire and its result not in yet.
        public var awaitingCreate = false
        public var startedAtMs: Int64
        public var connectedAtMs: Int64?
        public var lastActivityMs: Int64
        public var deadlineMs: Int64
    }

    public enum Phase: Sendable, Equatable {
        case idle
        /// Resolving the target and creating the gateway session (either path).
        case creating(Call)
        /// WebRTC: the offer is being gathered, POSTed and answered, then ICE and DTLS.
        case offering(Call)
        case connected(Call)
        /// The end is decided and the media stopped; the gateway session is being closed.
        case closing(Call, EndCause)

        public var call: Call? {
            switch self {
            case .idle: return nil
            case .creating(let c), .offering(let c), .connected(let c), .closing(let c, _): return c
            }
        }
        public var name: String {
            switch self {
            case .idle: return "idle"
            case .creating: return "creating"
            case .offering: return "offering"
            case .connected: return "connected"
            case .closing: return "closing"
            }
        }
    }

    /// A failed gateway request, as the executor got it.
    public struct Failure: Sendable, Equatable, Error {
        public var code: String
        public var message: String
        public init(code: String, message: String) { self.code = code; self.message = message }
    }

    public enum LinkEvent: Sendable, Equatable { case connected, disconnected, failed(String) }

    public enum Input: Sendable, Equatable {
        case start(token: Int, origin: Origin, callId: String)
        /// talk.stop (cause .talkStop) or hangup (.hangup).
        case stop(token: Int, cause: EndCause)
        /// The operator session; a new `incarnation` while connected is a reconnect (D5).
        case operatorState(connected: Bool, incarnation: Int)
        case offer(CallOffer)
        case gatewaySwitched
        case targetResolved(callId: String, Result<Target, Failure>)
        /// talk.client.create's result payload, or its error.
        case created(callId: String, Result<JSONValue, Failure>)
        /// talk.session.create (realtime relay): the relay's sessionId, or its error.
        case relayCreated(callId: String, Result<String, Failure>)
        /// The offer was POSTed and the answer set (nil), or why not.
        case answered(callId: String, error: String?)
        case link(callId: String, LinkEvent)
        /// Speech heard or played during the call (resets the idle timer).
        case activity(callId: String)
        case talkEvent(CallTalkEvent)
        /// The close of `sessionId` (client or relay) is done, whatever its result.
        case closed(callId: String, sessionId: String)
        case tick
    }

    public enum Answer: Sendable, Equatable {
        case started
        case alreadyActive
        case stopped(Bool)
        case unavailable(String)

        /// The D7 payloads; UNAVAILABLE is an error.
        public var result: Result<JSONValue, NodeInvokeError> {
            switch self {
            case .started: return .success(["started": true])
            case .alreadyActive: return .success(["started": false, "alreadyActive": true])
            case .stopped(let b): return .success(["stopped": .bool(b)])
            case .unavailable(let why): return .failure(NodeInvokeError(code: .unavailable, message: why))
            }
        }
    }

    public enum Action: Sendable, Equatable {
        case answer(token: Int, Answer)
        /// Resolve the call's session (D2) and report `targetResolved`.
        case resolveTarget(callId: String)
        case sendCreate(callId: String, params: JSONValue)
        /// Build the peer, gather, POST the offer with the grant's secret, set the answer; report `answered`, then `link`.
        case postOffer(callId: String, CallGrant)
        /// talk.session.create {mode realtime, transport gateway-relay, brain agent-consult}; report `relayCreated`.
        case openRelay(callId: String, Target)
        /// The link is up: microphone to the call, the call to the speaker.
        case callStarted(callId: String, Path)
        /// Stop the call's media now (peer or relay streams, playback): nothing plays after the end.
        case stopMedia(callId: String)
        /// talk.client.close {sessionKey, voiceSessionId}; report `closed`.
        case closeClient(callId: String, sessionKey: String, voiceSessionId: String)
        /// talk.session.close {sessionId}; report `closed`.
        case closeRelay(callId: String, sessionId: String)
        case callEnded(callId: String, Path, EndCause)
        /// The gateway needs an upgrade for Gateway-controlled calls (shown by status and doctor).
        case upgradeRequired(String)
        case log(String)
    }
}
