// `clawvoice doctor`'s verdicts as pure functions of the facts: each check passes and fails on
// its own input, with the fix it names.

import Foundation
import GatewayProtocol
import Testing
@testable import CLI
@testable import Daemon
@testable import NodeRuntime

@Suite struct DoctorCheckTests {
    /// Facts for a node where everything is fine.
    static func healthy() -> DoctorFacts {
        var f = DoctorFacts()
        f.soundServer = "unix:/run/user/1000/pulse/native"
        f.sources = ["mic", "speaker.monitor"]
        f.sinks = ["speaker"]
        f.defaultSource = "mic"
        f.defaultSink = "speaker"
        f.mic = MicLevel(seconds: 3, peakDbfs: -18, rmsDbfs: -42, clippedFraction: 0)
        f.voiceAvailable = true
        f.triggers = ["openclaw", "claude"]
        f.triggersFrom = "the gateway"
        f.modelsDirectory = "/usr/local/share/clawvoice/models"
        f.gatewayName = "gw"
        f.gatewayURL = "wss://gw.local:18789"
        f.tlsPin = String(repeating: "ab", count: 32)
        f.probe = .reachable(skewMs: 400)
        f.roles = ["node": .init(hasToken: true, state: "connected"), "operator": .init(hasToken: true, state: "connected")]
        f.controlSocket = "/run/user/1000/clawvoice/control.sock"
        f.daemonPid = 42
        f.stateDir = "/home/pi/.local/state/clawvoice"
        f.freeBytes = 5 << 30
        return f
    }

    func failing(_ f: DoctorFacts) -> [DoctorCheck] { Doctor.checks(f).filter { !$0.ok } }

    @Test func `a healthy node passes every check, one line each`() {
        let checks = Doctor.checks(Self.healthy())
        #expect(checks.allSatisfy { $0.ok }, "\(checks.filter { !$0.ok })")
        #expect(checks.map(\.id) == ["sound-server", "source", "sink", "mic-level", "espeak-voice", "wake-models", "wake-enrolled", "gateway",
                                     "tls", "clock", "pairing-node", "pairing-operator", "daemon", "disk"])
        #expect(Doctor.text(checks).hasSuffix("all 14 checks pass"))
        #expect(checks.allSatisfy { $0.text.hasPrefix("✓ ") && !$0.text.contains("\n") })
        #expect(Doctor.json(checks)["ok"]?.boolValue == true)
    }

    @Test func `the microphone: silent, clipping, and its fix names the configured source`() {
        var f = Self.healthy()
        f.mic = MicLevel.measure([Int16](repeating: 0, count: 48_000), sampleRateHz: 16_000)
        #expect(f.mic?.peakDbfs == -.infinity && f.mic?.seconds == 3)
        #expect(failing(f).map(\.id) == ["mic-level"])
        #expect(failing(f).first?.fix == "unmute it and raise its level: pactl set-source-mute @DEFAULT_SOURCE@ 0; pactl set-source-volume @DEFAULT_SOURCE@ 100%")
        f.configuredSource = "mic"
        f.mic = MicLevel.measure((0..<16_000).map { $0 % 2 == 0 ? Int16.max : Int16.min }, sampleRateHz: 16_000)
        #expect(f.mic?.clippedFraction == 1)
        #expect(failing(f).first?.line.hasPrefix("microphone is clipping (100.0% of samples at full scale") == true)
        #expect(failing(f).first?.fix == "lower its level: pactl set-source-volume mic 60%")
        // Quiet room noise at -50 dBFS peak is sound, not silence.
        f.mic = MicLevel.measure((0..<16_000).map { Int16(($0 % 7) - 3) * 30 }, sampleRateHz: 16_000)
        #expect(failing(f).isEmpty, "\(failing(f))")
    }

    @Test func `a configured source or sink that does not exist lists the ones that do`() {
        var f = Self.healthy()
        f.configuredSink = "hdmi"
        #expect(failing(f).map(\.id) == ["sink"])
        #expect(failing(f).first?.fix == "set audio.sink to one of: speaker (clawvoice audio devices)")
        f.soundError = "Connection refused"
        #expect(failing(f).map(\.id) == ["sound-server"])
    }

    @Test func `doctor says which triggers are enrolled, and how to enroll when none is`() {
        var f = Self.healthy()
        let none = Doctor.checks(f).first { $0.id == "wake-enrolled" }
        #expect(none?.ok == true && none?.text.contains("clawvoice wake enroll TRIGGER") == true, "\(String(describing: none))")
        f.enrolled = ["openclaw", "claude"]
        let some = Doctor.checks(f).first { $0.id == "wake-enrolled" }
        #expect(some?.text.contains("enrolled (tuned to this household's takes): openclaw, claude") == true, "\(String(describing: some))")
        f.wakeEnabled = false
        #expect(!Doctor.checks(f).contains { $0.id == "wake-enrolled" })
    }

    @Test func `missing wake models name the command that trains each`() {
        var f = Self.healthy()
        f.missingModels = ["claude": #"make wake-model TRIGGER="claude""#]
        let bad = failing(f)
        #expect(bad.map(\.id) == ["wake-models"])
        #expect(bad.first?.fix == #"make wake-model TRIGGER="claude", or set wake.modelsDirectory"#)
        f.wakeEnabled = false
        #expect(failing(f).isEmpty)
    }

    @Test func `the gateway: unreachable, pin mismatch, clock skew, plain ws to a remote host`() {
        var f = Self.healthy()
        f.probe = .failed("connect failed: Connection refused")
        #expect(failing(f).map(\.id) == ["gateway"])
        let actual = String(repeating: "cd", count: 32)
        f.probe = .pinMismatch(expected: f.tlsPin!, actual: actual)
        #expect(failing(f).first?.fix == "if the gateway's certificate was replaced on purpose: clawvoice pair --url wss://gw.local:18789 --tls-fingerprint \(actual)")
        f.probe = .reachable(skewMs: -150_000)
        #expect(failing(f).map(\.line) == ["clock is 150.0 s ahead of the gateway's"])
        #expect(failing(f).first?.fix == "sync the clock: sudo timedatectl set-ntp true")
        f.probe = .reachable(skewMs: 120_000)
        #expect(failing(f).isEmpty)
        // A slow exchange blurs the reading by half its time: 2.9 s off in a 6 s exchange is no skew.
        f.probe = .reachable(skewMs: 2_900, roundTripMs: 6_000)
        #expect(Doctor.checks(f).first { $0.id == "clock" } ==
                DoctorCheck("clock", true, "clock matches the gateway's (to ±3.0 s: the exchange took 6.0 s)"))
        f.probe = .reachable(skewMs: 2_900, roundTripMs: 40)
        #expect(Doctor.checks(f).first { $0.id == "clock" }?.line == "clock is 2.9 s behind the gateway's")
        f.probe = .reachable(skewMs: -125_000, roundTripMs: 20_000)
        #expect(failing(f).isEmpty)
        f.probe = .reachable(skewMs: -131_000, roundTripMs: 20_000)
        #expect(failing(f).map(\.line) == ["clock is 131.0 s ahead of the gateway's"])
        f.probe = .reachable(skewMs: 400)
        f.gatewayURL = "ws://192.168.1.5:18789"
        #expect(failing(f).map(\.id) == ["tls"])
        f.gatewayURL = "ws://127.0.0.1:18789"
        #expect(failing(f).isEmpty)
    }

    @Test func `pairing per role: not paired, waiting for approval, paired without the daemon`() {
        var f = Self.healthy()
        f.roles["operator"] = .init(hasToken: false, state: "pairing", detail: "waiting for approval, request r_1",
                                    nextStep: "openclaw devices approve r_1")
        #expect(failing(f).map(\.text) == ["✗ operator: pairing: waiting for approval, request r_1 → openclaw devices approve r_1"])
        f.roles["operator"] = .init(hasToken: false)
        #expect(failing(f).first?.fix == "clawvoice pair <setup-code> (or clawvoice pair --url wss://gw.local:18789 --token-file FILE)")
        f.daemonPid = nil
        f.roles = ["node": .init(hasToken: true), "operator": .init(hasToken: true)]
        #expect(failing(f).map(\.id) == ["daemon"])
        f.gatewayName = nil
        #expect(failing(f).map(\.id) == ["gateway", "daemon"])
    }

    @Test func `disk space and the optional tone`() {
        var f = Self.healthy()
        f.freeBytes = 20 << 20
        #expect(failing(f).map(\.line) == ["20 MB free for the outbox in /home/pi/.local/state/clawvoice"])
        f.freeBytes = 5 << 30
        f.tone = ""
        #expect(Doctor.checks(f).contains { $0.id == "speaker-tone" && $0.ok })
        f.tone = "no such sink"
        #expect(failing(f).map(\.id) == ["speaker-tone"])
    }
}
