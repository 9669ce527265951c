// Protocol negotiation against released-v3 gateways, as pure decisions: which rejection shapes
// get one retry with 3…3 and which must not (the cases of openclaw-gateway-client
// tests/session.rs @86618145, transcribed as data), and the machine's one-retry rule.

import ClawvoiceCore
import GatewayClient
import GatewayProtocol
import Testing

private func mismatch(_ message: String, _ details: JSONValue?) -> ErrorShape {
    ErrorShape(code: "INVALID_REQUEST", message: message, details: details)
}

@Suite struct `Protocol mismatch shapes` {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var error: ErrorShape
        /// nil: not a protocol mismatch at all.
        var isMismatch: Bool
        var retries: Bool
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        // protocol_fallback_reconnects_once_with_a_fresh_challenge
        Case(name: "current shape, expected 3", error: mismatch("protocol mismatch", ["code": "PROTOCOL_MISMATCH", "expectedProtocol": 3]),
             isMismatch: true, retries: true),
        // protocol_fallback_accepts_released_v3_mismatch_response
        Case(name: "released-v3 shape, no code", error: mismatch("protocol mismatch", ["expectedProtocol": 3]),
             isMismatch: true, retries: true),
        // The full current shape our spec §2.2 documents, naming 3.
        Case(name: "full current details", error: mismatch("protocol mismatch", ["code": "PROTOCOL_MISMATCH", "clientMinProtocol": 4,
             "clientMaxProtocol": 4, "expectedProtocol": 3, "minimumProbeProtocol": 3]), isMismatch: true, retries: true),
        // protocol_fallback_does_not_retry_unstructured_or_unrelated_errors
        Case(name: "PROTOCOL_MISMATCH without a version", error: mismatch("rejected", ["code": "PROTOCOL_MISMATCH"]),
             isMismatch: true, retries: false),
        Case(name: "AUTH_TOKEN_MISMATCH naming protocol 3", error: mismatch("rejected", ["code": "AUTH_TOKEN_MISMATCH", "expectedProtocol": 3]),
             isMismatch: false, retries: false),
        Case(name: "mismatch expecting 4", error: mismatch("protocol mismatch", ["code": "PROTOCOL_MISMATCH", "expectedProtocol": 4]),
             isMismatch: true, retries: false),
        Case(name: "unrelated rejection naming protocol 3", error: mismatch("unrelated rejection", ["expectedProtocol": 3]),
             isMismatch: false, retries: false),
        Case(name: "protocol mismatch with no details", error: mismatch("protocol mismatch", nil), isMismatch: false, retries: false),
    ]

    @Test(arguments: cases)
    func `a rejection is a mismatch and permits the 3…3 retry exactly when the official rule says so`(c: Case) {
        let m = ProtocolMismatch(c.error)
        #expect((m != nil) == c.isMismatch)
        #expect((m?.permitsFallback(to: 3) ?? false) == c.retries)
    }

    @Test(arguments: cases)
    func `the node machine retries once with 3…3 only for the retrying shapes`(c: Case) {
        var m = ConnectionMachine()
        _ = m.handle(.start, nowMs: 0)
        _ = m.handle(.challenge(ConnectChallenge(nonce: "nonce-v4", ts: 1)), nowMs: 1)
        let actions = m.handle(.connectRejected(c.error), nowMs: 2, random: 0)
        if c.retries {
            #expect(actions.first == .closeSocket(code: 1000, reason: "retry protocol 3"))
            #expect(m.protocolFallback)
            #expect(ConnectParams.protocolRange(for: .node, protocolFallback: m.protocolFallback) == 3...3)
            // A fresh socket and challenge: the retry signs the new nonce.
            guard case .waiting(let until, _) = m.phase else { Issue.record("not waiting: \(m.phase)"); return }
            #expect(m.handle(.poll, nowMs: until) == [.openSocket])
            let fresh = ConnectChallenge(nonce: "nonce-v3", ts: 2)
            #expect(m.handle(.challenge(fresh), nowMs: until + 1) == [.sendConnect(fresh, .v3)])
            // protocol_mismatch_after_fallback_is_terminal: a second mismatch, whatever it names, pauses.
            let second = m.handle(.connectRejected(mismatch("protocol mismatch", ["code": "PROTOCOL_MISMATCH", "expectedProtocol": 4])),
                                  nowMs: until + 2)
            guard case .paused(let problem) = m.phase else { Issue.record("not paused: \(m.phase)"); return }
            #expect(second.contains(.paused(problem)))
            #expect(problem.code == "PROTOCOL_MISMATCH" && problem.summary.contains("protocol 4"))
        } else {
            #expect(!m.protocolFallback)
            #expect(!actions.contains(.closeSocket(code: 1000, reason: "retry protocol 3")))
            if c.isMismatch {
                guard case .paused(let problem) = m.phase else { Issue.record("not paused: \(m.phase)"); return }
                #expect(problem.code == "PROTOCOL_MISMATCH")
            }
        }
    }

    @Test func `the operator falls back too: 4…4 first, then 3…3 once (issue 26)`() {
        var m = ConnectionMachine()
        _ = m.handle(.start, nowMs: 0)
        #expect(ConnectParams.protocolRange(for: .operator, protocolFallback: m.protocolFallback) == 4...4)
        _ = m.handle(.challenge(ConnectChallenge(nonce: "n", ts: 1)), nowMs: 1)
        let actions = m.handle(.connectRejected(mismatch("protocol mismatch", ["expectedProtocol": 3])), nowMs: 2)
        #expect(actions.first == .closeSocket(code: 1000, reason: "retry protocol 3"))
        #expect(m.protocolFallback)
        #expect(ConnectParams.protocolRange(for: .operator, protocolFallback: m.protocolFallback) == 3...3)
        // A second mismatch after the fallback still needs a person.
        guard case .waiting(let until, _) = m.phase else { Issue.record("not waiting: \(m.phase)"); return }
        _ = m.handle(.poll, nowMs: until)
        _ = m.handle(.challenge(ConnectChallenge(nonce: "n2", ts: 2)), nowMs: until + 1)
        _ = m.handle(.connectRejected(mismatch("protocol mismatch", ["expectedProtocol": 3])), nowMs: until + 2)
        guard case .paused(let problem) = m.phase else { Issue.record("not paused: \(m.phase)"); return }
        #expect(problem.code == "PROTOCOL_MISMATCH")
    }

    @Test func `after the v3 session ends the next connect offers 3…4 again`() {
        var m = ConnectionMachine()
        _ = m.handle(.start, nowMs: 0)
        _ = m.handle(.challenge(ConnectChallenge(nonce: "a", ts: 1)), nowMs: 1)
        _ = m.handle(.connectRejected(mismatch("protocol mismatch", ["expectedProtocol": 3])), nowMs: 2)
        guard case .waiting(let until, _) = m.phase else { Issue.record("not waiting"); return }
        _ = m.handle(.poll, nowMs: until)
        _ = m.handle(.challenge(ConnectChallenge(nonce: "b", ts: 2)), nowMs: until + 1)
        _ = m.handle(.helloOk(HelloOk(payload: ["type": "hello-ok", "protocol": 3])!), nowMs: until + 2)
        #expect(m.phase == .connected && m.protocolFallback, "the v3 session runs on 3…3")
        _ = m.handle(.socketClosed(code: 1006, reason: ""), nowMs: until + 3, random: 0)
        #expect(!m.protocolFallback, "node_protocol_fallback_…_recovers_to_v4: an upgraded gateway gets v4 next time")
    }
}
