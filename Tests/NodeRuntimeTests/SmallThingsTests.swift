// Issue 24, item 4: the small things that made it feel unfinished. Each test failed on the code
// before its fix: `volume -10` was an unknown option; a muted status said "mic muted", then
// "mic running", then "wake listening"; `events` ended with 0 and nothing said when the daemon
// stopped; doctor recorded without a word; `wake listen` showed no level; `clawvoice-bench
// --help` ran the bench.

import ClawvoiceTesting
import Foundation
import LoopbackGateway
import Testing
import GatewayProtocol
@testable import Talk
@testable import CLI
@testable import Daemon
@testable import NodeRuntime
#if canImport(Glibc)
import Glibc
#endif

@Suite struct `Relative volume on the command line` {
    @Test(arguments: [("-10", NodeControl.volume(set: nil, change: -10)), ("+15", .volume(set: nil, change: 15)),
                      ("40", .volume(set: 40, change: nil)), ("-5%", .volume(set: nil, change: -5))])
    func `a level, +N and -N parse as the volume's argument`(arg: String, control: NodeControl) throws {
        let p = try #require(try CLI.parse(["volume", arg]))
        #expect(p.positionals == [arg])
        #expect(NodeControl.volumeArgument(p.positionals.first) == control)
    }

    @Test func `an option that is not a number is still refused`() {
        #expect(throws: CLI.UsageError.self) { try CLI.parse(["volume", "-x"]) }
        #expect(throws: CLI.UsageError.self) { try CLI.parse(["status", "--loud"]) }
    }

    @Test func `volume -10 with no daemon says the daemon is not running, not unknown option`() async throws {
        let o = try await CLIEnvironment().run(["volume", "-10"])
        #expect(o.status == 1, "\(o)")
        #expect(o.stderrLines.count == 1 && !o.stderr.contains("unknown option") && o.stderr.contains("daemon"), "\(o)")
    }
}

@Suite struct `A muted status` {
    static let wake: JSONValue = ["enabled": true, "state": "muted", "muted": true, "triggers": ["openclaw"],
                                  "listening": ["openclaw"], "detections": 0]

    @Test func `says muted once and the wake line agrees`() {
        let text = CLI.formatStatus(["gateway": ["name": "home", "url": "wss://gw"], "muted": true, "capture": "running",
                                     "ptt": "idle", "button": "off", "wake": Self.wake])
        let mic = text.split(separator: "\n").filter { $0.hasPrefix("  mic") }
        #expect(mic == ["  mic       muted: microphone and wake word off (clawvoice unmute)"], "\(text)")
        #expect(!text.contains("running") && !text.contains("listening for"), "\(text)")
        #expect(text.contains("  wake      off while muted (openclaw after `clawvoice unmute`)"), "\(text)")
    }

    @Test func `a muted microphone that lost its sound server says both on one line`() {
        let text = CLI.formatStatus(["gateway": ["name": "home", "url": "wss://gw"], "muted": true,
                                     "capture": "waiting for the sound server", "wake": Self.wake])
        #expect(text.split(separator: "\n").filter { $0.hasPrefix("  mic") }.count == 1, "\(text)")
        #expect(text.contains("muted: microphone and wake word off (clawvoice unmute); capture waiting for the sound server"), "\(text)")
    }

    @Test func `the wake status of a muted node says muted in JSON`() {
        var w = WakeStatus(enabled: true, triggers: ["openclaw"], listening: ["openclaw"], missing: [], error: nil,
                           routing: [:], detections: 0, lastPhrase: nil, lastOutcome: nil)
        #expect(w.json["state"] == "listening")
        w.muted = true
        #expect(w.json["state"] == "muted" && w.json["muted"] == true)
        // Unmuted, the lines are what they were.
        let text = CLI.formatStatus(["gateway": ["name": "home", "url": "wss://gw"], "muted": false, "capture": "running",
                                     "ptt": "idle", "wake": WakeStatus(enabled: true, triggers: ["openclaw"], listening: ["openclaw"],
                                                                       missing: [], error: nil, routing: [:], detections: 0,
                                                                       lastPhrase: nil, lastOutcome: nil).json])
        #expect(text.contains("  mic       running\n") && text.contains("  wake      listening for openclaw"), "\(text)")
    }
}

@Suite(.serialized) struct `Events when the daemon goes away` {
    @Test func `events exits 1 with one line on stderr when the daemon stops`() async throws {
        let (gateway, env, daemon) = try await daemonOnLoopbackGateway(token: "events-gone")
        defer { Task { await gateway.stop() } }
        let up = try await eventually(.seconds(20)) { try await env.run(["status"], timeout: .seconds(5)).status == 0 }
        #expect(up, "daemon never answered: \(daemon.stderr)")
        let listener = try env.spawn(["events"])
        // Subscribed once a mute reaches it.
        let subscribed = try await eventually(.seconds(10)) {
            _ = try await env.run(["mute"])
            _ = try await env.run(["unmute"])
            return listener.stdout.contains("\"muted\"")
        }
        #expect(subscribed, "\(listener.stdout) \(listener.stderr)")
        daemon.signal(SIGTERM)
        #expect(await daemon.waitForExit(.seconds(10)) == 0, "\(daemon.stderr)")
        let status = await listener.waitForExit(.seconds(10))
        #expect(status == 1, "events ended with \(String(describing: status)): \(listener.stderr)")
        let lines = listener.stderr.split(separator: "\n")
        #expect(lines.count == 1 && lines.first?.contains("the daemon went away") == true, "\(listener.stderr)")
    }
}

@Suite struct `Wake listen's level meter` {
    @Test func `on a terminal: a bar redrawn in place, the level and starred scores`() {
        let line = WakeMeter.line(peakDbfs: -30, clipped: false, phrases: ["openclaw", "claude"], scores: [0.02, 0.91],
                                  thresholds: [0.5, 0.5], terminal: true)
        #expect(line.hasPrefix("\r\u{1B}[K[") && !line.contains("\n"), "\(line.debugDescription)")
        #expect(line.contains("[" + String(repeating: "█", count: 10) + String(repeating: "·", count: 10) + "]"), "\(line)")
        #expect(line.hasSuffix(" -30 dBFS  openclaw 0.02  claude 0.91 *"), "\(line)")
    }

    @Test func `elsewhere: one plain line per reading, no control characters`() {
        let line = WakeMeter.line(peakDbfs: -12.4, clipped: false, phrases: ["openclaw"], scores: [0.5], thresholds: [0.5],
                                  terminal: false)
        #expect(line == "level  -12 dBFS  openclaw 0.50 *")
        #expect(WakeMeter.line(peakDbfs: -.infinity, clipped: false, phrases: ["openclaw"], scores: [0], thresholds: [0.5],
                               terminal: false) == "level silent  openclaw 0.00")
        #expect(WakeMeter.detection("{\"phrase\":\"openclaw\"}", terminal: false) == "{\"phrase\":\"openclaw\"}")
        #expect(WakeMeter.detection("{}", terminal: true) == "\r\u{1B}[K{}\n")
    }

    @Test func `the bar spans -60 to 0 dBFS and a full-scale input says CLIP`() {
        #expect(WakeMeter.bar(-.infinity) == "[" + String(repeating: "·", count: 20) + "]")
        #expect(WakeMeter.bar(-90) == WakeMeter.bar(-.infinity))
        #expect(WakeMeter.bar(0) == "[" + String(repeating: "█", count: 20) + "]")
        let loud = WakeMeter.level([100, -32768, 5][...])
        #expect(loud.clipped && loud.peakDbfs == 0)
        let quiet = WakeMeter.level([0, 328, -100][...])
        #expect(!quiet.clipped && abs(quiet.peakDbfs - -40) < 0.1)
        #expect(WakeMeter.level([0, 0][...]).peakDbfs == -.infinity)
        #expect(WakeMeter.line(peakDbfs: 0, clipped: true, phrases: ["a"], scores: [0], thresholds: [1], terminal: false)
                == "level    0 dBFS CLIP  a 0.00")
    }
}

@Suite struct `Doctor says when to speak` {
    @Test func `the prompt names the source and how long`() {
        #expect(DoctorCommand.listeningPrompt(source: "cv_mic.monitor", seconds: 3)
                == "listening to the microphone (cv_mic.monitor) for 3 s: speak now, or make a sound near it…")
        #expect(DoctorCommand.listeningPrompt(source: nil, seconds: 1.5).contains("(the default source) for 1.5 s"))
    }

    @Test func `doctor prompts before it records: on stderr with --json, first on stdout without`() async throws {
        var env = try CLIEnvironment()
        let pulse = try await SoundServerProcess.start(in: env.scratch)
        defer { pulse.stop() }
        env.extra["PULSE_SERVER"] = pulse.server
        let json = try await env.run(["doctor", "--json", "--seconds", "1"], timeout: .seconds(30))
        #expect(json.stderr.contains("speak now") && json.stderr.contains("for 1 s"), "\(json)")
        let doc = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        #expect((doc?["checks"] as? [Any])?.isEmpty == false, "stdout stays one JSON document: \(json)")
        let text = try await env.run(["doctor", "--seconds", "2"], timeout: .seconds(30))
        #expect(text.stdout.hasPrefix("Listening to the microphone ("), "\(text)")
        #expect(text.stdout.split(separator: "\n").first?.contains("for 2 s: speak now") == true, "\(text)")
    }
}

@Suite struct `clawvoice-bench's command line` {
    static func bench() throws -> URL {
        try ExecutableLookup.require().deletingLastPathComponent().appendingPathComponent("clawvoice-bench")
    }

    @Test(arguments: ["--help", "-h"])
    func `--help prints the usage and exits 0 at once`(flag: String) async throws {
        let env = try CLIEnvironment()
        let p = try Spawned([flag], env: env.variables, in: env.scratch, executable: try Self.bench())
        let status = await p.waitForExit(.seconds(10))
        #expect(status == 0, "exit \(String(describing: status)): \(p.stderr.suffix(500))")
        #expect(p.stdout.contains("Usage: clawvoice-bench") && p.stdout.contains("--wake-only") && p.stdout.contains("--echo-check"),
                "\(p.stdout)")
    }

    @Test func `an unknown option is a usage error, not a run`() async throws {
        let env = try CLIEnvironment()
        let p = try Spawned(["--wake-onyl"], env: env.variables, in: env.scratch, executable: try Self.bench())
        #expect(await p.waitForExit(.seconds(10)) == 2)
        #expect(p.stderr.hasPrefix("clawvoice-bench: unknown option --wake-onyl") && p.stderr.contains("Usage:"), "\(p.stderr)")
    }
}
