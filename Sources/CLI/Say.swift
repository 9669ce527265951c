// `clawvoice say` and `clawvoice audio devices` when no daemon is running: a short-lived
// operator session (for talk.speak) and a PulseAudio connection of their own.

import Audio
import ClawvoiceCore
import Daemon
import Foundation
import GatewayClient
import GatewayCrypto
import GatewayProtocol
import NodeRuntime
import Store
import Talk

public enum SayCommand {
    static let command = CLI.Command(name: "say", abstract: "Speak text: the gateway's talk.speak voice, or espeak-ng on this device.",
                usage: "clawvoice say \"text\" [--local] [--out FILE.wav]",
                details: """
                Uses the running daemon when there is one, else connects by itself.
                The gateway's clip plays when it can; espeak-ng speaks when the gateway has no voice, answers
                with any error (fallbackEligible or not), or sends audio that cannot be played.

                Options:
                  --local          speak with espeak-ng only (no gateway)
                  --out FILE.wav   write what would be played to a WAV file instead of playing it
                """, flags: ["--local": false, "--out": true], maxPositionals: 1)

    static func run(_ p: CLI.Parsed, config: ClawConfig, paths: RuntimePaths, log: LogSink, environment: [String: String]) async throws -> Int32 {
        guard let text = p.positionals.first, !text.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw CLI.UsageError(description: "say needs the text to speak (see `clawvoice say --help`)")
        }
        let local = p.flags["--local"] != nil
        let out = p.flags["--out"]
        if out == nil, let r = try? ControlSocketClient.send(["cmd": "say", "text": .string(text), "local": .bool(local)],
                                                           path: paths.controlSocket, timeoutSeconds: 120) {
            guard r["ok"]?.boolValue == true else { throw CLI.Failure(description: "say: \(r["error"]?.stringValue ?? "failed")") }
            var line = "spoke \(String(format: "%.2f", (r["durationMs"]?.doubleValue ?? 0) / 1000)) s via \(r["engine"]?.stringValue ?? "?")"
            if let why = r["fallbackReason"]?.stringValue { line += "; fell back because \(why)" }
            CLI.say(line)
            return 0
        }
        return try await SayCommand.run(text: text, local: local, out: out, config: config, paths: paths, log: log, say: { CLI.say($0) })
    }

    /// Speaks (or renders to `out`) without a daemon. Returns the exit status.
    static func run(text: String, local: Bool, out: String?, config: ClawConfig, paths: RuntimePaths, log: LogSink,
                    say: @escaping @Sendable (String) -> Void) async throws -> Int32 {
        var session: GatewaySession?
        // A gateway.url that cannot work is an error here, not a silent fallback to espeak-ng.
        if !local, let store = try? openStore(paths), let record = try resolveActiveGateway(config: config, store: store) {
            let (identity, instanceId) = try store.loadOrCreateIdentity()
            var options = SessionOptions(displayName: config.node.displayName, version: ClawvoiceVersion.current)
            options.operatorClientId = config.gateway.operatorClient
            options.operatorClientMode = config.gateway.operatorClient == "cli" ? "cli" : "ui"
            let s = GatewaySession(role: .operator,
                                   endpoint: GatewayEndpoint(name: record.name, url: record.url, tlsFingerprint: record.tlsFingerprint,
                                                             allowInsecure: record.allowInsecure),
                                   credentials: GatewayCredentials(sharedToken: record.sharedToken, password: record.password),
                                   identity: identity, instanceId: instanceId, store: store, options: options, log: log)
            session = s
        }
        // Nothing below throws. The session runs as a child of this group and ends with it.
        return await withTaskGroup(of: Void.self) { group in
            if let s = session {
                group.addTask { await s.run() }
                let st = await firstVerdict(s, timeout: .seconds(8))
                if st.state != .connected { say("gateway not reachable (\(st.detail)); speaking on this device") }
            }
            let status = await speak(text, local: local, out: out, session: session, config: config, log: log, say: say)
            group.cancelAll()
            return status
        }
    }

    private static func speak(_ text: String, local: Bool, out: String?, session: GatewaySession?, config: ClawConfig, log: LogSink,
                              say: @escaping @Sendable (String) -> Void) async -> Int32 {
        let sink: any SpeechSink
        var pulse: PulseConnection?
        if let out {
            sink = WAVFileSink(path: out)
        } else {
            let connection = PulseConnection(clientName: "clawvoice-say")
            pulse = connection
            sink = PulseSpeechSink(playback: PulsePlayback(connection: connection, sink: config.audio.sink))
        }
        defer { pulse?.close() }
        let speech = SpeechOutput(channel: session, sink: sink, config: NodeDaemon.speechConfig(config), log: log)
        let report = await speech.speak(text, route: local ? .local : .talkSpeak)
        return summarize(report, out: out, say: say)
    }

    /// Connected, or plainly not for now: the first attempt failed and a retry is scheduled, or
    /// the gateway wants pairing or paused us. `say` must not sit out the retries (it waited 8 s
    /// with the gateway down) before espeak-ng speaks.
    static func firstVerdict(_ s: GatewaySession, timeout: Duration) async -> SessionStatus {
        let deadline = ContinuousClock.now + timeout
        while true {
            let st = await s.currentStatus()
            switch st.state {
            case .connected, .paused, .waiting, .pairing: return st
            case .stopped, .connecting: break
            }
            if ContinuousClock.now >= deadline { return st }
            try? await Task.sleep(for: .milliseconds(25))
        }
    }

    static func summarize(_ report: SpeechReport, out: String?, say: @Sendable (String) -> Void) -> Int32 {
        if let error = report.error {
            say("could not speak: \(error)")
            return 1
        }
        var line = "\(out == nil ? "spoke" : "wrote \(out!)"): \(String(format: "%.2f", report.durationMs / 1000)) s via \(report.engine)"
        if let p = report.provider { line += " (\(p)\(report.outputFormat.map { ", \($0)" } ?? ""))" }
        if let why = report.fallbackReason { line += "; fell back because \(why)" }
        say(line)
        return report.outcome == .failed ? 1 : 0
    }
}

enum AudioDevicesCommand {
    static let command = CLI.Command(name: "audio", abstract: "List PulseAudio sources and sinks (for audio.source and audio.sink).",
                usage: "clawvoice audio devices [--json]",
                details: "Works with PulseAudio and PipeWire's pulse server; honours PULSE_SERVER.",
                flags: ["--json": false], maxPositionals: 1)

    static func run(_ p: CLI.Parsed, config: ClawConfig, paths: RuntimePaths, log: LogSink, environment: [String: String]) async throws -> Int32 {
        guard p.positionals.first == "devices" else { throw CLI.UsageError(description: "audio: the only action is `devices`") }
        return try await AudioDevicesCommand.run(json: p.flags["--json"] != nil, say: { CLI.say($0) })
    }

    static func run(json: Bool, say: @Sendable (String) -> Void) async throws -> Int32 {
        let connection = PulseConnection(clientName: "clawvoice-devices")
        defer { connection.close() }
        // Asked once: this command does not retry, so it must not pass on the daemon's "keeps retrying".
        do { try await connection.waitUntilReady(timeout: .seconds(3)) } catch {
            let server = ProcessInfo.processInfo.environment["PULSE_SERVER"].map { "PULSE_SERVER=\($0)" } ?? "the default server"
            let line = "no sound server answers (\(server)); is PulseAudio or pipewire-pulse running?"
            if json { say(JSONValue.object(["ok": false, "error": .string(line)]).description); return 1 }
            throw CLI.Failure(description: line)
        }
        let result = await devicesJSON(connection: connection)
        if json { say(result.description); return result["ok"]?.boolValue == true ? 0 : 1 }
        guard result["ok"]?.boolValue == true else {
            throw CLI.Failure(description: result["error"]?.stringValue ?? "listing the sound server's devices failed")
        }
        for (title, key, configKey) in [("Sources (microphones)", "sources", "audio.source"), ("Sinks (speakers)", "sinks", "audio.sink")] {
            say("\(title): use the name as \(configKey)")
            for d in result[key]?.arrayValue ?? [] {
                var flags: [String] = []
                if d["default"]?.boolValue == true { flags.append("default") }
                if d["monitor"]?.boolValue == true { flags.append("monitor") }
                if d["headset"]?.boolValue == true { flags.append("headset") }
                say("  \(d["name"]?.stringValue ?? "?")  \(d["description"]?.stringValue ?? "")  [\(d["spec"]?.stringValue ?? "")]\(flags.isEmpty ? "" : " " + flags.joined(separator: ", "))")
            }
        }
        return 0
    }
}
