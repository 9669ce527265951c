// ConnectionMachine, transition by transition: the handshake, liveness and reconnect. Explicit
// clock values and random numbers, no sleeps, no sockets. Rejections, failures and ReconnectBackoff
// are in ConnectionMachineFailureTests.swift.

import Testing
import ClawvoiceCore
import GatewayProtocol

// MARK: - Handshake

@Suite struct `Connection machine: handshake` {
    @Test func `start opens the socket`() {
        var d = ConnectionDriver()
        #expect(d.phase == .idle)
        #expect(d.send(.start) == [.openSocket])
        #expect(d.phase == .opening)
    }

    @Test func `a challenge while opening sends connect with the v3 signature`() {
        var d = ConnectionDriver()
        d.send(.start)
        #expect(d.send(.challenge(challenge), at: 1_200) == [.sendConnect(challenge, .v3)])
        #expect(d.phase == .handshaking)
        #expect(d.machine.signatureVersion == .v3)
    }

    @Test func `hello-ok connects and takes the tick interval from the gateway`() {
        var d = ConnectionDriver()
        d.toHandshaking()
        let h = hello(tickIntervalMs: 15_000)
        #expect(d.send(.helloOk(h), at: 1_300) == [.connected(h)])
        #expect(d.phase == .connected)
        #expect(d.machine.tickIntervalMs == 15_000)
        #expect(!d.machine.isPairing)
    }

    @Test func `hello-ok resets the backoff`() {
        var d = ConnectionDriver()
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
        var d = ConnectionDriver()
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
        var d = ConnectionDriver()
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
        var d = ConnectionDriver()
        d.toHandshaking()
        let actions = d.send(.socketClosed(code: 1008, reason: "bad"))
        #expect(actions.count == 1)
        #expect(retryDelay(actions) == 500)
    }
}

// MARK: - Liveness and reconnect

@Suite struct `Connection machine: liveness and reconnect` {
    @Test func `the tick watchdog closes with 4000 after more than two tick intervals of silence`() {
        var d = ConnectionDriver()
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
        var d = ConnectionDriver()
        d.toConnected(at: 10_000, tickIntervalMs: 1_000)
        #expect(d.send(.inbound, at: 11_500) == [])
        #expect(d.send(.poll, at: 12_001) == [])
        #expect(d.send(.inbound, at: 13_000) == [])
        #expect(d.poll(through: 15_000) == [])
        #expect(d.phase == .connected)
        #expect(d.send(.poll, at: 15_001).first == .closeSocket(code: 4000, reason: "tick timeout"))
    }

    @Test func `time the process did not run is not counted as the gateway's silence`() {
        var d = ConnectionDriver()
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
        var d = ConnectionDriver()
        d.toConnected(at: 10_000, tickIntervalMs: 1_000)
        #expect(d.poll(through: 11_000) == [])
        #expect(d.send(.poll, at: 13_000) == [.clientStalled(ms: 2_000)])
        // 1.9 s of the stall are not counted: the 2 s of silence allowed end at 13 900.
        #expect(d.poll(through: 13_900) == [])
        #expect(d.send(.poll, at: 14_000).first == .closeSocket(code: 4000, reason: "tick timeout"))
    }

    @Test func `a stall during the handshake moves its deadline, and idle or waiting machines report none`() {
        var d = ConnectionDriver()
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
        var d = ConnectionDriver()
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
        var d = ConnectionDriver()
        d.toConnected()
        let actions = d.send(.socketClosed(code: 1006, reason: ""), random: random)
        #expect(actions.count == 2)
        #expect(actions.first.map(isDisconnected) == true)
        let delay = retryDelay(actions) ?? -1
        #expect(delay == 500 + Int64(500 * 0.2 * random))
        #expect((500...600).contains(delay))
    }

    @Test func `repeated failures double the backoff up to the 30 s cap, and a hello resets it`() {
        var d = ConnectionDriver()
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
        var d = ConnectionDriver()
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
        var d = ConnectionDriver()
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
        var d = ConnectionDriver()
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
        var d = ConnectionDriver()
        d.toConnected()
        #expect(retryDelay(d.send(.socketClosed(code: 1012, reason: ""))) == 500)
        d.toConnected()
        d.send(.shutdownNotice(restartExpectedMs: 10 * 60_000))
        #expect(retryDelay(d.send(.socketClosed(code: 1012, reason: ""))) == 30_000)
        d.toConnected()
        #expect(retryDelay(d.send(.socketClosed(code: 1012, reason: ""))) == 500, "the hint is used once")
    }
}
