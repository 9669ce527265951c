// A realtime call through the whole node (issue 23): `clawvoice run` with talk.calls on, a
// private PulseAudio (speech played into cv_mic, the speaker read back from cv_speaker's
// monitor), the loopback gateway brokering the SDP offer to the aiortc peer, which answers
// speech with speech. The gateway's talk.start and `clawvoice call` start calls; push-to-talk
// is refused BUSY during one; `status` shows the path; `clawvoice hangup` and talk.stop end them.

import ClawvoiceTesting
import Synchronization
import Foundation
import GatewayProtocol
import LoopbackGateway
import Realtime
import Testing
import WebSocketTransport
#if canImport(Glibc)
import Glibc
#endif

@Suite(.serialized) struct CallDaemonTests {
    func status(_ env: CLIEnvironment) async throws -> JSONValue? {
        let o = try await env.run(["status", "--json"], timeout: .seconds(10))
        guard o.status == 0 else { return nil }
        return try? JSONCoding.decode(JSONValue.self, from: Data(o.stdout.utf8))
    }

    func callPhase(_ env: CLIEnvironment) async throws -> String? { try await status(env)?["call"]?["phase"]?.stringValue }

    /// The loudest sample cv_speaker played while `body` ran (its monitor recorded for `seconds`).
    func speakerPeak(_ pulse: SoundServerProcess, _ scratch: Scratch, seconds: Double, during body: () async throws -> Void) async throws -> Int {
        let raw = scratch.sub("monitor-\(UUID().uuidString.prefix(6)).raw")
        let cmd = "for fd in $(ls /proc/$$/fd); do [ $fd -gt 2 ] && eval \"exec $fd>&-\" 2>/dev/null; done; timeout -s KILL \(seconds) parec -s '\(pulse.server)' -d cv_speaker.monitor --format=s16le --rate=16000 --channels=1 --latency-msec=20 '\(raw)' </dev/null >/dev/null 2>&1 &"
        #expect(try SoundServerProcess.tool("/bin/bash", ["-c", cmd]) == 0)
        try await Task.sleep(for: .milliseconds(300))
        try await body()
        try await Task.sleep(for: .seconds(seconds))
        let data = FileManager.default.contents(atPath: raw) ?? Data()
        var peak = 0
        data.withUnsafeBytes { b in for s in b.bindMemory(to: Int16.self) { peak = max(peak, abs(Int(s))) } }
        return peak
    }

    @Test(.timeLimit(.minutes(3)))
    func `talk.start and clawvoice call run whole calls through PulseAudio; BUSY during them; hangup and talk.stop end them`() async throws {
        var env = try CLIEnvironment()
        let pulse = try await SoundServerProcess.start(in: env.scratch)
        defer { pulse.stop() }
        var c = LoopbackGateway.Configuration()
        c.auth = .token("call-token")
        c.autoApprove = true
        c.calls = .gatewayControl
        let gateway = LoopbackGateway(configuration: c)
        try await gateway.start()
        defer { Task { await gateway.stop() } }
        var peer = try AiortcPeer()
        let current = Mutex_Peer(peer)
        await gateway.setCallMediaEnd { offer in try await current.value.answer(offer) }
        let origin = try #require(await gateway.callOfferOrigin)
        try FileManager.default.createDirectory(atPath: env.configHome + "/clawvoice", withIntermediateDirectories: true)
        try "{talk: {calls: true, callsHttpOrigin: \"\(origin)\", callsIceAddress: \"127.0.0.1\"}}".write(toFile: env.configHome + "/clawvoice/config.json5", atomically: true, encoding: .utf8)
        env.extra["PULSE_SERVER"] = pulse.server
        let pair = try await env.run(["pair", "--url", await gateway.url, "--token-file", try env.scratch.write("token", "call-token"), "--timeout", "20"], timeout: .seconds(25))
        #expect(pair.status == 0, "\(pair)")
        let daemon = try env.spawn(["run"])
        defer { daemon.signal(SIGTERM) }
        let up = try await eventually(.seconds(20)) {
            let s = try await status(env)
            return s?["sessions"]?["node"]?["state"] == "connected" && s?["sessions"]?["operator"]?["state"] == "connected" && s?["call"]?["phase"] == "idle"
        }
        try #require(up, "the daemon did not connect with calls on: \(daemon.stderr)")

        // 1. The agent calls the room: talk.start through node.invoke.
        let start = try await gateway.invoke(command: "talk.start", paramsJSON: "{}")
        #expect(start.payload == ["started": true], "\(start)")
        let connected = try await eventually(.seconds(30)) { try await callPhase(env) == "connected" }
        try #require(connected, "the call did not connect: \(daemon.stderr)")
        let record = try #require(await gateway.callRecords.first)
        #expect(record.params["capabilities"] == ["gateway-control-v1"] && record.params["sessionKey"] == "agent:main:main")
        let text = try await env.run(["status"])
        #expect(text.stdout.contains("  call      connected over webrtc"), "\(text)")

        // Push-to-talk is refused while the call holds the room.
        let once = try await env.run(["ptt", "once"], timeout: .seconds(10))
        #expect(once.stdout.contains("busy") || once.stderr.contains("BUSY"), "\(once)")
        let ptt = try await env.run(["ptt", "start"], timeout: .seconds(10))
        #expect(ptt.status != 0 && ptt.stderr.contains("BUSY"), "\(ptt)")

        // Speech into the microphone reaches the peer; its answer reaches the speaker.
        let wav = env.scratch.sub("utterance.wav")
        #expect(try SoundServerProcess.tool("/usr/bin/sox", ["-n", "-r", "16000", "-c", "1", "-b", "16", wav, "synth", "0.9", "sine", "180", "sine", "360", "remix", "-", "vol", "0.4", "pad", "0", "0.6"]) == 0)
        var played: Int32 = -1
        let peak = try await speakerPeak(pulse, env.scratch, seconds: 4) {
            played = try SoundServerProcess.tool("/usr/bin/paplay", ["-s", pulse.server, "-d", "cv_mic", wav])
        }
        #expect(played == 0)
        let stats = await peer.stats()
        #expect((stats?["heardVoiceMs"]?.intValue ?? 0) >= 300, "the peer heard \(String(describing: stats))")
        #expect((stats?["playedMs"]?.intValue ?? 0) >= 300, "the peer played \(String(describing: stats))")
        #expect(peak > 2_000, "the peer's answer reached the speaker (peak \(peak))")

        // `clawvoice hangup`: the call ends, the gateway's session is closed with both keys.
        let hang = try await env.run(["hangup"])
        #expect(hang.status == 0 && hang.stdout == "hung up\n", "\(hang)")
        let closed = try await eventually(.seconds(5)) { await gateway.callRecords.first?.closed == true }
        #expect(closed)
        #expect(await gateway.callRecords.first?.closeParams == ["sessionKey": "agent:main:main", "voiceSessionId": .string(record.voiceSessionId)])
        let idle = try await eventually(.seconds(5)) { try await callPhase(env) == "idle" }
        #expect(idle)
        #expect(try await status(env)?["call"]?["lastEnd"]?["cause"] == "hangup")
        #expect(try await env.run(["hangup"]).stdout == "no call was on\n")

        // 2. `clawvoice call` with a fresh peer (its secret is single-use), ended by the gateway's talk.stop.
        peer.stop()
        peer = try AiortcPeer()
        current.set(peer)
        let call = try await env.run(["call"])
        #expect(call.status == 0 && call.stdout.hasPrefix("calling"), "\(call)")
        let again = try await eventually(.seconds(30)) { try await callPhase(env) == "connected" }
        #expect(again, "the second call did not connect: \(daemon.stderr)")
        let stop = try await gateway.invoke(command: "talk.stop", paramsJSON: "{}")
        #expect(stop.payload == ["stopped": true], "\(stop)")
        #expect(try await eventually(.seconds(5)) { try await status(env)?["call"]?["lastEnd"]?["cause"] == "talk.stop" })
        let bad = try await gateway.invoke(command: "talk.start", paramsJSON: "{\"x\":1}")
        #expect(bad.error?.code == "INVALID_PARAMS" && bad.error?.message.contains("talk.start accepts only {}") == true, "\(bad)")

        // 3. The operator socket lost mid-call ends the call (D5), and the node reconnects.
        peer.stop()
        peer = try AiortcPeer()
        current.set(peer)
        #expect(try await env.run(["call"]).status == 0)
        #expect(try await eventually(.seconds(30)) { try await callPhase(env) == "connected" }, "the third call did not connect")
        await gateway.dropAll()
        let lost = try await eventually(.seconds(10)) { try await status(env)?["call"]?["lastEnd"]?["cause"] == "operator-lost" }
        let after = try await status(env)?["call"]
        #expect(lost, "\(String(describing: after))")
        #expect(try await eventually(.seconds(20)) { try await status(env)?["sessions"]?["operator"]?["state"] == "connected" })
        peer.stop()
    }

    /// A wss:// gateway paired with its pin: the offer goes over https to the gateway's host and
    /// the daemon checks the same pin there (the loopback's offer route serves its certificate).
    @Test(.timeLimit(.minutes(2)))
    func `on a wss gateway the call's offer goes over https with the gateway's pin`() async throws {
        var env = try CLIEnvironment()
        let cert = env.scratch.sub("gw.pem"), key = env.scratch.sub("gw.key")
        try SelfSignedCertificate.generate(commonName: "127.0.0.1", certPath: cert, keyPath: key)
        let pin = try TLSCertificateFingerprint.sha256Hex(pemFile: cert)
        var c = LoopbackGateway.Configuration()
        c.auth = .token("call-token")
        c.autoApprove = true
        c.calls = .gatewayControl
        c.tlsCertificatePath = cert
        c.tlsKeyPath = key
        let gateway = LoopbackGateway(configuration: c)
        try await gateway.start()
        defer { Task { await gateway.stop() } }
        let peer = try AiortcPeer()
        defer { peer.stop() }
        await gateway.setCallMediaEnd { offer in try await peer.answer(offer) }
        let origin = try #require(await gateway.callOfferOrigin)
        #expect(origin.hasPrefix("https://127.0.0.1:"))
        try FileManager.default.createDirectory(atPath: env.configHome + "/clawvoice", withIntermediateDirectories: true)
        try "{talk: {calls: true, callsHttpOrigin: \"\(origin)\", callsIceAddress: \"127.0.0.1\"}}".write(toFile: env.configHome + "/clawvoice/config.json5", atomically: true, encoding: .utf8)
        env.extra["PULSE_SERVER"] = "unix:/nonexistent/clawvoice-no-pulse"
        let pair = try await env.run(["pair", "--url", await gateway.url, "--tls-fingerprint", pin,
                                      "--token-file", try env.scratch.write("token", "call-token"), "--timeout", "20"], timeout: .seconds(25))
        #expect(pair.status == 0, "\(pair)")
        let daemon = try env.spawn(["run"])
        defer { daemon.signal(SIGTERM) }
        let up = try await eventually(.seconds(20)) {
            let s = try await status(env)
            return s?["sessions"]?["operator"]?["state"] == "connected" && s?["call"]?["phase"] == "idle"
        }
        try #require(up, "the daemon did not connect over wss: \(daemon.stderr)")
        #expect(try await gateway.invoke(command: "talk.start", paramsJSON: "{}").payload == ["started": true])
        // Connected, or ended (a refused offer ends it before it connects: its reason is in lastEnd).
        _ = try await eventually(.seconds(30)) { let c = try await status(env)?["call"]; return c?["phase"] == "connected" || c?["lastEnd"] != nil }
        let s = try await status(env)?["call"]
        try #require(s?["phase"] == "connected", "the call did not connect over https: \(String(describing: s))")
        let record = try #require(await gateway.callRecords.first)
        #expect(record.secretUsed && record.offersPosted == 1)
        #expect(try await gateway.invoke(command: "talk.stop", paramsJSON: "{}").payload == ["stopped": true])
        #expect(try await eventually(.seconds(5)) { try await status(env)?["call"]?["lastEnd"]?["cause"] == "talk.stop" })
    }
}

/// The peer the gateway's media end answers with (a second call gets a fresh one).
final class Mutex_Peer: @unchecked Sendable {
    private var peer: AiortcPeer
    private let lock = NSLock()
    init(_ p: AiortcPeer) { peer = p }
    var value: AiortcPeer { lock.lock(); defer { lock.unlock() }; return peer }
    func set(_ p: AiortcPeer) { lock.lock(); peer = p; lock.unlock() }
}
