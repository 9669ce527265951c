// `clawvoice doctor` as a real process against a private PulseAudio (tests/audio/pulse-server.sh),
// the loopback gateway and a real daemon: what fails before pairing and with a silent or
// clipping microphone, and that everything passes (exit 0) once the node runs.

import ClawvoiceTesting
import Foundation
import LoopbackGateway
import Testing
import WebSocketTransport

@Suite(.serialized) struct DoctorCLITests {
    /// A sox-made WAV played into cv_mic (whose monitor is the microphone) while doctor listens.
    func playIntoMic(_ pulse: SoundServerProcess, _ scratch: Scratch, _ name: String, _ synth: [String]) throws -> Process {
        let wav = scratch.sub(name + ".wav")
        #expect(try SoundServerProcess.tool("/usr/bin/sox", ["-D", "-n", "-r", "16000", "-c", "1", "-b", "16", wav, "synth", "5"] + synth) == 0)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/paplay")
        p.arguments = ["-s", pulse.server, "-d", "cv_mic", wav]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        return p
    }

    func checks(_ o: Outcome) throws -> [String: [String: Any]] {
        let json = try #require(try JSONSerialization.jsonObject(with: Data(o.stdout.utf8)) as? [String: Any], "\(o)")
        var byId: [String: [String: Any]] = [:]
        for c in json["checks"] as? [[String: Any]] ?? [] {
            let id = c["id"] as? String ?? "?"
            if byId[id] == nil { byId[id] = c }
        }
        return byId
    }

    func ok(_ c: [String: [String: Any]], _ id: String) -> Bool? { c[id]?["ok"] as? Bool }

    @Test func `doctor against a private PulseAudio, the loopback gateway and a running daemon`() async throws {
        var env = try CLIEnvironment()
        let pulse = try await SoundServerProcess.start(in: env.scratch)
        defer { pulse.stop() }
        var c = LoopbackGateway.Configuration()
        c.auth = .token("doctor-token")
        c.autoApprove = true
        let gateway = LoopbackGateway(configuration: c)
        try await gateway.start()
        defer { Task { await gateway.stop() } }
        env.extra["PULSE_SERVER"] = pulse.server
        env.extra["CLAWVOICE_GATEWAY_URL"] = await gateway.url
        env.extra["CLAWVOICE_GATEWAY_TOKEN"] = "doctor-token"

        // Before pairing, no daemon, a silent microphone: exit 1, and each failure says so.
        let before = try await env.run(["doctor", "--json", "--seconds", "1"], timeout: .seconds(30))
        #expect(before.status == 1, "\(before)")
        let b = try checks(before)
        #expect(ok(b, "sound-server") == true && ok(b, "source") == true && ok(b, "sink") == true, "\(before)")
        #expect(ok(b, "mic-level") == false && (b["mic-level"]?["line"] as? String)?.contains("silent") == true, "\(before)")
        #expect(ok(b, "gateway") == true && ok(b, "tls") == true && ok(b, "clock") == true, "\(before)")
        #expect(ok(b, "pairing-node") == false && (b["pairing-node"]?["fix"] as? String)?.hasPrefix("clawvoice pair") == true, "\(before)")
        #expect(ok(b, "daemon") == false && ok(b, "espeak-voice") == true && ok(b, "wake-models") == true && ok(b, "disk") == true, "\(before)")

        // A gateway that is gone: one ✗ line naming it, in the text form.
        let pair = try await env.run(["pair", "--url", await gateway.url, "--token-file", try env.scratch.write("token", "doctor-token"), "--timeout", "20"], timeout: .seconds(25))
        #expect(pair.status == 0, "\(pair)")
        let daemon = try env.spawn(["run"])
        defer { daemon.signal(SIGTERM) }
        let up = try await eventually(.seconds(20)) {
            let s = try await env.run(["status", "--json"], timeout: .seconds(5))
            return s.stdout.contains("\"state\":\"connected\"") && s.stdout.components(separatedBy: "\"state\":\"connected\"").count >= 3
        }
        #expect(up, "daemon did not connect: \(daemon.stderr)")

        // Sound in the microphone, a tone on the speaker, daemon paired and running: all pass.
        let noise = try playIntoMic(pulse, env.scratch, "noise", ["whitenoise", "vol", "0.1"])
        let good = try await env.run(["doctor", "--play", "--seconds", "1"], timeout: .seconds(30))
        noise.terminate()
        #expect(good.status == 0, "\(good)")
        // CLAWVOICE_DOCTOR_CAPTURE=FILE keeps this run's output (the README's and the closing note's capture).
        if let capture = ProcessInfo.processInfo.environment["CLAWVOICE_DOCTOR_CAPTURE"] {
            try? ("$ clawvoice doctor --play --seconds 1\n" + good.stdout + "(exit \(good.status.map(String.init) ?? "?"))\n")
                .write(toFile: capture, atomically: true, encoding: .utf8)
        }
        let lines = good.stdout.split(separator: "\n").map(String.init)
        // First what to do while it listens, then the checks.
        #expect(lines.first?.hasPrefix("Listening to the microphone") == true && lines.first?.contains("for 1 s: speak now") == true, "\(good)")
        #expect(lines.last?.hasPrefix("all ") == true && lines.dropFirst().dropLast().allSatisfy { $0.hasPrefix("✓ ") }, "\(good)")
        for expected in ["✓ microphone hears sound", "✓ played a 1 s tone on cv_speaker", "✓ node: paired and connected",
                         "✓ operator: paired and connected", "✓ clock matches the gateway's", "✓ daemon running (pid \(daemon.pid))",
                         "✓ a wake model for every trigger (openclaw, claude, computer; from the gateway)"] {
            #expect(good.stdout.contains(expected), "missing \(expected): \(good)")
        }

        // A microphone at full scale is clipping.
        let loud = try playIntoMic(pulse, env.scratch, "square", ["square", "440", "vol", "2"])
        let clipped = try await env.run(["doctor", "--json", "--seconds", "1"], timeout: .seconds(30))
        loud.terminate()
        #expect(clipped.status == 1, "\(clipped)")
        let k = try checks(clipped)
        #expect(ok(k, "mic-level") == false && (k["mic-level"]?["line"] as? String)?.contains("clipping") == true, "\(clipped)")
        #expect(k.filter { $0.value["ok"] as? Bool == false }.map(\.key) == ["mic-level"], "\(clipped)")

        // The gateway stops: doctor names it and exits 1.
        await gateway.stop()
        let gone = try await env.run(["doctor", "--seconds", "1"], timeout: .seconds(30))
        #expect(gone.status == 1, "\(gone)")
        #expect(gone.stdout.contains("✗ gateway 127.0.0.1:"), "\(gone)")
        #expect(gone.stdout.contains("→ check that the gateway runs"), "\(gone)")
    }

    @Test func `a wss gateway: the pin that matches passes, another pin fails with the fingerprint to pin`() async throws {
        var env = try CLIEnvironment()
        let cert = env.scratch.sub("gw.pem"), key = env.scratch.sub("gw.key")
        try SelfSignedCertificate.generate(commonName: "127.0.0.1", certPath: cert, keyPath: key)
        let actual = try TLSCertificateFingerprint.sha256Hex(pemFile: cert)
        var c = LoopbackGateway.Configuration()
        c.tlsCertificatePath = cert
        c.tlsKeyPath = key
        let gateway = LoopbackGateway(configuration: c)
        try await gateway.start()
        defer { Task { await gateway.stop() } }
        env.extra["PULSE_SERVER"] = "unix:/nonexistent/clawvoice-no-pulse"
        env.extra["CLAWVOICE_GATEWAY_URL"] = await gateway.url
        for (pin, pass) in [(actual, true), (String(repeating: "0", count: 64), false)] {
            let config = try env.scratch.write("c-\(pass).json5", "{ gateway: { tlsFingerprint: \"\(pin)\" } }")
            let o = try await env.run(["--config", config, "doctor", "--json"], timeout: .seconds(30))
            let k = try checks(o)
            #expect(ok(k, "tls") == pass, "\(o)")
            #expect(ok(k, "sound-server") == false, "\(o)")
            if pass {
                #expect(ok(k, "gateway") == true && ok(k, "clock") == true, "\(o)")
            } else {
                #expect((k["tls"]?["fix"] as? String)?.hasSuffix("--tls-fingerprint \(actual)") == true, "\(o)")
            }
        }
    }
}
