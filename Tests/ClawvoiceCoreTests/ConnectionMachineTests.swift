// ConnectionMachine, transition by transition: explicit clock values and random numbers,
// no sleeps, no sockets. Also ReconnectBackoff on its own.

import Testing
import ClawvoiceCore
import GatewayProtocol

// MARK: - Helpers

private let challenge = ConnectChallenge(nonce: "nonce-1", ts: 1_737_264_000_000)

private func hello(tickIntervalMs: Int = 15_000) -> HelloOk {
    HelloOk(payload: ["type": "hello-ok", "protocol": 4,
                      "server": ["version": "test", "connId": "c1"],
                      "snapshot": ["sessionDefaults": ["mainSessionKey": "agent:main:main"]],
                      "auth": ["role": "node", "scopes": [], "deviceToken": "dt"],
                      "policy": ["tickIntervalMs": .number(Double(tickIntervalMs))]])!
}

private func rejection(_ code: String, detail: String? = nil, retryAfterMs: Int64? = nil,
                       details extra: [String: JSONValue] = [:], message: String = "rejected") -> ErrorShape {
    var details = extra
    if let detail { details["code"] = .string(detail) }
    return ErrorShape(code: code, message: message, details: details.isEmpty ? nil : .object(details),
                      retryAfterMs: retryAfterMs)
}

/// The delay of the one `.retry` in a batch of actions, or nil when there is none (or several).
private func retryDelay(_ actions: [ConnectionAction]) -> Int64? {
    let delays = actions.compactMap { action -> Int64? in
        if case .retry(let ms, _) = action { return ms }
        return nil
    }
    return delays.count == 1 ? delays[0] : nil
}

private func pausedProblem(_ actions: [ConnectionAction]) -> ConnectionProblem? {
    for case .paused(let problem) in actions { return problem }
    return nil
}

private func isDisconnected(_ action: ConnectionAction) -> Bool {
    if case .disconnected = action { return true }
    return false
}

private func isRetry(_ action: ConnectionAction) -> Bool {
    if case .retry = action { return true }
    return false
}

/// Drives a machine; `now` only moves forward.
private struct Driver {
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

// MARK: - Handshake

@Suite struct `Connection machine: handshake` {
    @Test func `start opens the socket`() {
        var d = Driver()
        #expect(d.phase == .idle)
        #expect(d.send(.start) == [.openSocket])
        #expect(d.phase == .opening)
    }

    @Test func `a challenge while opening sends connect with the v3 signature`() {
        var d = Driver()
        d.send(.start)
        #expect(d.send(.challenge(challenge), at: 1_200) == [.sendConnect(challenge, .v3)])
        #expect(d.phase == .handshaking)
        #expect(d.machine.signatureVersion == .v3)
    }

    @Test func `hello-ok connects and takes the tick interval from the gateway`() {
        var d = Driver()
        d.toHandshaking()
        let h = hello(tickIntervalMs: 15_000)
        #expect(d.send(.helloOk(h), at: 1_300) == [.connected(h)])
        #expect(d.phase == .connected)
        #expect(d.machine.tickIntervalMs == 15_000)
        #expect(!d.machine.isPairing)
    }

    @Test func `hello-ok resets the backoff`() {
        var d = Driver()
        d.send(.start)
        // Three failed attempts grow the backoff to 2 s …
        var delays: [Int64] = []
        for _ in 0..<3 {
            delays.append(retryDelay(d.send(.socketClosed(code: 1006, reason: ""))) ?? -1)
            d.reopenAfterWait()
        }
        #expect(delays == [500, 1_000, 2_000])
        // … a hello-ok brings it back to 500 ms.
        #expect(d.send(.challenge(challenge)) == [.sendConnect(challenge, .v3)])
        #expect(d.send(.helloOk(hello())) == [.connected(hello())])
        #expect(retryDelay(d.send(.socketClosed(code: 1006, reason: ""), at: d.now + 10)) == 500)
    }

    @Test func `no challenge within 6 s closes the socket and retries`() {
        var d = Driver()
        d.send(.start, at: 10_000)
        #expect(d.poll(through: 15_999) == [])
        #expect(d.phase == .opening)
        let actions = d.send(.poll, at: 16_000)
        #expect(actions.first == .closeSocket(code: 1000, reason: "challenge timeout"))
        #expect(retryDelay(actions) == 500)
        #expect(actions.count == 2)
        #expect(d.phase == .waiting(untilMs: 16_500, pairing: false))
        d.reopenAfterWait()
        #expect(d.phase == .opening)
    }

    @Test func `no hello-ok within 30 s of opening closes the socket and retries`() {
        var d = Driver()
        d.send(.start, at: 0)
        d.send(.challenge(challenge), at: 5_000)
        #expect(d.poll(through: 6_000) == [], "the challenge deadline no longer applies")
        #expect(d.poll(through: 29_999) == [])
        let actions = d.send(.poll, at: 30_000)
        #expect(actions.first == .closeSocket(code: 1000, reason: "handshake timeout"))
        #expect(retryDelay(actions) == 500)
        #expect(d.phase == .waiting(untilMs: 30_500, pairing: false))
    }

    @Test func `a socket closed during the handshake retries with backoff`() {
        var d = Driver()
        d.toHandshaking()
        let actions = d.send(.socketClosed(code: 1008, reason: "bad"))
        #expect(actions.count == 1)
        #expect(retryDelay(actions) == 500)
    }
}

// MARK: - Liveness and reconnect

@Suite struct `Connection machine: liveness and reconnect` {
    @Test func `the tick watchdog closes with 4000 after more than two tick intervals of silence`() {
        var d = Driver()
        d.toConnected(at: 10_000, tickIntervalMs: 1_000)
        #expect(d.machine.tickIntervalMs == 1_000)
        #expect(d.send(.poll, at: 11_000) == [])
        #expect(d.send(.poll, at: 12_000) == [], "exactly 2 × tick is still alive")
        let actions = d.send(.poll, at: 12_001, random: 0)
        #expect(actions.count == 3)
        #expect(actions.first == .closeSocket(code: 4000, reason: "tick timeout"))
        #expect(actions.count > 1 && isDisconnected(actions[1]))
        #expect(retryDelay(actions) == 500)
        #expect(d.phase == .waiting(untilMs: 12_501, pairing: false))
    }

    @Test func `inbound frames postpone the tick watchdog`() {
        var d = Driver()
        d.toConnected(at: 10_000, tickIntervalMs: 1_000)
        #expect(d.send(.inbound, at: 11_500) == [])
        #expect(d.send(.poll, at: 12_001) == [])
        #expect(d.send(.inbound, at: 13_000) == [])
        #expect(d.poll(through: 15_000) == [])
        #expect(d.phase == .connected)
        #expect(d.send(.poll, at: 15_001).first == .closeSocket(code: 4000, reason: "tick timeout"))
    }

    @Test func `time the process did not run is not counted as the gateway's silence`() {
        var d = Driver()
        d.toConnected(at: 10_000, tickIntervalMs: 1_000)
        #expect(d.poll(through: 11_500) == [])
        // Nothing ran for 3 s; the gateway's ticks wait unread in the socket.
        #expect(d.send(.poll, at: 14_500) == [.clientStalled(ms: 3_000)], "the stall is reported, the link kept")
        #expect(d.phase == .connected)
        #expect(d.send(.inbound, at: 14_510) == [])
        #expect(d.poll(through: 16_510) == [], "the tick that waited counts from when it was read")
        #expect(d.send(.poll, at: 16_511).first == .closeSocket(code: 4000, reason: "tick timeout"))
    }

    @Test func `a gateway silent across a stall is still dropped, only later by the time lost`() {
        var d = Driver()
        d.toConnected(at: 10_000, tickIntervalMs: 1_000)
        #expect(d.poll(through: 11_000) == [])
        #expect(d.send(.poll, at: 13_000) == [.clientStalled(ms: 2_000)])
        // 1.9 s of the stall are not counted: the 2 s of silence allowed end at 13 900.
        #expect(d.poll(through: 13_900) == [])
        #expect(d.send(.poll, at: 14_000).first == .closeSocket(code: 4000, reason: "tick timeout"))
    }

    @Test func `a stall during the handshake moves its deadline, and idle or waiting machines report none`() {
        var d = Driver()
        #expect(d.send(.poll, at: 1_000) == [])
        #expect(d.send(.poll, at: 9_000) == [], "idle: nothing to report")
        d.send(.start, at: 10_000)
        d.send(.challenge(challenge), at: 10_050)
        #expect(d.poll(through: 20_000) == [])
        #expect(d.send(.poll, at: 45_000) == [.clientStalled(ms: 25_000)], "not a handshake timeout: nothing ran")
        // 10.1 s of the 30 s had passed before the stall; the other 19.9 s run from 45 000.
        #expect(d.poll(through: 64_899) == [])
        #expect(d.send(.poll, at: 64_900).first == .closeSocket(code: 1000, reason: "handshake timeout"))
        guard case .waiting(let until, _) = d.phase else { Issue.record("not waiting: \(d.phase)"); return }
        #expect(d.send(.poll, at: until - 1) == [])
        #expect(d.send(.poll, at: until + 5_000) == [.openSocket], "a late poll out of a wait just opens")
    }

    @Test func `the disconnect reason names the silence and the tick interval`() throws {
        var d = Driver()
        d.toConnected(at: 0, tickIntervalMs: 1_250)
        #expect(d.poll(through: 2_500) == [])
        let actions = d.send(.poll, at: 2_600)
        guard actions.count > 1, case .disconnected(let reason) = actions[1] else {
            Issue.record("no disconnected action: \(actions)")
            return
        }
        #expect(reason.contains("2.6 s"), "\(reason)")
        #expect(reason.contains("1.2 s") || reason.contains("1.25 s"), "\(reason)")
    }

    @Test(arguments: [0.0, 0.3, 0.5, 0.999, 1.0])
    func `a closed socket while connected disconnects and retries after 500 ms plus at most 20 % jitter`(random: Double) {
        var d = Driver()
        d.toConnected()
        let actions = d.send(.socketClosed(code: 1006, reason: ""), random: random)
        #expect(actions.count == 2)
        #expect(actions.first.map(isDisconnected) == true)
        let delay = retryDelay(actions) ?? -1
        #expect(delay == 500 + Int64(500 * 0.2 * random))
        #expect((500...600).contains(delay))
    }

    @Test func `repeated failures double the backoff up to the 30 s cap, and a hello resets it`() {
        var d = Driver()
        d.toConnected()
        var delays: [Int64] = [retryDelay(d.send(.socketClosed(code: 1006, reason: "gone"))) ?? -1]
        for _ in 0..<8 {
            d.reopenAfterWait()
            delays.append(retryDelay(d.send(.socketFailed(message: "connection refused", permanent: false))) ?? -1)
        }
        #expect(delays == [500, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000])
        #expect(!delays.contains { $0 > 30_000 })
        d.toConnected()
        #expect(retryDelay(d.send(.socketClosed(code: 1006, reason: ""))) == 500)
    }

    @Test func `jitter never pushes a delay past the cap`() {
        var d = Driver()
        d.send(.start)
        var delays: [Int64] = []
        for i in 0..<10 {
            delays.append(retryDelay(d.send(.socketClosed(code: nil, reason: ""), random: i.isMultiple(of: 2) ? 0.999 : 0.25)) ?? -1)
            d.reopenAfterWait()
        }
        let nominal: [Int64] = [500, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000, 30_000]
        for (delay, base) in zip(delays, nominal) {
            #expect(delay >= base)
            #expect(delay <= min(30_000, base + base / 5))
        }
    }

    @Test func `a 1012 close after a shutdown notice retries when the restart is expected, not after backoff`() {
        var d = Driver()
        d.toConnected()
        #expect(d.send(.shutdownNotice(restartExpectedMs: 2_000)) == [])
        #expect(d.phase == .connected)
        // With random 0.9 a backoff delay would be 590 ms; the restart hint wins.
        let actions = d.send(.socketClosed(code: 1012, reason: "service restart"), at: d.now + 100, random: 0.9)
        #expect(actions == [.disconnected(reason: "gateway restarting"), .retry(afterMs: 2_000, reason: "gateway restarting")])
        #expect(d.phase == .waiting(untilMs: d.now + 2_000, pairing: false))
        // The backoff is untouched by the orderly restart: the next failure starts at 500 ms.
        d.reopenAfterWait()
        #expect(retryDelay(d.send(.socketClosed(code: 1006, reason: ""))) == 500)
    }

    @Test func `a close with another code after a shutdown notice is still an orderly restart`() {
        // libwebsockets rewrites a received 1012 to 1002, so the notice is what marks the restart.
        var d = Driver()
        d.toConnected()
        d.send(.shutdownNotice(restartExpectedMs: 4_000))
        #expect(d.send(.socketClosed(code: 1002, reason: ""), random: 1) == [.disconnected(reason: "gateway restarting"),
                                                                            .retry(afterMs: 4_000, reason: "gateway restarting")])
        d.toConnected()
        let plain = d.send(.socketClosed(code: 1002, reason: ""), random: 0)
        #expect(plain.first != .disconnected(reason: "gateway restarting"), "the notice applies to one close only")
        #expect(retryDelay(plain) == 500)
    }

    @Test func `a 1012 close without a notice retries after the base delay, and a huge hint is capped`() {
        var d = Driver()
        d.toConnected()
        #expect(retryDelay(d.send(.socketClosed(code: 1012, reason: ""))) == 500)
        d.toConnected()
        d.send(.shutdownNotice(restartExpectedMs: 10 * 60_000))
        #expect(retryDelay(d.send(.socketClosed(code: 1012, reason: ""))) == 30_000)
        d.toConnected()
        #expect(retryDelay(d.send(.socketClosed(code: 1012, reason: ""))) == 500, "the hint is used once")
    }
}

// MARK: - Rejections

@Suite struct `Connection machine: connect rejections` {
    @Test func `NOT_PAIRED reports the request id and polls every 5 s for a minute, then every 30 s, never pausing`() {
        var d = Driver()
        d.toHandshaking(at: 0)
        let notPaired = rejection("NOT_PAIRED", detail: "PAIRING_REQUIRED",
                                  details: ["requestId": "r_7b1c", "reason": "not-paired"],
                                  message: "pairing required: device is not approved yet")
        let first = d.send(.connectRejected(notPaired))
        #expect(first.count == 3)
        #expect(first.first == .closeSocket(code: 1000, reason: "pairing pending"))
        #expect(first.contains(.pairingRequired(PairingRequest(requestId: "r_7b1c", reason: "not-paired",
                                                               message: "pairing required: device is not approved yet"))))
        #expect(retryDelay(first) == 5_000)
        #expect(d.phase == .waiting(untilMs: 5_000, pairing: true))
        #expect(d.machine.isPairing)

        var delays: [(at: Int64, delay: Int64)] = []
        while d.now < 10 * 60_000 {
            d.toHandshaking()
            let at = d.now
            let actions = d.send(.connectRejected(notPaired))
            #expect(pausedProblem(actions) == nil)
            #expect(actions.contains { if case .pairingRequired(let p) = $0 { return p.requestId == "r_7b1c" }; return false })
            delays.append((at, retryDelay(actions) ?? -1))
            if case .paused = d.phase { Issue.record("paused while pairing at \(at)") }
        }
        for (at, delay) in delays {
            #expect(delay == (at < 60_000 ? 5_000 : 30_000), "attempt at \(at) ms")
        }
        #expect(delays.contains { $0.delay == 5_000 })
        #expect(delays.contains { $0.delay == 30_000 })
    }

    @Test func `NOT_PAIRED without a detail code is still pairing, and hello-ok ends it`() {
        var d = Driver()
        d.toHandshaking()
        let actions = d.send(.connectRejected(rejection("NOT_PAIRED", message: "pairing required")))
        #expect(actions.contains(.pairingRequired(PairingRequest(requestId: nil, reason: nil, message: "pairing required"))))
        #expect(d.machine.isPairing)
        d.toConnected()
        #expect(!d.machine.isPairing)
    }

    @Test func `a rejected device token is deleted and retried quickly`() {
        var d = Driver()
        d.toHandshaking()
        let actions = d.send(.connectRejected(rejection("INVALID_REQUEST", detail: "AUTH_DEVICE_TOKEN_MISMATCH")))
        #expect(actions.count == 3)
        #expect(actions.first == .closeSocket(code: 1000, reason: "token revoked"))
        #expect(actions.contains(.deleteStoredToken))
        #expect(retryDelay(actions) == 250)
        #expect(d.phase == .waiting(untilMs: d.now + 250, pairing: false))
    }

    @Test func `an invalid v3 signature retries once with v2, and a second one pauses`() {
        var d = Driver()
        d.toHandshaking()
        let invalid = rejection("INVALID_REQUEST", detail: "DEVICE_AUTH_SIGNATURE_INVALID", message: "device signature invalid")
        let first = d.send(.connectRejected(invalid))
        #expect(first.first == .closeSocket(code: 1000, reason: "retry v2"))
        #expect(retryDelay(first) == 250)
        #expect(d.machine.signatureVersion == .v2)
        d.reopenAfterWait()
        #expect(d.send(.challenge(challenge)) == [.sendConnect(challenge, .v2)])
        let second = d.send(.connectRejected(invalid))
        let problem = pausedProblem(second)
        #expect(problem?.code == "DEVICE_AUTH_SIGNATURE_INVALID")
        #expect(second.first == .closeSocket(code: 1000, reason: "paused"))
        #expect(retryDelay(second) == nil)
        if let problem { #expect(d.phase == .paused(problem)) }
    }

    struct PauseCase: Sendable, CustomTestStringConvertible {
        var detail: String
        var code: String = "INVALID_REQUEST"
        var details: [String: JSONValue] = [:]
        /// Words the one-line description must contain: what to fix.
        var mentions: [String]
        var testDescription: String { detail }
    }

    static let pauseCases: [PauseCase] = [
        PauseCase(detail: "AUTH_TOKEN_MISMATCH", mentions: ["token"]),
        PauseCase(detail: "AUTH_TOKEN_MISSING", mentions: ["token", "pair"]),
        PauseCase(detail: "AUTH_BOOTSTRAP_TOKEN_INVALID", mentions: ["setup code", "openclaw qr"]),
        PauseCase(detail: "PROTOCOL_MISMATCH", details: ["expectedProtocol": 5], mentions: ["protocol 5", "update"]),
        PauseCase(detail: "AUTH_PASSWORD_MISMATCH", mentions: ["password"]),
    ]

    @Test(arguments: pauseCases)
    func `a rejection retrying cannot fix pauses with a one-line problem naming the fix`(c: PauseCase) throws {
        var d = Driver()
        d.toHandshaking()
        let actions = d.send(.connectRejected(rejection(c.code, detail: c.detail, details: c.details)))
        let problem = try #require(pausedProblem(actions))
        #expect(actions == [.closeSocket(code: 1000, reason: "paused"), .paused(problem)])
        #expect(d.phase == .paused(problem))
        #expect(problem.code == c.detail)
        #expect(!problem.description.contains("\n"))
        #expect(!problem.summary.isEmpty && !problem.nextStep.isEmpty)
        for word in c.mentions {
            #expect(problem.description.contains(word), "\(problem.description)")
        }
        // Paused stays paused however long we wait; only a new start resumes.
        #expect(d.send(.poll, at: d.now + 24 * 3_600_000) == [])
        #expect(d.phase == .paused(problem))
        #expect(d.send(.start) == [.openSocket])
    }

    @Test func `AUTH_RATE_LIMITED waits as asked, clamped to at least 1 s`() {
        var d = Driver()
        d.toHandshaking()
        let actions = d.send(.connectRejected(rejection("INVALID_REQUEST", detail: "AUTH_RATE_LIMITED", retryAfterMs: 500)))
        #expect(actions.first == .closeSocket(code: 1000, reason: "rate limited"))
        #expect(retryDelay(actions) == 1_000)
        d.reopenAfterWait()
        d.send(.challenge(challenge))
        let fromDetails = d.send(.connectRejected(rejection("INVALID_REQUEST", detail: "AUTH_RATE_LIMITED",
                                                            details: ["retryAfterMs": 45_000])))
        #expect(retryDelay(fromDetails) == 45_000)
    }

    @Test func `UNAVAILABLE with retryAfterMs retries when asked without growing the backoff`() {
        var d = Driver()
        d.send(.start)
        #expect(retryDelay(d.send(.socketClosed(code: 1006, reason: ""))) == 500)
        d.reopenAfterWait()
        #expect(retryDelay(d.send(.socketClosed(code: 1006, reason: ""))) == 1_000)
        d.reopenAfterWait()
        d.send(.challenge(challenge))
        let starting = ErrorShape(code: "UNAVAILABLE", message: "gateway starting; retry shortly",
                                  details: ["reason": "startup-sidecars"], retryable: true, retryAfterMs: 3_000)
        let actions = d.send(.connectRejected(starting))
        #expect(actions.first == .closeSocket(code: 1000, reason: "gateway starting"))
        #expect(retryDelay(actions) == 3_000)
        #expect(d.phase == .waiting(untilMs: d.now + 3_000, pairing: false))
        d.reopenAfterWait()
        #expect(retryDelay(d.send(.socketClosed(code: 1006, reason: ""))) == 2_000, "the backoff continues where it was")
    }

    @Test func `an unrecognised rejection retries with backoff`() {
        var d = Driver()
        d.toHandshaking()
        let actions = d.send(.connectRejected(rejection("INVALID_REQUEST", message: "something new")))
        #expect(actions.first == .closeSocket(code: 1000, reason: "rejected"))
        #expect(retryDelay(actions) == 500)
    }
}

// MARK: - Transport failures, deferral, stop, wrong-phase events

@Suite struct `Connection machine: other transitions` {
    @Test func `a permanent socket failure such as a TLS pin mismatch pauses`() throws {
        var d = Driver()
        d.send(.start)
        let actions = d.send(.socketFailed(message: "TLS certificate does not match the pinned fingerprint", permanent: true))
        let problem = try #require(pausedProblem(actions))
        #expect(actions == [.paused(problem)])
        #expect(problem.code == "TRANSPORT")
        #expect(problem.description.contains("pinned fingerprint"))
        #expect(!problem.description.contains("\n"))
        #expect(d.phase == .paused(problem))
        #expect(d.send(.poll, at: d.now + 3_600_000) == [])
    }

    @Test func `a permanent failure while connected disconnects, then pauses`() throws {
        var d = Driver()
        d.toConnected()
        let actions = d.send(.socketFailed(message: "TLS pin mismatch", permanent: true))
        #expect(actions.count == 2)
        #expect(actions.first == .disconnected(reason: "TLS pin mismatch"))
        #expect(pausedProblem(actions) != nil)
    }

    @Test func `a transient socket failure retries with backoff`() {
        var d = Driver()
        d.send(.start)
        let actions = d.send(.socketFailed(message: "connection refused", permanent: false))
        #expect(actions.count == 1)
        #expect(retryDelay(actions) == 500)
    }

    @Test func `a deferred attempt waits, then a poll reopens`() {
        var d = Driver()
        d.send(.start, at: 5_000)
        let actions = d.send(.deferred(reason: "waiting for the node's token handoff"))
        #expect(actions == [.retry(afterMs: 1_000, reason: "waiting for the node's token handoff")])
        #expect(d.phase == .waiting(untilMs: 6_000, pairing: true))
        #expect(d.send(.poll, at: 5_999) == [])
        #expect(d.send(.poll, at: 6_000) == [.openSocket])
        #expect(d.phase == .opening)
    }

    @Test func `a blocked attempt pauses with its problem, and start tries again`() {
        var d = Driver()
        d.send(.start)
        let problem = ConnectionProblem(code: "NO_OPERATOR_TOKEN", summary: "no operator token", nextStep: "pair the operator")
        #expect(d.send(.blocked(problem)) == [.paused(problem)])
        #expect(d.phase == .paused(problem))
        #expect(d.send(.poll, at: 60_000) == [])
        #expect(d.send(.start) == [.openSocket])
    }

    @Test func `start from a wait opens at once`() {
        var d = Driver()
        d.send(.start)
        d.send(.socketClosed(code: 1006, reason: ""))
        #expect(d.send(.start) == [.openSocket])
    }

    @Test func `stop from any phase stops, closing a live socket, and later events are ignored`() throws {
        // Phase → the driver steps that reach it.
        let setups: [(String, (inout Driver) -> Void)] = [
            ("idle", { _ in }),
            ("opening", { $0.send(.start) }),
            ("handshaking", { $0.toHandshaking() }),
            ("connected", { $0.toConnected() }),
            ("waiting", { $0.send(.start); $0.send(.socketClosed(code: 1006, reason: "")) }),
            ("pairing wait", { $0.toHandshaking(); $0.send(.connectRejected(rejection("NOT_PAIRED", detail: "PAIRING_REQUIRED"))) }),
            ("paused", { $0.toHandshaking(); $0.send(.connectRejected(rejection("INVALID_REQUEST", detail: "AUTH_TOKEN_MISMATCH"))) }),
        ]
        let live: Set<String> = ["opening", "handshaking", "connected"]
        for (name, setup) in setups {
            var d = Driver()
            setup(&d)
            let actions = d.send(.stop)
            #expect(actions == (live.contains(name) ? [.closeSocket(code: 1000, reason: "client stopping")] : []), "stop from \(name)")
            #expect(d.phase == .stopped, "stop from \(name)")
            let later: [ConnectionEvent] = [
                .start, .challenge(challenge), .helloOk(hello()), .connectRejected(rejection("NOT_PAIRED")), .inbound,
                .shutdownNotice(restartExpectedMs: 1), .socketClosed(code: 1012, reason: ""),
                .socketFailed(message: "x", permanent: true), .deferred(reason: "x"), .poll, .stop,
            ]
            for event in later {
                #expect(d.send(event, at: d.now + 60_000) == [], "\(event) after stop from \(name)")
                #expect(d.phase == .stopped)
            }
        }
    }

    @Test func `events in the wrong phase are ignored`() {
        var connected = Driver()
        connected.toConnected()
        #expect(connected.send(.challenge(challenge)) == [])
        #expect(connected.send(.helloOk(hello())) == [])
        #expect(connected.send(.connectRejected(rejection("NOT_PAIRED"))) == [])
        #expect(connected.send(.start) == [])
        #expect(connected.send(.deferred(reason: "x")) == [])
        #expect(connected.phase == .connected)

        var opening = Driver()
        opening.send(.start)
        #expect(opening.send(.helloOk(hello())) == [])
        #expect(opening.send(.inbound) == [])
        #expect(opening.send(.start) == [])
        #expect(opening.phase == .opening)

        var handshaking = Driver()
        handshaking.toHandshaking()
        #expect(handshaking.send(.challenge(ConnectChallenge(nonce: "other", ts: 2))) == [])
        #expect(handshaking.phase == .handshaking)

        var idle = Driver()
        for event: ConnectionEvent in [.challenge(challenge), .helloOk(hello()), .inbound, .poll,
                                       .socketClosed(code: 1006, reason: ""), .socketFailed(message: "x", permanent: true),
                                       .deferred(reason: "x"), .connectRejected(rejection("NOT_PAIRED"))] {
            #expect(idle.send(event) == [], "\(event) while idle")
            #expect(idle.phase == .idle)
        }

        var waiting = Driver()
        waiting.send(.start)
        waiting.send(.socketClosed(code: 1006, reason: ""))
        let phase = waiting.phase
        #expect(waiting.send(.socketClosed(code: 1006, reason: "")) == [])
        #expect(waiting.send(.challenge(challenge)) == [])
        #expect(waiting.send(.helloOk(hello())) == [])
        #expect(waiting.phase == phase)
    }
}

// MARK: - ReconnectBackoff

@Suite struct `Reconnect backoff` {
    @Test func `without jitter the delays are 500 ms doubling to a 30 s cap`() {
        var b = ReconnectBackoff()
        let delays = (0..<10).map { _ in b.nextDelayMs(unit: 0) }
        #expect(delays == [500, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000, 30_000])
        #expect(b.failures == 10)
    }

    @Test func `full jitter adds 20 % and still respects the cap`() {
        var b = ReconnectBackoff()
        let delays = (0..<8).map { _ in b.nextDelayMs(unit: 1) }
        #expect(delays == [600, 1_200, 2_400, 4_800, 9_600, 19_200, 30_000, 30_000])
    }

    @Test(arguments: [0.0, 0.01, 0.5, 0.75, 0.999999, 1.0])
    func `any jitter stays between the nominal delay and 120 % of it`(unit: Double) {
        var b = ReconnectBackoff()
        for _ in 0..<12 {
            let nominal = b.nominalDelayMs
            let delay = b.nextDelayMs(unit: unit)
            #expect(delay >= nominal)
            #expect(delay <= min(30_000, nominal + nominal / 5))
        }
    }

    @Test func `out-of-range random numbers are clamped`() {
        var low = ReconnectBackoff()
        #expect(low.nextDelayMs(unit: -3) == 500)
        var high = ReconnectBackoff()
        #expect(high.nextDelayMs(unit: 7) == 600)
    }

    @Test func `reset starts over and many failures do not overflow`() {
        var b = ReconnectBackoff()
        for _ in 0..<1_000 { _ = b.nextDelayMs(unit: 0.5) }
        #expect(b.nominalDelayMs == 30_000)
        #expect(b.nextDelayMs(unit: 1) == 30_000)
        b.reset()
        #expect(b.failures == 0)
        #expect(b.nominalDelayMs == 500)
        #expect(b.nextDelayMs(unit: 0) == 500)
    }
}
