// stop, mute/unmute and volume as a user runs them: the real CLI against a real daemon on a
// private PulseAudio (tests/audio/pulse-server.sh) and the loopback gateway. The level is read
// back from PulseAudio (pactl list sink-inputs), the mute sound from the speaker's monitor,
// and mute and volume survive a daemon restart.

import ClawvoiceTesting
import Foundation
import LoopbackGateway
import Testing
#if canImport(Glibc)
import Glibc
#endif


@Suite(.serialized) struct ControlsCLITests {
    /// Runs a tool and returns its stdout.
    func output(_ path: String, _ args: [String]) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = args
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = FileHandle.nullDevice
        try p.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    func status(_ env: CLIEnvironment) async throws -> [String: Any]? {
        let o = try await env.run(["status", "--json"], timeout: .seconds(10))
        guard o.status == 0 else { return nil }
        return try? JSONSerialization.jsonObject(with: Data(o.stdout.utf8)) as? [String: Any]
    }

    func connected(_ s: [String: Any]?) -> Bool {
        let sessions = s?["sessions"] as? [String: [String: Any]]
        return sessions?["node"]?["state"] as? String == "connected" && sessions?["operator"]?["state"] as? String == "connected"
    }

    func startDaemon(_ env: CLIEnvironment) async throws -> Spawned {
        let d = try env.spawn(["run"])
        let up = try await eventually(.seconds(20)) { try await connected(status(env)) }
        #expect(up, "daemon did not connect: \(d.stderr)")
        return d
    }

    /// Peak of what cv_speaker played while `body` ran, recorded from its monitor for 2.5 s. The
    /// recorder is started through bash, detached: a parec that is our own child keeps
    /// Foundation.Process from noticing that later children exit.
    func speakerPeak(_ pulse: SoundServerProcess, _ scratch: Scratch, during body: () async throws -> Void) async throws -> Int {
        let raw = scratch.sub("monitor-\(UUID().uuidString.prefix(6)).raw")
        // fds above 2 closed first: the recorder must not hold Foundation's socketpair.
        let cmd = "for fd in $(ls /proc/$$/fd); do [ $fd -gt 2 ] && eval \"exec $fd>&-\" 2>/dev/null; done; timeout -s KILL 2.5 parec -s '\(pulse.server)' -d cv_speaker.monitor --format=s16le --rate=16000 --channels=1 --latency-msec=20 '\(raw)' </dev/null >/dev/null 2>&1 &"
        #expect(try SoundServerProcess.tool("/bin/bash", ["-c", cmd]) == 0)
        try await Task.sleep(for: .milliseconds(400))
        try await body()
        try await Task.sleep(for: .milliseconds(2_400))
        let data = FileManager.default.contents(atPath: raw) ?? Data()
        var peak = 0
        data.withUnsafeBytes { b in
            for s in b.bindMemory(to: Int16.self) { peak = max(peak, abs(Int(s))) }
        }
        return peak
    }

    @Test func `mute, volume and stop against a daemon on a private PulseAudio`() async throws {
        var env = try CLIEnvironment()
        let pulse = try await SoundServerProcess.start(in: env.scratch)
        defer { pulse.stop() }
        var c = LoopbackGateway.Configuration()
        c.auth = .token("controls-token")
        c.autoApprove = true
        let gateway = LoopbackGateway(configuration: c)
        try await gateway.start()
        defer { Task { await gateway.stop() } }
        env.extra["PULSE_SERVER"] = pulse.server
        let pair = try await env.run(["pair", "--url", await gateway.url, "--token-file", try env.scratch.write("token", "controls-token"), "--timeout", "20"], timeout: .seconds(25))
        #expect(pair.status == 0, "\(pair)")
        var daemon = try await startDaemon(env)

        // mute: the mute sound plays, status says so, push-to-talk is refused.
        var muteOut: Outcome?
        let peak = try await speakerPeak(pulse, env.scratch) { muteOut = try await env.run(["mute"]) }
        #expect(muteOut?.status == 0 && muteOut?.stdout.hasPrefix("muted") == true, "\(String(describing: muteOut))")
        #expect(peak > 2_000, "the mute sound reached the speaker (peak \(peak))")
        #expect(try await status(env)?["muted"] as? Bool == true)
        let text = try await env.run(["status"])
        #expect(text.stdout.contains("muted: microphone and wake word off"), "\(text)")
        // One microphone state, and the wake line agrees with it (issue 24).
        #expect(text.stdout.components(separatedBy: "\n  mic ").count == 2, "\(text)")
        #expect(text.stdout.contains("  wake      off while muted") && !text.stdout.contains("listening for"), "\(text)")
        let wakeState = ((try await status(env))?["wake"] as? [String: Any])?["state"] as? String
        #expect(wakeState == nil || wakeState == "muted", "\(String(describing: wakeState))")
        let refused = try await env.run(["ptt", "once"], timeout: .seconds(10))
        #expect(refused.status == 1 && refused.stderr.contains("MUTED"), "\(refused)")

        // volume: set, read back from PulseAudio while speech plays, changed while it plays.
        let set = try await env.run(["volume", "40"])
        #expect(set.status == 0 && set.stdout == "volume 40%\n", "\(set)")
        let long = "This is a long sentence that keeps the speaker busy for several seconds, so that the level can be read and changed while it plays."
        let speaking = try env.spawn(["say", "--local", long])
        let at40 = try await eventually(.seconds(10)) { try output("/usr/bin/pactl", ["-s", pulse.server, "list", "sink-inputs"]).contains("/  40% /") }
        #expect(at40, "pactl never showed our stream at 40%")
        let up = try await env.run(["volume", "+20"])
        #expect(up.stdout == "volume 60%\n", "\(up)")
        let at60 = try await eventually(.seconds(5)) { try output("/usr/bin/pactl", ["-s", pulse.server, "list", "sink-inputs"]).contains("/  60% /") }
        #expect(at60, "the playing stream did not change to 60%")

        // stop: speech ends now, as a barge-in would.
        let stop = try await env.run(["stop"])
        #expect(stop.status == 0 && stop.stdout == "stopped speaking\n", "\(stop)")
        #expect(await speaking.waitForExit(.seconds(5)) == 0, "say did not end after stop: \(speaking.stdout) \(speaking.stderr)")
        let gone = try await eventually(.seconds(3)) { !(try output("/usr/bin/pactl", ["-s", pulse.server, "list", "sink-inputs"]).contains("60%")) }
        #expect(gone, "our stream is still playing after stop")
        #expect(try await env.run(["stop"]).stdout == "nothing was playing\n")

        // Both survive a restart; unmute then lets push-to-talk through to the machine.
        daemon.signal(SIGTERM)
        #expect(await daemon.waitForExit(.seconds(10)) == 0)
        daemon = try await startDaemon(env)
        defer { daemon.signal(SIGTERM) }
        let after = try await status(env)
        #expect(after?["muted"] as? Bool == true && after?["volume"] as? Int == 60, "\(String(describing: after))")
        let unmute = try await env.run(["unmute"])
        #expect(unmute.stdout == "unmuted\n", "\(unmute)")
        #expect(try await status(env)?["muted"] as? Bool == false)
        let start = try await env.run(["ptt", "start"], timeout: .seconds(10))
        #expect(start.status == 0, "\(start)")
        _ = try await env.run(["ptt", "cancel"], timeout: .seconds(10))
        let bad = try await env.run(["volume", "loud"])
        #expect(bad.status == 2 && bad.stderr.contains("volume: give a level from 0 to 150"), "\(bad)")
    }
}
