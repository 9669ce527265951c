// Realtime calls at the node's surface (issue 23): the config keys, `status`'s call line with the
// path the call took, and `doctor`'s "gateway upgrade required" verdict. Pure functions of their input.

import Foundation
import GatewayProtocol
import Testing
@testable import CLI
@testable import Daemon
@testable import NodeRuntime

@Suite struct CallSurfaceTests {
    @Test func `talk.calls and talk.callsHttpOrigin are read; a non-http origin is refused in one line`() throws {
        let c = try ClawConfig.parse(#"{talk: {calls: true, callsHttpOrigin: "http://127.0.0.1:9000", callIdleSeconds: 30}}"#, file: "c.json5")
        #expect(c.talk.calls && c.talk.callsHttpOrigin == "http://127.0.0.1:9000" && c.talk.callIdleSeconds == 30)
        #expect(throws: ConfigError.self) { try ClawConfig.parse("{talk: {callIdleSeconds: 5}}", file: "c.json5") }
        #expect(try ClawConfig.parse("{}", file: "c.json5").talk.calls == false, "calls are off unless asked for")
        do {
            _ = try ClawConfig.parse(#"{talk: {callsHttpOrigin: "ws://x"}}"#, file: "c.json5")
            Issue.record("a ws:// origin was taken")
        } catch {
            #expect("\(error)".contains("'talk.callsHttpOrigin' must be an http:// or https:// origin"), "\(error)")
        }
    }

    @Test func `status shows the call and its path, how the last one ended, and an upgrade the gateway needs`() {
        let base: [String: JSONValue] = ["gateway": ["name": "home", "url": "ws://gw"]]
        var r = base
        r["call"] = ["phase": "connected", "callId": "call-1", "path": "webrtc", "sessionKey": "agent:main:main", "connectedCalls": 1]
        #expect(CLI.formatStatus(.object(r)).contains("  call      connected over webrtc (call-1, session agent:main:main)"))
        r["call"] = ["phase": "idle", "lastEnd": ["callId": "call-1", "path": "webrtc", "cause": "talk.stop"], "connectedCalls": 1]
        #expect(CLI.formatStatus(.object(r)).contains("  call      none; the last (webrtc) ended: talk.stop"))
        r["call"] = ["phase": "idle", "upgradeRequired": "gateway upgrade required: clientControl is not exactly {\"owner\":\"gateway\"}",
                     "lastEnd": ["callId": "c", "path": "webrtc", "cause": "upgrade-required"], "connectedCalls": 0]
        #expect(CLI.formatStatus(.object(r)).contains("⚠ gateway upgrade required: "))
        #expect(!CLI.formatStatus(.object(base)).contains("call"), "no call line with talk.calls off")
    }

    @Test func `doctor says gateway upgrade required when the create result was not gateway-control-v1`() {
        var f = DoctorCheckTests.healthy()
        #expect(!Doctor.checks(f).contains { $0.id == "calls" }, "no call check with calls off")
        f.callsEnabled = true
        #expect(Doctor.checks(f).first { $0.id == "calls" }?.ok == true)
        f.callUpgradeRequired = "gateway upgrade required: clientControl is not exactly {\"owner\":\"gateway\"}"
        let check = Doctor.checks(f).first { $0.id == "calls" }
        #expect(check?.ok == false && check?.line.hasPrefix("calls: gateway upgrade required") == true, "\(String(describing: check))")
        #expect(check?.fix?.contains("gateway-control-v1") == true)
    }

    @Test func `ptt.callKey toggles a call: its binding and its control-socket request`() throws {
        let c = try ClawConfig.parse(#"{ ptt: { muteKey: "KEY_MICMUTE", callKey: "KEY_PHONE" } }"#, file: "c.json5")
        #expect(ControlKeys.bindings(c.ptt).map(\.key) == ["KEY_MICMUTE", "KEY_PHONE"])
        #expect(ControlKeys.bindings(c.ptt).map(\.control) == [.toggleMute, .toggleCall])
        #expect(NodeControl.toggleCall.request == ["cmd": "call", "toggle": true])
    }
}
