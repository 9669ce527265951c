// The connection lifecycle of one gateway session as a pure state machine: events in,
// actions out, time as an argument. GatewaySession owns the socket and carries out the actions.

import Foundation
public import GatewayProtocol

/// Which signed payload to send; v2 is the fallback for gateways that only verify v2.
public enum SignatureVersion: String, Sendable, Equatable { case v2, v3 }

/// The gateway's NOT_PAIRED details, enough to tell the person what to approve.
public struct PairingRequest: Sendable, Equatable {
    public var requestId: String?
    public var reason: String?
    public var message: String
    public init(requestId: String?, reason: String?, message: String) {
        self.requestId = requestId
        self.reason = reason
        self.message = message
    }
}

/// Deadlines and poll periods, in milliseconds. Tests shrink them.
public struct ConnectionTiming: Sendable, Equatable {
    public var challengeTimeoutMs: Int64 = 6_000
    public var handshakeTimeoutMs: Int64 = 30_000
    /// Tick interval assumed before hello-ok names one.
    public var defaultTickIntervalMs: Int64 = 30_000
    /// Pairing polls: every 5 s for the first minute, then every 30 s (pending requests expire after 5 min).
    public var pairingPollFastMs: Int64 = 5_000
    public var pairingPollSlowMs: Int64 = 30_000
    public var pairingFastWindowMs: Int64 = 60_000
    /// The quick retry after dropping a revoked token or switching to the v2 signature.
    public var quickRetryMs: Int64 = 250
    /// How often a deferred attempt looks again.
    public var deferPollMs: Int64 = 1_000
    public var backoffBaseMs: Int64 = 500
    public var backoffMaxMs: Int64 = 30_000
    /// How often the session feeds `.poll`. A poll more than `stallMs` after the machine's last
    /// event means this process did not run (an overloaded Pi, swapping, a suspended laptop): that
    /// time is not counted against the gateway, whose frames may be waiting unread in the socket.
    public var pollIntervalMs: Int64 = 100
    public var stallMs: Int64 = 1_000
    public init() {}
}

public enum ConnectionPhase: Sendable, Equatable {
    case idle
    /// Socket opening, waiting for connect.challenge.
    case opening
    /// connect sent, waiting for hello-ok.
    case handshaking
    case connected
    case waiting(untilMs: Int64, pairing: Bool)
    case paused(ConnectionProblem)
    case stopped
}

public enum ConnectionEvent: Sendable, Equatable {
    case start
    case stop
    case challenge(ConnectChallenge)
    case helloOk(HelloOk)
    case connectRejected(ErrorShape)
    /// Any frame after hello-ok: proof the gateway is alive.
    case inbound
    case shutdownNotice(restartExpectedMs: Int64?)
    case socketClosed(code: Int?, reason: String)
    case socketFailed(message: String, permanent: Bool)
    /// This attempt cannot start yet (the operator role waits for the node's token handoff).
    case deferred(reason: String)
    /// This attempt cannot start at all until a person acts (e.g. a setup code that handed over
    /// no operator token): pause with this problem.
    case blocked(ConnectionProblem)
    /// Time passed; deadlines are checked. Fed every `timing.pollIntervalMs` by a driver that
    /// polls (a poll more than `stallMs` after the last event is a stall).
    case poll
    /// The driver slept until `dueMs` (`nextDeadlineMs`, or an earlier wake of its own) and woke
    /// now: deadlines are checked, and waking more than `stallMs` after both `dueMs` and the
    /// last event is a stall. The session sleeps this way instead of polling.
    case wake(dueMs: Int64)
}

public enum ConnectionAction: Sendable, Equatable {
    case openSocket
    case sendConnect(ConnectChallenge, SignatureVersion)
    case closeSocket(code: Int, reason: String)
    case connected(HelloOk)
    case disconnected(reason: String)
    case deleteStoredToken
    case pairingRequired(PairingRequest)
    case retry(afterMs: Int64, reason: String)
    case paused(ConnectionProblem)
    /// A rejection that is retried with backoff but that a person should hear about as what it
    /// is (OPERATOR_ACCESS_DENIED); the `retry` that follows carries on as usual.
    case refused(ConnectionProblem)
    /// The machine saw no event for this long: the process did not run, and the deadlines moved by as much.
    case clientStalled(ms: Int64)
}

public struct ConnectionMachine: Sendable {
    public private(set) var phase: ConnectionPhase = .idle
    public private(set) var signatureVersion: SignatureVersion = .v3
    /// Set after a released-v3 gateway refused the first range: the next connect (on a fresh
    /// socket, with a fresh challenge and signature) offers 3…3. Cleared when a session ends, so
    /// the following reconnect offers the full range again and an upgraded gateway gets v4.
    public private(set) var protocolFallback = false
    /// Whether this session may fall back to protocol 3. Both roles do since issue 26: on a
    /// released-v3 gateway an operator session with less is better than none.
    public var allowsLegacyProtocol = true
    public private(set) var tickIntervalMs: Int64
    public var timing: ConnectionTiming
    private var backoff: ReconnectBackoff
    private var attemptStartMs: Int64 = 0
    private var lastInboundMs: Int64 = 0
    /// When the machine last handled any event: proof this process was running then.
    private var lastEventMs: Int64?
    private var pairingSinceMs: Int64?
    private var restartHintMs: Int64?
    private var sawShutdown = false

    public init(timing: ConnectionTiming = ConnectionTiming()) {
        self.timing = timing
        self.tickIntervalMs = timing.defaultTickIntervalMs
        self.backoff = ReconnectBackoff(baseMs: timing.backoffBaseMs, maxMs: timing.backoffMaxMs)
    }

    public var isPairing: Bool { pairingSinceMs != nil }

    /// Feeds one event. `nowMs` is a monotonic clock; `random` is in 0..<1 for jitter.
    public mutating func handle(_ event: ConnectionEvent, nowMs: Int64, random: Double = 0.5) -> [ConnectionAction] {
        defer { lastEventMs = nowMs }
        switch (event, phase) {
        case (.stop, _):
            let wasLive = isLive
            phase = .stopped
            return wasLive ? [.closeSocket(code: 1000, reason: "client stopping")] : []
        case (_, .stopped):
            return []

        case (.start, .idle), (.start, .paused), (.start, .waiting):
            return open(nowMs)
        case (.start, _):
            return []

        case (.challenge(let c), .opening):
            phase = .handshaking
            return [.sendConnect(c, signatureVersion)]
        case (.challenge, _):
            return []

        case (.helloOk(let hello), .handshaking):
            phase = .connected
            backoff.reset()
            pairingSinceMs = nil
            restartHintMs = nil
            sawShutdown = false
            tickIntervalMs = Int64(max(hello.tickIntervalMs, 1))
            lastInboundMs = nowMs
            return [.connected(hello)]
        case (.helloOk, _):
            return []

        case (.connectRejected(let error), .handshaking), (.connectRejected(let error), .opening):
            return rejected(error, nowMs: nowMs, random: random)
        case (.connectRejected, _):
            return []

        case (.inbound, .connected):
            lastInboundMs = nowMs
            return []
        case (.inbound, _):
            return []

        case (.shutdownNotice(let ms), _):
            restartHintMs = ms
            sawShutdown = true
            return []

        case (.socketClosed(let code, let reason), .connected):
            protocolFallback = false
            // libwebsockets 4.1 rewrites a received 1012–1015 to 1002 before we see it, so the
            // `shutdown` event that precedes the close is what marks an orderly restart.
            let restarting = code == 1012 || sawShutdown
            sawShutdown = false
            let why = restarting ? "gateway restarting" : "connection closed (\(code.map(String.init) ?? "no code")\(reason.isEmpty ? "" : ": \(reason)"))"
            if restarting {
                // An orderly restart: come back as soon as it is expected to be up, not after a long backoff.
                backoff.reset()
                let delay = min(max(restartHintMs ?? timing.backoffBaseMs, timing.backoffBaseMs), timing.backoffMaxMs)
                restartHintMs = nil
                return [.disconnected(reason: why)] + wait(delay, nowMs: nowMs, reason: why, pairing: false)
            }
            return [.disconnected(reason: why)] + retryWithBackoff(nowMs: nowMs, random: random, reason: why)
        case (.socketClosed(let code, let reason), .opening), (.socketClosed(let code, let reason), .handshaking):
            let why = "gateway closed the connection during the handshake (\(code.map(String.init) ?? "no code")\(reason.isEmpty ? "" : ": \(reason)"))"
            return retryWithBackoff(nowMs: nowMs, random: random, reason: why)
        case (.socketClosed, _):
            return []

        case (.socketFailed(let message, let permanent), .opening), (.socketFailed(let message, let permanent), .handshaking),
             (.socketFailed(let message, let permanent), .connected):
            let wasConnected = phase == .connected
            if wasConnected { protocolFallback = false }
            var actions: [ConnectionAction] = wasConnected ? [.disconnected(reason: message)] : []
            if permanent {
                let problem = ConnectionProblem(code: "TRANSPORT", summary: message,
                                                nextStep: "automatic reconnect is paused until the configuration changes")
                phase = .paused(problem)
                actions.append(.paused(problem))
                return actions
            }
            return actions + retryWithBackoff(nowMs: nowMs, random: random, reason: message)
        case (.socketFailed, _):
            return []

        case (.deferred(let reason), .opening):
            return wait(timing.deferPollMs, nowMs: nowMs, reason: reason, pairing: true)
        case (.deferred, _):
            return []

        case (.blocked(let problem), .opening):
            phase = .paused(problem)
            return [.paused(problem)]
        case (.blocked, _):
            return []

        case (.poll, _):
            let stalled = skipStall(nowMs, since: lastEventMs).map { [ConnectionAction.clientStalled(ms: $0)] } ?? []
            return stalled + handlePoll(nowMs: nowMs, random: random)
        case (.wake(let due), _):
            let since = lastEventMs.map { max($0, due) }
            let stalled = skipStall(nowMs, since: since).map { [ConnectionAction.clientStalled(ms: $0)] } ?? []
            return stalled + handlePoll(nowMs: nowMs, random: random)
        }
    }

    /// When the machine next has something to decide without any other event (a handshake
    /// deadline, the tick watchdog, the end of a wait); nil when only an event can move it.
    /// A driver that sleeps until then and feeds `.wake(dueMs:)` needs no poll.
    public var nextDeadlineMs: Int64? {
        switch phase {
        case .opening: return attemptStartMs + timing.challengeTimeoutMs
        case .handshaking: return attemptStartMs + timing.handshakeTimeoutMs
        case .connected: return lastInboundMs + 2 * tickIntervalMs + 1
        case .waiting(let until, _): return until
        case .idle, .paused, .stopped: return nil
        }
    }

    /// A socket is open or opening: the phases whose deadlines run.
    private var isLive: Bool { phase == .opening || phase == .handshaking || phase == .connected }

    /// A poll long after the previous event (a wake long after it was due): the process was not
    /// running. The silence and the attempt's deadlines move by the time lost since the machine
    /// last ran, so frames still unread after a stall are not taken for a dead gateway. Returns
    /// the stall's length when there was one.
    private mutating func skipStall(_ nowMs: Int64, since: Int64?) -> Int64? {
        guard isLive, let since, let last = lastEventMs, nowMs - since > timing.stallMs else { return nil }
        let lost = nowMs - last - timing.pollIntervalMs
        lastInboundMs = min(lastInboundMs + lost, nowMs)
        attemptStartMs = min(attemptStartMs + lost, nowMs)
        return nowMs - since
    }

    private mutating func handlePoll(nowMs: Int64, random: Double) -> [ConnectionAction] {
        switch phase {
        case .opening:
            if nowMs - attemptStartMs >= timing.challengeTimeoutMs {
                let why = "no connect.challenge within \(timing.challengeTimeoutMs / 1000) s"
                return [.closeSocket(code: 1000, reason: "challenge timeout")] + retryWithBackoff(nowMs: nowMs, random: random, reason: why)
            }
            return []
        case .handshaking:
            if nowMs - attemptStartMs >= timing.handshakeTimeoutMs {
                let why = "no hello-ok within \(timing.handshakeTimeoutMs / 1000) s"
                return [.closeSocket(code: 1000, reason: "handshake timeout")] + retryWithBackoff(nowMs: nowMs, random: random, reason: why)
            }
            return []
        case .connected:
            if nowMs - lastInboundMs > 2 * tickIntervalMs {
                protocolFallback = false
                let why = "no frame from the gateway for \(formatSeconds(nowMs - lastInboundMs)) (tick every \(formatSeconds(tickIntervalMs)))"
                return [.closeSocket(code: 4000, reason: "tick timeout"), .disconnected(reason: why)]
                    + retryWithBackoff(nowMs: nowMs, random: random, reason: why)
            }
            return []
        case .waiting(let until, _):
            return nowMs >= until ? open(nowMs) : []
        case .idle, .paused, .stopped:
            return []
        }
    }

    private mutating func open(_ nowMs: Int64) -> [ConnectionAction] {
        phase = .opening
        attemptStartMs = nowMs
        return [.openSocket]
    }

    private mutating func wait(_ delayMs: Int64, nowMs: Int64, reason: String, pairing: Bool) -> [ConnectionAction] {
        phase = .waiting(untilMs: nowMs + delayMs, pairing: pairing)
        return [.retry(afterMs: delayMs, reason: reason)]
    }

    private mutating func retryWithBackoff(nowMs: Int64, random: Double, reason: String) -> [ConnectionAction] {
        wait(backoff.nextDelayMs(unit: random), nowMs: nowMs, reason: reason, pairing: false)
    }

    private mutating func pause(_ problem: ConnectionProblem) -> [ConnectionAction] {
        phase = .paused(problem)
        return [.closeSocket(code: 1000, reason: "paused"), .paused(problem)]
    }

    private mutating func rejected(_ error: ErrorShape, nowMs: Int64, random: Double) -> [ConnectionAction] {
        let detail = error.detailCode ?? ""
        if let mismatch = ProtocolMismatch(error) {
            // One retry with 3…3 on a fresh socket, only for the shape the official node hosts
            // retry on; a mismatch after that retry, or any other mismatch, needs a person.
            if allowsLegacyProtocol && !protocolFallback && mismatch.permitsFallback(to: 3) {
                protocolFallback = true
                return [.closeSocket(code: 1000, reason: "retry protocol 3")]
                    + wait(timing.quickRetryMs, nowMs: nowMs, reason: "gateway speaks protocol 3; retrying with 3", pairing: false)
            }
            return pause(ConnectionMachine.mismatchProblem(mismatch, fellBack: protocolFallback, legacyAllowed: allowsLegacyProtocol))
        }
        if detail == "PAIRING_REQUIRED" || (error.code == "NOT_PAIRED" && detail != "DEVICE_IDENTITY_REQUIRED") {
            let since = pairingSinceMs ?? nowMs
            pairingSinceMs = since
            let delay = nowMs - since < timing.pairingFastWindowMs ? timing.pairingPollFastMs : timing.pairingPollSlowMs
            let request = PairingRequest(requestId: error.details?["requestId"]?.stringValue,
                                         reason: error.details?["reason"]?.stringValue, message: error.message)
            return [.closeSocket(code: 1000, reason: "pairing pending"), .pairingRequired(request)]
                + wait(delay, nowMs: nowMs, reason: "waiting for pairing approval", pairing: true)
        }
        if detail == "OPERATOR_ACCESS_DENIED" || error.code == "OPERATOR_ACCESS_DENIED" {
            // D9 (auth.md @0711ee47): signed in, but the gateway's operator access policy grants
            // nothing yet. Not a credential problem: keep retrying with backoff, so access granted
            // later applies without anyone touching this device.
            let problem = ConnectionProblem(code: "OPERATOR_ACCESS_DENIED",
                                            summary: "the gateway's access policy grants this device nothing yet (OPERATOR_ACCESS_DENIED)",
                                            nextStep: "grant this device operator access in the gateway's access policy; clawvoice keeps retrying and picks it up by itself")
            return [.closeSocket(code: 1000, reason: "access denied"), .refused(problem)]
                + retryWithBackoff(nowMs: nowMs, random: random, reason: problem.summary)
        }
        switch detail {
        case "AUTH_DEVICE_TOKEN_MISMATCH":
            // The stored token was revoked or rotated: forget it, then fall back to shared credentials or pairing.
            return [.closeSocket(code: 1000, reason: "token revoked"), .deleteStoredToken]
                + wait(timing.quickRetryMs, nowMs: nowMs, reason: "device token rejected; retrying without it", pairing: false)
        case "DEVICE_AUTH_SIGNATURE_INVALID" where signatureVersion == .v3:
            // Gateways deployed before v3 verify only v2 payloads: retry once with v2.
            signatureVersion = .v2
            return [.closeSocket(code: 1000, reason: "retry v2")]
                + wait(timing.quickRetryMs, nowMs: nowMs, reason: "v3 signature rejected; retrying with v2", pairing: false)
        case "AUTH_RATE_LIMITED":
            let asked = error.retryAfterMs ?? error.details?["retryAfterMs"]?.intValue ?? 60_000
            let delay = min(max(asked, 1_000), 15 * 60_000)
            return [.closeSocket(code: 1000, reason: "rate limited")]
                + wait(delay, nowMs: nowMs, reason: "gateway rate-limited this device", pairing: false)
        default:
            break
        }
        if let problem = ConnectionMachine.problem(for: error) {
            return pause(problem)
        }
        if error.code == "UNAVAILABLE", let after = error.retryAfterMs {
            // Gateway still starting: come back when it says, without growing the backoff.
            return [.closeSocket(code: 1000, reason: "gateway starting")]
                + wait(min(max(after, 100), timing.backoffMaxMs), nowMs: nowMs, reason: "gateway starting: \(error.message)", pairing: false)
        }
        return [.closeSocket(code: 1000, reason: "rejected")] + retryWithBackoff(nowMs: nowMs, random: random, reason: "connect rejected: \(error)")
    }
}

/// Milliseconds as seconds for a log line: "3 s", "1.5 s".
public func formatSeconds(_ ms: Int64) -> String {
    ms % 1000 == 0 ? "\(ms / 1000) s" : String(format: "%.1f s", Double(ms) / 1000)
}
