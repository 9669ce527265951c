// `clawvoice doctor`, the gathering: asks the sound server, records the microphone, plays a
// tone, starts espeak-ng, reads the store, opens one WebSocket to the gateway for its
// connect.challenge (reachability, TLS pin, clock), asks the daemon, and measures the disk.
// Every verdict is Doctor.checks over what this collected.

import Audio
import ClawvoiceCore
import Foundation
import GatewayCrypto
import GatewayProtocol
import Store
import WakeWord
import WebSocketTransport
import NodeRuntime
import Daemon
#if canImport(Glibc)
import Glibc
#endif

enum DoctorCommand {
    static let command = CLI.Command(
        name: "doctor", abstract: "Check everything the node needs, one line each, with the fix for what fails.",
        usage: "clawvoice doctor [--play] [--json] [--seconds N]",
        details: """
        Checks, one line each (✓ or ✗ and the exact fix): the sound server; the configured source and sink;
        the microphone's level over 3 s (silent? clipping?); with --play, a 1 s tone on the speaker; the
        espeak-ng voice; a wake model for every trigger (the gateway's, through the daemon; else the
        defaults); the gateway answering, its TLS pin, the pairing of each role, the clock against the
        gateway's; the daemon and its control socket; free space for the outbox.
        Exit status 0 only when every check passes.

        Options:
          --play        also play a tone on the speaker
          --json        {"ok":…, "checks":[{"id","ok","line","fix"}]}
          --seconds N   how long to listen to the microphone (default 3)
        """, flags: ["--play": false, "--json": false, "--seconds": true], maxPositionals: 0)

    static func run(_ p: CLI.Parsed, config: ClawConfig, paths: RuntimePaths, environment: [String: String],
                    say: (String) -> Void) async throws -> Int32 {
        var seconds = 3.0
        if let s = p.flags["--seconds"] {
            guard let v = Double(s), v > 0, v <= 30 else { throw CLI.UsageError(description: "doctor: --seconds needs a number from 0 to 30, got \(s)") }
            seconds = v
        }
        let json = p.flags["--json"] != nil
        // The user is told to make a sound before the microphone is recorded; with --json on
        // stderr, so stdout stays one JSON document.
        let prompt: (String) -> Void = json ? { FileHandle.standardError.write(Data("clawvoice: \($0)\n".utf8)) }
                                                 : { say($0.prefix(1).uppercased() + $0.dropFirst()) }
        let facts = await gather(config: config, paths: paths, environment: environment, play: p.flags["--play"] != nil,
                                 seconds: seconds, prompt: prompt)
        let checks = Doctor.checks(facts)
        say(json ? Doctor.json(checks).description : Doctor.text(checks))
        return checks.allSatisfy(\.ok) ? 0 : 1
    }

    static func gather(config: ClawConfig, paths: RuntimePaths, environment: [String: String], play: Bool, seconds: Double,
                       prompt: (String) -> Void = { _ in }) async -> DoctorFacts {
        var f = DoctorFacts()
        f.configuredSource = config.audio.source
        f.configuredSink = config.audio.sink
        f.soundServer = environment["PULSE_SERVER"].flatMap { $0.isEmpty ? nil : $0 } ?? "the default server"
        await gatherSound(&f, play: play, seconds: seconds, prompt: prompt)

        f.voice = config.speech.voice
        do {
            _ = try SpeechSynthesizer.synthesize("ok", settings: VoiceSettings(voice: config.speech.voice))
            let base = String(config.speech.voice.split(separator: "+").first ?? "")
            f.voiceAvailable = SpeechSynthesizer.voices().contains(base)
        } catch {
            f.espeakError = "\(error)"
        }

        // The daemon: its status names the gateway's triggers and each session's state.
        f.controlSocket = paths.controlSocket
        var status: JSONValue?
        do {
            status = try ControlSocketClient.send(["cmd": "status"], path: paths.controlSocket, timeoutSeconds: 5)
            f.daemonPid = status?["pid"]?.intValue.map(Int.init)
            f.callsEnabled = status?["call"]?.objectValue != nil
            f.callUpgradeRequired = status?["call"]?["upgradeRequired"]?.stringValue
        } catch ControlSocketError.daemonNotRunning {
            f.daemonError = "not running"
        } catch {
            f.daemonError = "\(error)"
        }

        f.wakeEnabled = config.wake.enabled
        f.modelsDirectory = config.wake.modelsDirectory ?? WakeModelCatalog.defaultDirectory()
        if let t = status?["wake"]?["triggers"]?.arrayValue?.compactMap(\.stringValue), !t.isEmpty {
            f.triggers = t
            f.triggersFrom = "the gateway"
        } else {
            f.triggers = WakeModelCatalog.defaultPhrases
            f.triggersFrom = status == nil ? "the defaults (the daemon is not running to ask the gateway)" : "the defaults"
        }
        for m in WakeModelCatalog(directory: f.modelsDirectory).resolve(f.triggers).missing { f.missingModels[m.phrase] = m.command }
        f.enrolled = WakeEnrollmentStore(stateDir: paths.stateDir).enrolledPhrases()

        // The gateway, as `run` would pick it, without changing the store.
        f.stateDir = paths.stateDir
        if let store = try? openStore(paths) {
            let record: GatewayRecord?
            if let url = config.gateway.url {
                record = (try? store.gateway(named: GatewayNaming.name(for: url)))
                    ?? GatewayRecord(name: GatewayNaming.name(for: url), url: url, addedAtMs: 0)
            } else {
                record = try? store.activeGateway()
            }
            if var r = record {
                if let pin = config.gateway.tlsFingerprint { r.tlsFingerprint = pin }
                f.gatewayName = r.name
                f.gatewayURL = r.url
                f.tlsPin = r.tlsFingerprint
                f.allowInsecure = r.allowInsecure || config.gateway.allowInsecure
                let roles = Set(((try? store.tokens(gateway: r.name)) ?? []).map(\.role))
                let daemonGateway = status?["gateway"]?["name"]?.stringValue
                for role in ["node", "operator"] {
                    var rf = DoctorFacts.Role(hasToken: roles.contains(role))
                    if daemonGateway == r.name, let s = status?["sessions"]?[role] {
                        rf.state = s["state"]?.stringValue
                        rf.detail = s["detail"]?.stringValue
                        rf.nextStep = s["nextStep"]?.stringValue
                        rf.code = s["code"]?.stringValue
                        rf.protocolVersion = s["protocolVersion"]?.intValue.map(Int.init)
                        rf.limits = s["limits"]?.arrayValue?.compactMap(\.stringValue) ?? []
                    }
                    f.roles[role] = rf
                }
                f.probe = await probe(url: r.url, pin: r.tlsFingerprint, allowInsecure: f.allowInsecure)
            }
        }
        f.freeBytes = freeBytes(near: paths.stateDir)
        return f
    }

    static func gatherSound(_ f: inout DoctorFacts, play: Bool, seconds: Double, prompt: (String) -> Void) async {
        let connection = PulseConnection(clientName: "clawvoice doctor")
        defer { connection.close() }
        do {
            try await connection.waitUntilReady(timeout: .seconds(3))
            let sources = try await connection.sources()
            let sinks = try await connection.sinks()
            f.sources = sources.map(\.name)
            f.sinks = sinks.map(\.name)
            f.defaultSource = sources.first(where: \.isDefault)?.name
            f.defaultSink = sinks.first(where: \.isDefault)?.name
        } catch {
            f.soundError = "\(error)"
            return
        }
        if f.configuredSource == nil || f.sources.contains(f.configuredSource!) {
            prompt(listeningPrompt(source: f.configuredSource ?? f.defaultSource, seconds: seconds))
            do { f.mic = try await recordLevel(connection: connection, source: f.configuredSource, seconds: seconds) } catch {
                f.micError = "\(error)"
            }
        }
        if play {
            do {
                _ = try await PulsePlayback(connection: connection, sink: f.configuredSink).play(tone())
                f.tone = ""
            } catch {
                f.tone = "\(error)"
            }
        }
    }

    /// What doctor says just before it records: where, for how long, and what to do.
    static func listeningPrompt(source: String?, seconds: Double) -> String {
        let howLong = seconds == seconds.rounded() ? String(Int(seconds)) : String(format: "%.1f", seconds)
        return "listening to the microphone (\(source ?? "the default source")) for \(howLong) s: speak now, or make a sound near it…"
    }

    static func recordLevel(connection: PulseConnection, source: String?, seconds: Double) async throws -> MicLevel {
        let capture = PulseCapture(connection: connection, source: source)
        try await capture.start()
        let wanted = Int(seconds * 16_000)
        // Frames stop coming if the server goes away: the timer child's stop() ends the stream.
        let samples = await withTaskGroup(of: Void.self) { group -> [Int16] in
            group.addTask {
                try? await Task.sleep(for: .seconds(seconds + 3))
                if !Task.isCancelled { capture.stop() }
            }
            var samples: [Int16] = []
            samples.reserveCapacity(wanted)
            for await frame in capture.frames {
                samples += frame.pcm.samples
                if samples.count >= wanted { break }
            }
            group.cancelAll()
            return samples
        }
        capture.stop()
        guard samples.count >= wanted / 2 else { throw PulseError.call("record", message: "only \(samples.count / 16) ms of audio arrived in \(Int(seconds)) s") }
        return MicLevel.measure(samples, sampleRateHz: 16_000)
    }

    /// 1 s of 660 Hz at -12 dBFS with 20 ms ramps, 48 kHz mono.
    static func tone() -> PCMBuffer {
        let rate = 48_000, n = rate
        var s = [Int16](repeating: 0, count: n)
        let ramp = rate / 50
        for i in 0..<n {
            let env = min(1, Double(min(i, n - 1 - i)) / Double(ramp))
            s[i] = Int16(8_200 * env * sin(2 * Double.pi * 660 * Double(i) / Double(rate)))
        }
        return PCMBuffer(format: AudioFormat(sampleRateHz: rate, channels: 1), samples: s)
    }

    /// One WebSocket to the gateway, up to its connect.challenge: reachability, the TLS pin,
    /// and the clock (the challenge's ts against ours at the midpoint of the exchange).
    static func probe(url: String, pin: String?, allowInsecure: Bool) async -> DoctorFacts.Probe {
        let client: WebSocketClient
        do {
            client = try WebSocketClient(url: WebSocketURL(parsing: url),
                                         options: WebSocketClientOptions(tlsPinSHA256: pin, allowInsecureRemote: allowInsecure,
                                                                         pingInterval: .zero, connectTimeout: .seconds(5)))
        } catch {
            return .failed("\(error)")
        }
        let start = nowMs()
        client.connect()
        defer { client.close() }
        let result = await withTaskGroup(of: DoctorFacts.Probe?.self) { group in
            group.addTask {
                for await e in client.events {
                    switch e {
                    case .opened: continue
                    case .message(let m):
                        let bytes: [UInt8]
                        switch m { case .text(let t): bytes = Array(t.utf8); case .binary(let b): bytes = b }
                        if case .event(let ev)? = try? GatewayFrame.decode(bytes), ev.event == "connect.challenge",
                           let c = ConnectChallenge(payload: ev.payload) {
                            let end = nowMs()
                            return .reachable(skewMs: c.ts - (start + end) / 2, roundTripMs: end - start)
                        }
                    case .closed(let code, let reason):
                        return .failed("closed (\(code.map(String.init) ?? "no close frame")\(reason.isEmpty ? "" : ": \(reason)")) before its challenge")
                    case .failed(.tlsPinMismatch(let expected, let actual)):
                        return .pinMismatch(expected: expected, actual: actual)
                    case .failed(let e):
                        return .failed("\(e)")
                    }
                }
                return .failed("the connection ended before the challenge")
            }
            group.addTask { try? await Task.sleep(for: .seconds(8)); return nil }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        return result ?? .failed("no connect.challenge within 8 s")
    }

    static func freeBytes(near path: String) -> Int64? {
        var dir = path
        while !FileManager.default.fileExists(atPath: dir) {
            let up = (dir as NSString).deletingLastPathComponent
            if up == dir || up.isEmpty { return nil }
            dir = up
        }
        var s = statvfs()
        guard statvfs(dir, &s) == 0 else { return nil }
        return Int64(s.f_bavail) * Int64(s.f_frsize)
    }
}
