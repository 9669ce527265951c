// `clawvoice events` through a real daemon process on a private PulseAudio and the loopback
// gateway: the JSON lines a subscriber gets for mute, push-to-talk, speech, a sent turn and a
// lost gateway, and the config's event commands with the fields in their environment.

import ClawvoiceTesting
import Foundation
import LoopbackGateway
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite(.serialized) struct EventsCLITests {
    func events(_ p: Spawned) -> [[String: Any]] {
        p.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    @Test func `events stream JSON lines and run the configured commands`() async throws {
        var env = try CLIEnvironment()
        let pulse = try await SoundServerProcess.start(in: env.scratch)
        defer { pulse.stop() }
        var c = LoopbackGateway.Configuration()
        c.auth = .token("events-token")
        c.autoApprove = true
        let gateway = LoopbackGateway(configuration: c)
        try await gateway.start()
        defer { Task { await gateway.stop() } }
        env.extra["PULSE_SERVER"] = pulse.server
        let out = env.scratch.sub("hooks")
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let config = try env.scratch.write("config.json5", """
        { events: { muted: "env | grep ^CLAWVOICE_ | sort > \(out)/muted.env",
                    listeningStarted: "echo \\"$CLAWVOICE_CAPTURE_ID $CLAWVOICE_TRIGGER\\" >> \(out)/started" } }
        """)
        let pair = try await env.run(["pair", "--url", await gateway.url, "--token-file", try env.scratch.write("token", "events-token"), "--timeout", "20"], timeout: .seconds(25))
        #expect(pair.status == 0, "\(pair)")
        let daemon = try env.spawn(["--config", config, "run"])
        defer { daemon.signal(SIGTERM) }
        let up = try await eventually(.seconds(20)) {
            let s = try await env.run(["status", "--json"], timeout: .seconds(5))
            return s.stdout.components(separatedBy: "\"state\":\"connected\"").count >= 3
        }
        #expect(up, "daemon did not connect: \(daemon.stderr)")

        let listener = try env.spawn(["events"])
        let all = try env.spawn(["events", "--filter", "muted,unmuted"])
        // Subscribed once a mute shows up on both (mute and unmute until it does).
        let subscribed = try await eventually(.seconds(10)) {
            _ = try await env.run(["mute"])
            _ = try await env.run(["unmute"])
            return listener.stdout.contains("\"muted\"") && all.stdout.contains("\"muted\"")
        }
        #expect(subscribed, "no muted event: \(listener.stdout) \(listener.stderr)")
        let start = try await env.run(["ptt", "start"], timeout: .seconds(10))
        #expect(start.status == 0, "\(start)")
        let captureId = start.stdout.replacingOccurrences(of: "capture ", with: "").trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try await env.run(["ptt", "cancel"], timeout: .seconds(10)).status == 0)
        #expect(try await env.run(["say", "--local", "hello"], timeout: .seconds(20)).status == 0)
        #expect(try await env.run(["send", "typed turn"], timeout: .seconds(20)).status == 0)
        _ = try await eventually(.seconds(10)) { listener.stdout.contains("\"turnSent\"") }
        await gateway.stop()
        // Both connections report their loss, each in its own time (the node's may come first).
        func disconnectedRoles() -> Set<String> {
            Set(events(listener).filter { $0["event"] as? String == "disconnected" }.compactMap { $0["role"] as? String })
        }
        _ = try await eventually(.seconds(10)) { disconnectedRoles().isSuperset(of: ["node", "operator"]) }

        let got = events(listener)
        let names = got.compactMap { $0["event"] as? String }
        for n in ["muted", "unmuted", "listeningStarted", "listeningStopped", "speaking", "turnSent", "disconnected"] {
            #expect(names.contains(n), "no \(n) in \(names)")
        }
        #expect(got.allSatisfy { ($0["ts"] as? Double ?? 0) > 1_700_000_000_000 })
        let started = got.first { $0["event"] as? String == "listeningStarted" }
        #expect(started?["captureId"] as? String == captureId && started?["trigger"] as? String == "ptt", "\(got)")
        #expect(started?["sessionKey"] as? String == "agent:main:main", "\(got)")
        let stopped = got.first { $0["event"] as? String == "listeningStopped" }
        #expect(stopped?["captureId"] as? String == captureId && stopped?["reason"] as? String == "cancelled")
        let speaking = got.filter { $0["event"] as? String == "speaking" }.compactMap { $0["state"] as? String }
        #expect(speaking.contains("started") && speaking.contains("stopped"), "\(speaking)")
        #expect(got.first { $0["event"] as? String == "turnSent" }?["sessionKey"] as? String == "agent:main:main")
        #expect(disconnectedRoles().contains("operator"), "\(disconnectedRoles())")
        // The filtered subscriber saw only what it asked for.
        #expect(Set(events(all).compactMap { $0["event"] as? String }) == ["muted", "unmuted"], "\(all.stdout)")

        // The commands ran with the fields in their environment.
        let mutedEnv = (try? String(contentsOfFile: out + "/muted.env", encoding: .utf8)) ?? ""
        #expect(mutedEnv.contains("CLAWVOICE_EVENT=muted") && mutedEnv.contains("CLAWVOICE_TS="), "\(mutedEnv)")
        let startedLines = (try? String(contentsOfFile: out + "/started", encoding: .utf8)) ?? ""
        #expect(startedLines == "\(captureId) ptt\n", "\(startedLines)")
        listener.signal(SIGTERM)
        all.signal(SIGTERM)
    }
}
