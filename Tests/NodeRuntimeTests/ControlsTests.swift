// The controls as values: volume arguments and levels, the socket requests, the key bindings
// (a recorded headset's presses through the real evdev reader), and their config keys.

import Buttons
import ClawvoiceCore
import ClawvoiceTesting
import GatewayClient
import Foundation
import GatewayProtocol
import Talk
import Testing
@testable import CLI
@testable import Daemon
@testable import NodeRuntime

@Suite struct NodeControlTests {
    @Test func `volume arguments, levels and socket requests`() {
        #expect(NodeControl.volumeArgument(nil) == .volume(set: nil, change: nil))
        #expect(NodeControl.volumeArgument("40") == .volume(set: 40, change: nil))
        #expect(NodeControl.volumeArgument("80%") == .volume(set: 80, change: nil))
        #expect(NodeControl.volumeArgument("+10") == .volume(set: nil, change: 10))
        #expect(NodeControl.volumeArgument("-5") == .volume(set: nil, change: -5))
        for bad in ["151", "loud", "+x", ""] { #expect(NodeControl.volumeArgument(bad) == nil, "\(bad)") }
        #expect(NodeControl.level(current: 95, set: nil, change: 10) == 105)
        #expect(NodeControl.level(current: 3, set: nil, change: -5) == 0)
        #expect(NodeControl.level(current: 50, set: 200, change: nil) == 150)
        for c: NodeControl in [.stop, .mute(true), .mute(false), .toggleMute, .volume(set: 30, change: nil), .volume(set: nil, change: -5)] {
            #expect(NodeControl.parse(c.request) == c)
        }
    }

    @Test func `each press of a bound key is one control; releases are not`() async throws {
        let fixture = repositoryRoot().appendingPathComponent("Tests/ButtonsTests/Fixtures/headset-playpause.events").path
        let presses = Locked<[NodeControl]>([])
        let service = try PTTButtonService(recordedEvents: fixture, key: "KEY_PLAYPAUSE", mode: .hold,
                                           onAction: ControlKeys.press(.toggleMute) { c in presses.withLock { $0.append(c) } })
        try service.start()
        defer { service.stop() }
        #expect(await eventually(.seconds(10)) { service.status.state == .finished })
        let downs = try await replayCount(fixture)
        #expect(downs > 0 && presses.withLock { $0 } == Array(repeating: .toggleMute, count: downs))
    }

    /// Presses in the recording: the .start actions a hold-mode reader reports.
    func replayCount(_ path: String) async throws -> Int {
        let starts = Locked(0)
        let s = try PTTButtonService(recordedEvents: path, key: "KEY_PLAYPAUSE", mode: .hold) { if $0 == .start { starts.withLock { $0 += 1 } } }
        try s.start()
        defer { s.stop() }
        _ = await eventually(.seconds(10)) { s.status.state == .finished }
        return starts.withLock { $0 }
    }

    @Test func `ptt control keys and sounds in the config`() throws {
        let c = try ClawConfig.parse("""
        { ptt: { stopKey: "KEY_STOPCD", muteKey: "KEY_MICMUTE", volumeUpKey: "KEY_VOLUMEUP", volumeDownKey: "KEY_VOLUMEDOWN" },
          sounds: { endOfListening: false, error: true } }
        """, file: "c.json5")
        #expect(ControlKeys.bindings(c.ptt).map(\.key) == ["KEY_STOPCD", "KEY_MICMUTE", "KEY_VOLUMEUP", "KEY_VOLUMEDOWN"])
        #expect(ControlKeys.bindings(c.ptt).map(\.control) == [.stop, .toggleMute, .volume(set: nil, change: 5), .volume(set: nil, change: -5)])
        #expect(c.sounds.cues[.endOfListening] == .off && c.sounds.cues[.error] == .generated && c.sounds.cues[.mute] == .generated)
        #expect(throws: ConfigError.self) { try ClawConfig.parse(#"{ sounds: { mute: "/nonexistent.wav" } }"#, file: "c.json5") }
        #expect(throws: ConfigError.self) { try ClawConfig.parse(#"{ sounds: { beep: true } }"#, file: "c.json5") }
    }

    @Test func `an event's JSON line and command environment`() throws {
        let line = NodeEvents.line("listeningStarted", ["captureId": "c1", "sessionKey": "agent:main:main"], ts: 1_764_000_000_000)
        let o = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(o["event"] as? String == "listeningStarted" && o["captureId"] as? String == "c1" && o["ts"] as? Double == 1_764_000_000_000)
        #expect(NodeEvents.environment("listeningStarted", ["captureId": "c1", "sessionKey": "k"], ts: 5)
                == ["CLAWVOICE_EVENT": "listeningStarted", "CLAWVOICE_TS": "5", "CLAWVOICE_CAPTURE_ID": "c1", "CLAWVOICE_SESSION_KEY": "k"])
        let c = try ClawConfig.parse(#"{ events: { wake: "led on", muted: null } }"#, file: "c.json5")
        #expect(c.events.commands == ["wake": "led on"])
        #expect(throws: ConfigError.self) { try ClawConfig.parse(#"{ events: { woke: "x" } }"#, file: "c.json5") }
    }
}
