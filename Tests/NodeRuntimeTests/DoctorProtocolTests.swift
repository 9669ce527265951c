// Issue 26 in `doctor` and `status`: OPERATOR_ACCESS_DENIED is named as the gateway's access
// policy, not a generic failure (D9), and a protocol-3 session says what it lacks.

import Foundation
import GatewayProtocol
import Testing
@testable import CLI
@testable import Daemon
@testable import NodeRuntime

@Suite struct DoctorProtocolTests {
    func failing(_ f: DoctorFacts) -> [DoctorCheck] { Doctor.checks(f).filter { !$0.ok } }

    @Test func `OPERATOR_ACCESS_DENIED: the access policy grants this device nothing yet, with the fix`() {
        var f = DoctorCheckTests.healthy()
        f.roles["operator"] = .init(hasToken: true, state: "waiting",
                                    detail: "the gateway's access policy grants this device nothing yet (OPERATOR_ACCESS_DENIED); retrying in 4 s",
                                    nextStep: "grant this device operator access in the gateway's access policy; clawvoice keeps retrying and picks it up by itself",
                                    code: "OPERATOR_ACCESS_DENIED")
        let bad = failing(f)
        #expect(bad.map(\.id) == ["pairing-operator"])
        #expect(bad.first?.line == "operator: signed in, but the gateway's access policy grants this device nothing yet (OPERATOR_ACCESS_DENIED)")
        #expect(bad.first?.fix?.contains("accessPolicyPlugin") == true && bad.first?.fix?.contains("keeps retrying") == true)
    }

    @Test func `a protocol-3 session passes pairing and fails protocol with what is lost and how to get it back`() {
        var f = DoctorCheckTests.healthy()
        f.roles["operator"] = .init(hasToken: true, state: "connected", protocolVersion: 3,
                                    limits: ["protocol 3 gateway: replies are read from whole-message snapshots (it sends no deltaText)"])
        let checks = Doctor.checks(f)
        #expect(checks.first { $0.id == "pairing-operator" }?.text == "✓ operator: paired and connected (protocol 3)")
        let bad = failing(f)
        #expect(bad.map(\.id) == ["protocol-operator"])
        #expect(bad.first?.line == "operator works with limits: protocol 3 gateway: replies are read from whole-message snapshots (it sends no deltaText)")
        #expect(bad.first?.fix == "upgrade the gateway to one that speaks protocol 4 to lift these")
        // A malformed Talk config on protocol 4 points at the config instead.
        f.roles["operator"] = .init(hasToken: true, state: "connected", protocolVersion: 4, limits: ["Talk target: talk.agentId …"])
        #expect(failing(f).first?.fix == "fix the gateway's Talk config (talk.agentId, session.mainKey)")
    }

    @Test func `status prints each limit under its role, and the access-policy next step`() {
        let text = CLI.formatStatus(["gateway": ["name": "old", "url": "ws://127.0.0.1:1"], "sessions": [
            "node": ["state": "connected", "detail": "connected to ws://127.0.0.1:1 (protocol 3, degraded)",
                     "limits": ["protocol 3 gateway: it withholds plugin-owned node commands"]],
            "operator": ["state": "waiting", "detail": "the gateway's access policy grants this device nothing yet (OPERATOR_ACCESS_DENIED); retrying in 2 s",
                         "nextStep": "grant this device operator access in the gateway's access policy", "code": "OPERATOR_ACCESS_DENIED"]]])
        #expect(text.contains("  node      connected: connected to ws://127.0.0.1:1 (protocol 3, degraded)\n            ⚠ protocol 3 gateway: it withholds plugin-owned node commands"), "\(text)")
        #expect(text.contains("  operator  waiting: the gateway's access policy grants this device nothing yet (OPERATOR_ACCESS_DENIED); retrying in 2 s\n            → grant this device operator access"), "\(text)")
    }
}
