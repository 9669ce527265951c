// ConnectionMachine when things go wrong: connect rejections, transport failures, deferral,
// stop and events in the wrong phase; and ReconnectBackoff on its own. Explicit clock values and
// random numbers, no sleeps, no sockets.

import Testing
import ClawvoiceCore
import GatewayProtocol

// MARK: - Rejections

@Suite struct `Connection machine: connect rejections` {
    @Test func `NOT_PAIRED reports the request id and polls every 5 s for a minute, then every 30 s, never pausing`() {
        var d = ConnectionDriver()
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
        var d = ConnectionDriver()
        d.toHandshaking()
        let actions = d.send(.connectRejected(rejection("NOT_PAIRED", message: "pairing required")))
        #expect(actions.contains(.pairingRequired(PairingRequest(requestId: nil, reason: nil, message: "pairing required"))))
        #expect(d.machine.isPairing)
        d.toConnected()
        #expect(!d.machine.isPairing)
    }

    @Test func `a rejected device token is deleted and retried quickly`() {
        var d = ConnectionDriver()
        d.toHandshaking()
        let actions = d.send(.connectRejected(rejection("INVALID_REQUEST", detail: "AUTH_DEVICE_TOKEN_MISMATCH")))
        #expect(actions.count == 3)
        #expect(actions.first == .closeSocket(code: 1000, reason: "token revoked"))
        #expect(actions.contains(.deleteStoredToken))
        #expect(retryDelay(actions) == 250)
        #expect(d.phase == .waiting(untilMs: d.now + 250, pairing: false))
    }

    @Test func `an invalid v3 signature retries once with v2, and a second one pauses`() {
        var d = ConnectionDriver()
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
        var d = ConnectionDriver()
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
        var d = ConnectionDriver()
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
        var d = ConnectionDriver()
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
        var d = ConnectionDriver()
        d.toHandshaking()
        let actions = d.send(.connectRejected(rejection("INVALID_REQUEST", message: "something new")))
        #expect(actions.first == .closeSocket(code: 1000, reason: "rejected"))
        #expect(retryDelay(actions) == 500)
    }
}

// MARK: - Transport failures, deferral, stop, wrong-phase events

@Suite struct `Connection machine: other transitions` {
    @Test func `a permanent socket failure such as a TLS pin mismatch pauses`() throws {
        var d = ConnectionDriver()
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
        var d = ConnectionDriver()
        d.toConnected()
        let actions = d.send(.socketFailed(message: "TLS pin mismatch", permanent: true))
        #expect(actions.count == 2)
        #expect(actions.first == .disconnected(reason: "TLS pin mismatch"))
        #expect(pausedProblem(actions) != nil)
    }

    @Test func `a transient socket failure retries with backoff`() {
        var d = ConnectionDriver()
        d.send(.start)
        let actions = d.send(.socketFailed(message: "connection refused", permanent: false))
        #expect(actions.count == 1)
        #expect(retryDelay(actions) == 500)
    }

    @Test func `a deferred attempt waits, then a poll reopens`() {
        var d = ConnectionDriver()
        d.send(.start, at: 5_000)
        let actions = d.send(.deferred(reason: "waiting for the node's token handoff"))
        #expect(actions == [.retry(afterMs: 1_000, reason: "waiting for the node's token handoff")])
        #expect(d.phase == .waiting(untilMs: 6_000, pairing: true))
        #expect(d.send(.poll, at: 5_999) == [])
        #expect(d.send(.poll, at: 6_000) == [.openSocket])
        #expect(d.phase == .opening)
    }

    @Test func `a blocked attempt pauses with its problem, and start tries again`() {
        var d = ConnectionDriver()
        d.send(.start)
        let problem = ConnectionProblem(code: "NO_OPERATOR_TOKEN", summary: "no operator token", nextStep: "pair the operator")
        #expect(d.send(.blocked(problem)) == [.paused(problem)])
        #expect(d.phase == .paused(problem))
        #expect(d.send(.poll, at: 60_000) == [])
        #expect(d.send(.start) == [.openSocket])
    }

    @Test func `start from a wait opens at once`() {
        var d = ConnectionDriver()
        d.send(.start)
        d.send(.socketClosed(code: 1006, reason: ""))
        #expect(d.send(.start) == [.openSocket])
    }

    @Test func `stop from any phase stops, closing a live socket, and later events are ignored`() throws {
        // Phase → the driver steps that reach it.
        let setups: [(String, (inout ConnectionDriver) -> Void)] = [
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
            var d = ConnectionDriver()
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
        var connected = ConnectionDriver()
        connected.toConnected()
        #expect(connected.send(.challenge(challenge)) == [])
        #expect(connected.send(.helloOk(hello())) == [])
        #expect(connected.send(.connectRejected(rejection("NOT_PAIRED"))) == [])
        #expect(connected.send(.start) == [])
        #expect(connected.send(.deferred(reason: "x")) == [])
        #expect(connected.phase == .connected)

        var opening = ConnectionDriver()
        opening.send(.start)
        #expect(opening.send(.helloOk(hello())) == [])
        #expect(opening.send(.inbound) == [])
        #expect(opening.send(.start) == [])
        #expect(opening.phase == .opening)

        var handshaking = ConnectionDriver()
        handshaking.toHandshaking()
        #expect(handshaking.send(.challenge(ConnectChallenge(nonce: "other", ts: 2))) == [])
        #expect(handshaking.phase == .handshaking)

        var idle = ConnectionDriver()
        for event: ConnectionEvent in [.challenge(challenge), .helloOk(hello()), .inbound, .poll,
                                       .socketClosed(code: 1006, reason: ""), .socketFailed(message: "x", permanent: true),
                                       .deferred(reason: "x"), .connectRejected(rejection("NOT_PAIRED"))] {
            #expect(idle.send(event) == [], "\(event) while idle")
            #expect(idle.phase == .idle)
        }

        var waiting = ConnectionDriver()
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
