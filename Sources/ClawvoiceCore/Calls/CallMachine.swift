// Every decision of a realtime call, as a pure value (issue 23; protocol-drift-2026-12b.md D1, D2,
// D5, D7, §2.4): talk.start/talk.stop and local starts, the path (Gateway-controlled WebRTC, or
// the gateway relay when WebRTC is not offered or fails before it connects), the create result's
// validation, the link, every end cause and the close of both keys. Inputs carry the time as a
// number; actions are carried out by an executor. No I/O, no clock, no tasks.

import Foundation
import GatewayProtocol

public struct CallMachine: Sendable {
    public private(set) var settings: Settings
    public private(set) var phase: Phase = .idle
    public private(set) var operatorConnected = false
    public private(set) var offer = CallOffer(webrtc: false, relay: false)
    private var incarnation: Int?
    /// A start that arrived while the previous call was closing: it begins when that is done.
    private var queuedStart: (token: Int, origin: Origin, callId: String)?

    public init(settings: Settings = Settings()) { self.settings = settings }

    /// A call holds the room (push-to-talk and wake are refused while this is true).
    public var isActive: Bool { phase != .idle }

    public var nextDeadlineMs: Int64? {
        switch phase {
        case .idle: return nil
        case .connected(let c): return min(c.deadlineMs, c.lastActivityMs + settings.idleTimeoutMs)
        case .creating(let c), .offering(let c), .closing(let c, _): return c.deadlineMs
        }
    }

    public mutating func handle(_ input: Input, nowMs: Int64) -> [Action] {
        var out: [Action] = []
        switch input {
        case .start(let token, let origin, let callId): start(token: token, origin: origin, callId: callId, nowMs: nowMs, out: &out)
        case .stop(let token, let cause):
            switch phase {
            case .idle, .closing:
                if queuedStart != nil { queuedStart = nil; out.append(.answer(token: token, .stopped(true))) } else { out.append(.answer(token: token, .stopped(false))) }
            default:
                out.append(.answer(token: token, .stopped(true)))
                end(cause, nowMs: nowMs, out: &out)
            }
        case .operatorState(let connected, let inc):
            let wasConnected = operatorConnected
            let previous = incarnation
            operatorConnected = connected
            if connected { incarnation = inc }
            if isLive {
                if !connected && wasConnected { end(.operatorLost, nowMs: nowMs, out: &out) }
                else if connected, let previous, previous != inc { end(.operatorReplaced, nowMs: nowMs, out: &out) }
            }
        case .offer(let o): offer = o
        case .gatewaySwitched: if isLive { end(.gatewaySwitched, nowMs: nowMs, out: &out) }
        case .targetResolved(let id, let result): targetResolved(id, result, nowMs: nowMs, out: &out)
        case .created(let id, let result): created(id, result, nowMs: nowMs, out: &out)
        case .relayCreated(let id, let result): relayCreated(id, result, nowMs: nowMs, out: &out)
        case .answered(let id, let error):
            guard case .offering(let c) = phase, c.id == id, let error else { break }
            failBeforeConnect(c, .linkFailed("the offer exchange failed: \(error)"), nowMs: nowMs, out: &out)
        case .link(let id, let event): link(id, event, nowMs: nowMs, out: &out)
        case .activity(let id):
            if case .connected(var c) = phase, c.id == id { c.lastActivityMs = nowMs; phase = .connected(c) }
        case .talkEvent(let e):
            if isLive, let c = phase.call, let sid = c.sessionId, e.closes(sid) { end(.sessionClosed, nowMs: nowMs, out: &out) }
        case .closed(let id, let sid):
            if case .closing(let c, _) = phase, c.id == id, c.sessionId == sid, !c.awaitingCreate { finishClosing(nowMs: nowMs, out: &out) }
        case .tick: tick(nowMs: nowMs, out: &out)
        }
        return out
    }

    /// A call that is not already ending.
    private var isLive: Bool {
        switch phase { case .creating, .offering, .connected: return true; default: return false }
    }

    // MARK: steps

    private mutating func start(token: Int, origin: Origin, callId: String, nowMs: Int64, out: inout [Action]) {
        if case .closing = phase {
            if queuedStart != nil { out.append(.answer(token: token, .alreadyActive)) } else { queuedStart = (token, origin, callId) }
            return
        }
        guard phase == .idle else { out.append(.answer(token: token, .alreadyActive)); return }
        guard operatorConnected else {
            out.append(.answer(token: token, .unavailable("the operator session is offline; the node reconnects automatically")))
            return
        }
        let path: Path
        if offer.webrtc { path = .webrtc } else if offer.relay && settings.fallbackToRelay { path = .relay } else {
            let why = "the gateway offers neither talk.client.create nor a realtime gateway relay"
            out.append(.upgradeRequired(why))
            out.append(.answer(token: token, .unavailable("GATEWAY_UPGRADE_REQUIRED: \(why)")))
            return
        }
        out.append(.answer(token: token, .started))
        let call = Call(id: callId, origin: origin, path: path, startedAtMs: nowMs, lastActivityMs: nowMs,
                        deadlineMs: nowMs + settings.setupTimeoutMs)
        phase = .creating(call)
        out.append(.resolveTarget(callId: callId))
    }

    private mutating func targetResolved(_ id: String, _ result: Result<Target, Failure>, nowMs: Int64, out: inout [Action]) {
        guard case .creating(var c) = phase, c.id == id, c.target == nil else { return }
        switch result {
        case .failure(let f): end(.setupFailed("no session for the call: \(f.code): \(f.message)"), nowMs: nowMs, out: &out)
        case .success(let t):
            c.target = t
            c.awaitingCreate = true
            phase = .creating(c)
            switch c.path {
            case .webrtc: out.append(.sendCreate(callId: id, params: CallCreateResult.params(sessionKey: t.sessionKey, agentId: t.agentId)))
            case .relay: out.append(.openRelay(callId: id, t))
            }
        }
    }

    private mutating func created(_ id: String, _ result: Result<JSONValue, Failure>, nowMs: Int64, out: inout [Action]) {
        guard let c0 = phase.call, c0.id == id, c0.path == .webrtc, c0.awaitingCreate else { return }
        var c = c0
        c.awaitingCreate = false
        if case .closing(_, let cause) = phase {
            // Ended while the create was on the wire: close what came back, then be idle.
            if case .success(let p) = result {
                switch CallCreateResult.validate(p) {
                case .success(let grant): c.sessionId = grant.voiceSessionId
                case .failure(let r): c.sessionId = r.voiceSessionId
                }
            }
            phase = .closing(c, cause)
            closeSession(c, nowMs: nowMs, out: &out)
            return
        }
        switch result {
        case .failure(let f):
            phase = .creating(c)
            if f.code == "NOT_SUPPORTED" || (f.code == "INVALID_REQUEST" && f.message.contains("unexpected property")) {
                let why = "talk.client.create: \(f.code): \(f.message)"
                out.append(.upgradeRequired(why))
                failBeforeConnect(c, .upgradeRequired(why), nowMs: nowMs, out: &out)
            } else if f.code == "UNAVAILABLE" {
                failBeforeConnect(c, .unavailable(f.message), nowMs: nowMs, out: &out)
            } else {
                end(.setupFailed("talk.client.create: \(f.code): \(f.message)"), nowMs: nowMs, out: &out)
            }
        case .success(let payload):
            switch CallCreateResult.validate(payload) {
            case .failure(let r):
                c.sessionId = r.voiceSessionId
                phase = .creating(c)
                let why = "gateway upgrade required: \(r.reason)"
                out.append(.upgradeRequired(why))
                failBeforeConnect(c, .upgradeRequired(why), nowMs: nowMs, out: &out)
            case .success(let grant):
                c.sessionId = grant.voiceSessionId
                c.deadlineMs = nowMs + settings.connectTimeoutMs
                phase = .offering(c)
                out.append(.postOffer(callId: id, grant))
            }
        }
    }

    private mutating func relayCreated(_ id: String, _ result: Result<String, Failure>, nowMs: Int64, out: inout [Action]) {
        guard let c0 = phase.call, c0.id == id, c0.path == .relay, c0.awaitingCreate else { return }
        var c = c0
        c.awaitingCreate = false
        if case .closing(_, let cause) = phase {
            c.sessionId = try? result.get()
            phase = .closing(c, cause)
            closeSession(c, nowMs: nowMs, out: &out)
            return
        }
        switch result {
        case .failure(let f):
            phase = .creating(c)
            end(.setupFailed("talk.session.create (relay): \(f.code): \(f.message)"), nowMs: nowMs, out: &out)
        case .success(let sid):
            c.sessionId = sid
            c.connectedAtMs = nowMs
            c.lastActivityMs = nowMs
            c.deadlineMs = Int64.max
            phase = .connected(c)
            out.append(.callStarted(callId: id, .relay))
        }
    }

    private mutating func link(_ id: String, _ event: LinkEvent, nowMs: Int64, out: inout [Action]) {
        guard let c0 = phase.call, c0.id == id, c0.path == .webrtc else { return }
        switch (phase, event) {
        case (.offering(var c), .connected):
            c.connectedAtMs = nowMs
            c.lastActivityMs = nowMs
            c.deadlineMs = Int64.max
            phase = .connected(c)
            out.append(.callStarted(callId: id, .webrtc))
        case (.offering(let c), .failed(let why)): failBeforeConnect(c, .linkFailed(why), nowMs: nowMs, out: &out)
        case (.offering(let c), .disconnected): failBeforeConnect(c, .linkDisconnected, nowMs: nowMs, out: &out)
        case (.connected, .failed(let why)): end(.linkFailed(why), nowMs: nowMs, out: &out)
        case (.connected, .disconnected): end(.linkDisconnected, nowMs: nowMs, out: &out)
        default: break
        }
    }

    private mutating func tick(nowMs: Int64, out: inout [Action]) {
        switch phase {
        case .idle: break
        case .creating(let c) where nowMs >= c.deadlineMs:
            // A create still on the wire is closed if its result comes in while closing.
            end(.timedOut(c.target == nil ? "no session for the call" : "no create result"), nowMs: nowMs, out: &out)
        case .offering(let c) where nowMs >= c.deadlineMs: failBeforeConnect(c, .timedOut("the WebRTC link did not connect"), nowMs: nowMs, out: &out)
        case .connected(let c) where nowMs >= c.lastActivityMs + settings.idleTimeoutMs: end(.idleTimeout, nowMs: nowMs, out: &out)
        case .closing(let c, _) where nowMs >= c.deadlineMs:
            out.append(.log("the close of call \(c.id) did not finish in \(settings.closeTimeoutMs) ms; the call is over anyway"))
            finishClosing(nowMs: nowMs, out: &out)
        default: break
        }
    }

    // MARK: ending

    /// WebRTC failed before it connected: the relay, when the gateway offers it, else the end.
    private mutating func failBeforeConnect(_ call: Call, _ cause: EndCause, nowMs: Int64, out: inout [Action]) {
        guard call.path == .webrtc, settings.fallbackToRelay, offer.relay, let target = call.target, !call.awaitingCreate else {
            end(cause, nowMs: nowMs, out: &out)
            return
        }
        out.append(.log("call \(call.id): WebRTC failed before it connected (\(cause.name)); taking the gateway relay"))
        out.append(.stopMedia(callId: call.id))
        // The WebRTC session is closed on the side; its `closed` report is not waited for.
        if let sid = call.sessionId { out.append(.closeClient(callId: call.id, sessionKey: target.sessionKey, voiceSessionId: sid)) }
        var c = call
        c.path = .relay
        c.sessionId = nil
        c.awaitingCreate = true
        c.deadlineMs = nowMs + settings.setupTimeoutMs
        phase = .creating(c)
        out.append(.openRelay(callId: c.id, target))
    }

    /// Every end goes here once: media off first, then the close of the gateway's session.
    private mutating func end(_ cause: EndCause, nowMs: Int64, out: inout [Action]) {
        guard var c = phase.call, isLive else { return }
        out.append(.stopMedia(callId: c.id))
        out.append(.callEnded(callId: c.id, c.path, cause))
        c.deadlineMs = nowMs + settings.closeTimeoutMs
        phase = .closing(c, cause)
        if !c.awaitingCreate { closeSession(c, nowMs: nowMs, out: &out) }
    }

    private mutating func closeSession(_ c: Call, nowMs: Int64, out: inout [Action]) {
        guard let sid = c.sessionId, let target = c.target else { finishClosing(nowMs: nowMs, out: &out); return }
        switch c.path {
        case .webrtc: out.append(.closeClient(callId: c.id, sessionKey: target.sessionKey, voiceSessionId: sid))
        case .relay: out.append(.closeRelay(callId: c.id, sessionId: sid))
        }
    }

    private mutating func finishClosing(nowMs: Int64, out: inout [Action]) {
        phase = .idle
        if let q = queuedStart {
            queuedStart = nil
            start(token: q.token, origin: q.origin, callId: q.callId, nowMs: nowMs, out: &out)
        }
    }
}
