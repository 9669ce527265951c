// What the connection machine's tests share: a challenge, a hello-ok, a rejection, readers of
// the actions, and a driver whose clock only moves forward.

import Testing
import ClawvoiceCore
import GatewayProtocol

// MARK: - Helpers

let challenge = ConnectChallenge(nonce: "nonce-1", ts: 1_737_264_000_000)

func hello(tickIntervalMs: Int = 15_000) -> HelloOk {
    HelloOk(payload: ["type": "hello-ok", "protocol": 4,
                      "server": ["version": "test", "connId": "c1"],
                      "snapshot": ["sessionDefaults": ["mainSessionKey": "agent:main:main"]],
                      "auth": ["role": "node", "scopes": [], "deviceToken": "dt"],
                      "policy": ["tickIntervalMs": .number(Double(tickIntervalMs))]])!
}

func rejection(_ code: String, detail: String? = nil, retryAfterMs: Int64? = nil,
                       details extra: [String: JSONValue] = [:], message: String = "rejected") -> ErrorShape {
    var details = extra
    if let detail { details["code"] = .string(detail) }
    return ErrorShape(code: code, message: message, details: details.isEmpty ? nil : .object(details),
                      retryAfterMs: retryAfterMs)
}

/// The delay of the one `.retry` in a batch of actions, or nil when there is none (or several).
func retryDelay(_ actions: [ConnectionAction]) -> Int64? {
    let delays = actions.compactMap { action -> Int64? in
        if case .retry(let ms, _) = action { return ms }
        return nil
    }
    return delays.count == 1 ? delays[0] : nil
}

func pausedProblem(_ actions: [ConnectionAction]) -> ConnectionProblem? {
    for case .paused(let problem) in actions { return problem }
    return nil
}

func isDisconnected(_ action: ConnectionAction) -> Bool {
    if case .disconnected = action { return true }
    return false
}

func isRetry(_ action: ConnectionAction) -> Bool {
    if case .retry = action { return true }
    return false
}

/// Drives a machine; `now` only moves forward.
struct ConnectionDriver {
    var machine: ConnectionMachine
    var now: Int64 = 1_000

    init(timing: ConnectionTiming = ConnectionTiming()) { machine = ConnectionMachine(timing: timing) }

    var phase: ConnectionPhase { machine.phase }

    @discardableResult
    mutating func send(_ event: ConnectionEvent, at ms: Int64? = nil, random: Double = 0) -> [ConnectionAction] {
        if let ms { now = ms }
        return machine.handle(event, nowMs: now, random: random)
    }

    /// Polls every `pollIntervalMs`, as the session does, the last one exactly at `ms`; returns every action.
    @discardableResult
    mutating func poll(through ms: Int64, random: Double = 0) -> [ConnectionAction] {
        var actions: [ConnectionAction] = []
        while now < ms {
            actions += send(.poll, at: min(now + machine.timing.pollIntervalMs, ms), random: random)
        }
        return actions
    }

    /// start (or poll out of a wait) → challenge: the machine is handshaking.
    mutating func toHandshaking(at ms: Int64? = nil) {
        if let ms { now = ms }
        let opened: [ConnectionAction]
        switch machine.phase {
        case .idle, .paused: opened = send(.start)
        case .waiting(let until, _):
            now = max(now, until)
            opened = send(.poll)
        default:
            Issue.record("cannot open from \(machine.phase)")
            return
        }
        #expect(opened == [.openSocket])
        #expect(send(.challenge(challenge)) == [.sendConnect(challenge, machine.signatureVersion)])
    }

    mutating func toConnected(at ms: Int64? = nil, tickIntervalMs: Int = 15_000) {
        toHandshaking(at: ms)
        let h = hello(tickIntervalMs: tickIntervalMs)
        #expect(send(.helloOk(h)) == [.connected(h)])
        #expect(machine.phase == .connected)
    }

    /// From a wait, poll at its deadline: the socket reopens.
    mutating func reopenAfterWait() {
        guard case .waiting(let until, _) = machine.phase else {
            Issue.record("not waiting: \(machine.phase)")
            return
        }
        #expect(send(.poll, at: until - 1) == [], "no reopen before the deadline")
        #expect(send(.poll, at: until) == [.openSocket])
    }
}
