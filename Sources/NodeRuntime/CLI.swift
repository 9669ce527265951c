// The command line: parses arguments, prints help, runs a command, maps every failure to one
// line on stderr and a non-zero exit. The executable's main only calls `CLI.main`.

import ClawvoiceCore
import Foundation
import Discovery
import GatewayClient
import GatewayCrypto
import GatewayProtocol
import Store
import WakeWord

public enum CLI {
    struct Command {
        var name: String
        var abstract: String
        var usage: String
        var details: String
        /// Flag name → takes a value.
        var flags: [String: Bool]
        var maxPositionals: Int
    }

    static let global = """
    Global options:
      --config FILE       config file (default $XDG_CONFIG_HOME/clawvoice/config.json5; env CLAWVOICE_CONFIG)
      --log-level LEVEL   debug, info, warning or error (default from the config, else info)
      -h, --help          help for a command
    """

    static let commands: [Command] = [
        Command(name: "pair", abstract: "Pair this device with an OpenClaw gateway (node and operator roles).",
                usage: "clawvoice pair <setup-code>\n       clawvoice pair --url ws://HOST:18789 [--token-file FILE | --token - | --password-file FILE | --password -]\n       clawvoice pair [--name NAME] [--token-file FILE | ...]   (a gateway found on the network)",
                details: """
                A setup code comes from `openclaw qr --setup-code-only` on the gateway host (with or without the
                oc-pair:// prefix). Its routes are probed in order and the first that answers is saved.
                An address where no gateway answers ends within seconds with one line saying what was tried
                and what to fix; nothing is stored until a gateway has answered. A running daemon is told
                to use the new pairing at once.
                Without a code, give the gateway URL and its shared token or password.
                With neither, pair looks for gateways as `clawvoice discover` does (local. and
                discovery.wideAreaDomain, for discovery.timeoutMs): one found is used (and said so); several are
                offered as a numbered choice on a terminal, or listed with a request for --name or --url
                elsewhere; --name NAME picks the one with that instance or display name. An advertised TLS
                fingerprint is shown, never pinned by itself: the certificate is checked as with --url.
                pair then connects both roles and waits: when the gateway asks for approval it prints the
                request id and the exact `openclaw devices approve <id>` command to run on the gateway host,
                and finishes as soon as both roles are approved.

                Options:
                  --url URL                 ws:// (loopback only, unless --allow-insecure) or wss://
                  --token-file FILE         read the gateway's shared token from FILE
                  --token -                 read it from standard input (asked for, not echoed, on a terminal)
                  --password-file FILE      read the gateway's password from FILE
                  --password -              read it from standard input (asked for, not echoed, on a terminal)
                Environment: CLAWVOICE_GATEWAY_TOKEN, CLAWVOICE_GATEWAY_PASSWORD. A secret is never given as a
                value on the command line (`--token VALUE` is refused): other local users would see it in `ps`.
                  --name NAME               what to call this gateway locally (default: its host); without a code
                                            or URL: the discovered gateway to pair with
                  --domain DOMAIN           also browse this wide-area DNS-SD domain (besides discovery.wideAreaDomain)
                  --tls-fingerprint SHA256  pin the gateway's TLS certificate (64 hex; colons allowed)
                  --allow-insecure          permit plain ws:// to a non-loopback host
                  --timeout SECONDS         give up after this long (default: wait until approved)
                """,
                flags: ["--url": true, "--token": true, "--password": true, "--token-file": true, "--password-file": true,
                        "--name": true, "--tls-fingerprint": true, "--domain": true,
                        "--allow-insecure": false, "--timeout": true], maxPositionals: 1),
        Command(name: "discover", abstract: "List the OpenClaw gateways Avahi finds on the network (live with --watch).",
                usage: "clawvoice discover [--watch] [--json] [--timeout SECONDS] [--domain DOMAIN]",
                details: """
                Browses _openclaw-gw._tcp through avahi-daemon on local. (mDNS) and on the wide-area DNS-SD domain
                in discovery.wideAreaDomain (or CLAWVOICE_WIDE_AREA_DOMAIN, or --domain), e.g. openclaw.internal.
                Shows each gateway's name, host, addresses, port, TLS and advertised fingerprint (TXT hints,
                unauthenticated), the URL pair would use (the resolved address and SRV port) and the pair command.
                Waits until every domain has answered or the timeout (discovery.timeoutMs, default 3 s) passes.
                Needs avahi-daemon running (Debian: sudo apt install avahi-daemon).

                Options:
                  --watch            keep browsing: one line per gateway added (+), changed (~) or gone (-), until Ctrl-C
                  --json             a JSON array (with --watch: one {"event", "gateway"} object per line)
                  --timeout SECONDS  how long to wait for answers
                  --domain DOMAIN    also browse this wide-area domain
                """, flags: ["--watch": false, "--json": false, "--timeout": true, "--domain": true], maxPositionals: 0),
        Command(name: "run", abstract: "Run the node daemon: keep both sessions to the active gateway up.",
                usage: "clawvoice run",
                details: """
                The node itself, in the foreground: connects as node and operator to the active gateway
                (`clawvoice gateways` marks it with *; the config's gateway.url takes its place), reconnects
                with backoff, listens for push-to-talk and wake words, sends turns through the outbox, speaks
                replies, and answers the other commands (status, ptt, stop, mute, volume, events, say, session)
                on its control socket. Logs go to stderr, one line each.
                SIGINT or SIGTERM stop it (queued turns stay in the outbox); SIGHUP reloads the config file.
                `clawvoice service install` runs it as a systemd user service instead.
                """, flags: [:], maxPositionals: 0),
        Command(name: "status", abstract: "Show the daemon's connection state per role.",
                usage: "clawvoice status [--json]",
                details: "Asks the running daemon over its control socket.\n\nOptions:\n  --json   print the full status as JSON",
                flags: ["--json": false], maxPositionals: 0),
        Command(name: "ptt", abstract: "Push-to-talk through the running daemon: start, stop, cancel or once.",
                usage: "clawvoice ptt start|stop|cancel|once [--json]",
                details: """
                The same four actions the gateway can invoke as talk.ptt.*:
                  start    open the microphone (again: returns the same capture id)
                  stop     end the capture and send it; prints the capture id, its status and transcript
                  cancel   drop the capture
                  once     capture until you stop talking (or 12 s), then send it
                Status is one of queued, empty, idle, cancelled, busy, not_queued.

                Options:
                  --json   print the result as JSON: {captureId, transcript?, status}
                """, flags: ["--json": false], maxPositionals: 1),
        Command(name: "stop", abstract: "Stop speaking now, as talking over the assistant would.",
                usage: "clawvoice stop",
                details: """
                The reply being spoken stops within about 50 ms and its rest is dropped; the next turn tells the
                agent where it was cut ("Assistant speech interrupted at 2.4s."). A capture in progress goes on.
                Also on a key: ptt.stopKey.
                """, flags: [:], maxPositionals: 0),
        Command(name: "mute", abstract: "Turn the microphone and the wake word off (kept across restarts).",
                usage: "clawvoice mute",
                details: """
                A capture in progress is cancelled; push-to-talk and wake words are refused (MUTED) until
                `clawvoice unmute`. The mute sound plays (sounds.mute), `status` says "muted", and a restarted
                daemon comes back muted. Also on a key: ptt.muteKey (each press toggles).
                """, flags: [:], maxPositionals: 0),
        Command(name: "call", abstract: "Start a realtime call with the agent (talk.calls must be on).",
                usage: "clawvoice call",
                details: """
                The node asks the gateway for a Gateway-controlled WebRTC call (talk.client.create with
                gateway-control-v1) in the current talk session, and the room is in a live conversation until
                `clawvoice hangup`, talk.stop, two minutes without speech, or the gateway ends it. While a call
                holds the room push-to-talk and wake words answer BUSY. The agent can start one too (talk.start),
                once the gateway allows talk.start and talk.stop (gateway.nodes.commands.allow).
                """, flags: [:], maxPositionals: 0),
        Command(name: "hangup", abstract: "End the realtime call.",
                usage: "clawvoice hangup", details: "Says whether a call was ended; `status` shows how the last call ended.",
                flags: [:], maxPositionals: 0),
        Command(name: "unmute", abstract: "Turn the microphone and the wake word back on.",
                usage: "clawvoice unmute", details: "Plays the unmute sound (sounds.unmute).", flags: [:], maxPositionals: 0),
        Command(name: "volume", abstract: "Show or set the level of clawvoice's own playback (0-150%).",
                usage: "clawvoice volume [N | +N | -N]",
                details: """
                The volume of clawvoice's playback stream on PulseAudio (as pactl and pavucontrol show it), not
                the sink's: speech, cues and the chime. The stream playing now changes at once; the level is
                kept across restarts. 100 leaves the level to the sound server. Keys: ptt.volumeUpKey and
                ptt.volumeDownKey (5 a press).
                """, flags: [:], maxPositionals: 1),
        Command(name: "events", abstract: "Stream the daemon's events as JSON lines (for LEDs and scripts).",
                usage: "clawvoice events [--filter NAME,NAME]",
                details: """
                One line per event until Ctrl-C: {"event":"listeningStarted","ts":1764590000000,"captureId":"…","sessionKey":"…","trigger":"ptt"}.
                Events and their fields:
                  wake (phrase, score)   listeningStarted (captureId, sessionKey, trigger: ptt|wake)
                  listeningStopped (captureId, reason: ended|cancelled)   turnSent (idempotencyKey, runId, sessionKey)
                  replyStarted / replyFinished (runId, sessionKey, state)   speaking (state: started|stopped)
                  error (message)   muted   unmuted   connected / disconnected (role, gateway, detail)
                The config can run a command on each: events: { wake: "led on", listeningStopped: "led off" },
                with CLAWVOICE_EVENT, CLAWVOICE_TS and each field as CLAWVOICE_<FIELD> (captureId →
                CLAWVOICE_CAPTURE_ID) in its environment, as wyoming-satellite's --*-command flags do.
                When the daemon stops or restarts, events says so on stderr and exits 1: a script can start it again.

                Options:
                  --filter NAMES   only these events (comma-separated)
                """, flags: ["--filter": true], maxPositionals: 0),
        Command(name: "say", abstract: "Speak text: the gateway's talk.speak voice, or espeak-ng on this device.",
                usage: "clawvoice say \"text\" [--local] [--out FILE.wav]",
                details: """
                Uses the running daemon when there is one, else connects by itself.
                The gateway's clip plays when it can; espeak-ng speaks when the gateway has no voice, answers
                with any error (fallbackEligible or not), or sends audio that cannot be played.

                Options:
                  --local          speak with espeak-ng only (no gateway)
                  --out FILE.wav   write what would be played to a WAV file instead of playing it
                """, flags: ["--local": false, "--out": true], maxPositionals: 1),
        Command(name: "audio", abstract: "List PulseAudio sources and sinks (for audio.source and audio.sink).",
                usage: "clawvoice audio devices [--json]",
                details: "Works with PulseAudio and PipeWire's pulse server; honours PULSE_SERVER.",
                flags: ["--json": false], maxPositionals: 1),
        Command(name: "session", abstract: "Show or switch the chat session the node talks to.",
                usage: "clawvoice session [use KEY]",
                details: """
                Switching stops everything at once, as the phone apps do: a capture in progress is cancelled,
                the transcription relay is closed, speech stops within 50 ms, and late replies of the old
                session are dropped. KEY looks like agent:main:kitchen (`clawvoice history` lists sessions).
                """, flags: [:], maxPositionals: 2),
        Command(name: "wake", abstract: "Check wake words: over a sound file, or live from the microphone.",
                usage: """
                clawvoice wake detect --input FILE.wav [--phrases a,b] [--scores] [--sensitivity 0..1] [--models DIR]
                       clawvoice wake listen [--source NAME] [--seconds N] [--phrases a,b] [--sensitivity 0..1] [--models DIR]
                """,
                details: """
                detect reads a sound file (WAV of any depth or float, FLAC, AIFF, Ogg Vorbis…: what libsndfile
                reads; 8-192 kHz, mono or stereo) and prints one JSON line per detection:
                {"phrase":"openclaw","ms":1234,"score":0.97}.
                listen captures from the microphone (PulseAudio), beside the daemon, and four times a second
                shows the input level and each phrase's highest score, a star at or over its threshold: on a
                terminal as a live bar redrawn in place, elsewhere as plain lines such as
                  level  -31 dBFS  openclaw 0.02  claude 0.91 *
                Each detection is the same JSON line as detect's. Ctrl-C (or --seconds) ends it.
                Try it to see how far away and how loud a wake still works.
                Phrases default to the gateway's defaults (openclaw, claude, computer); a phrase without a
                trained model is named with the command that trains it: make wake-model TRIGGER="phrase".

                Options:
                  --input FILE.wav     detect: the recording to check
                  --scores             detect: also print every step's scores (every 80 ms), for threshold sweeps
                  --source NAME        listen: the PulseAudio source (default audio.source, else the default source)
                  --seconds N          listen: stop after N seconds
                  --phrases a,b        only these phrases
                  --sensitivity 0..1   0.5 uses each model's trained threshold; higher wakes more easily
                  --models DIR         where models are (default wake.modelsDirectory, CLAWVOICE_MODELS_DIR,
                                       share/clawvoice/models beside the binary, or models/ beside the build)
                """, flags: ["--input": true, "--phrases": true, "--scores": false, "--sensitivity": true, "--models": true,
                             "--source": true, "--seconds": true],
                maxPositionals: 1),
        Command(name: "gateways", abstract: "List paired gateways; switch or forget one.",
                usage: "clawvoice gateways [list | use NAME | forget NAME]",
                details: """
                  list          every paired gateway: * marks the active one, then its name, URL, the roles
                                it holds a device token for, and its TLS pin
                  use NAME      make NAME the active gateway; a running daemon switches over at once
                                (refused while the config's gateway.url picks the gateway)
                  forget NAME   delete NAME's tokens, TLS pin, transcript cache and the turns waiting in its
                                outbox; a running daemon on it stops talking to it at once
                Pair a new gateway with `clawvoice pair`.
                """,
                flags: [:], maxPositionals: 2),
        HistoryCommand.command,
        OutboxCommand.sendCommand,
        OutboxCommand.outboxCommand,
        ListenCommand.command,
        ServiceCommand.command,
        DoctorCommand.command,
        ForgetCommand.command,
        ConfigFiles.command,
        Command(name: "demo", abstract: "The whole loop on this machine: pair, push-to-talk, hear the answer.",
                usage: "clawvoice demo [--message TEXT] [--out FILE.wav]",
                details: """
                Needs no OpenClaw install. A built-in loopback gateway approves pairing by itself; espeak-ng says
                the message into a virtual microphone; the gateway invokes talk.ptt.once; the capture streams to
                the gateway's relay as G.711 µ-law at 8 kHz (what the real relay takes); the echoed answer is spoken with a talk.speak clip.
                With a sound server running you hear the answer; without one the demo starts a private
                PulseAudio and writes what its speaker played to a WAV file.

                Options:
                  --message TEXT   what to say (default "Hello from clawvoice")
                  --out FILE.wav   where the private speaker's audio goes (default ./clawvoice-demo.wav)
                """, flags: ["--message": true, "--out": true], maxPositionals: 0),
    ]

    static func topHelp() -> String {
        var s = """
        clawvoice \(ClawvoiceVersion.current): a voice node for OpenClaw gateways.

        Usage: clawvoice <command> [options]

        Commands:

        """
        for c in commands { s += "  \(c.name.padding(toLength: 10, withPad: " ", startingAt: 0))\(c.abstract)\n" }
        s += "\nStart with `clawvoice pair <setup-code>`, then `clawvoice run`. Try it all locally: `clawvoice demo`.\n"
        s += "`clawvoice <command> --help` explains each command.\n"
        s += "Exit status: 0 done, 1 it could not be done (the line on stderr says why), 2 used wrongly.\n\n" + global + "\n"
        return s
    }

    static func help(_ c: Command) -> String {
        "\(c.abstract)\n\nUsage: \(c.usage)\n\n\(c.details)\n\n\(global)\n"
    }

    struct Parsed {
        var command: Command
        var flags: [String: String] = [:]
        var positionals: [String] = []
        var configFlag: String?
        var logLevel: LogLevel?
        var wantsHelp = false
    }

    /// Something the command could not do (exit 1), as opposed to a command used wrongly (exit 2).
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    struct UsageError: Error, CustomStringConvertible {
        var description: String
    }

    static func parse(_ args: [String]) throws(UsageError) -> Parsed? {
        var rest = args
        var configFlag: String?
        var logLevel: LogLevel?
        var wantsHelp = false
        var commandName: String?
        var remaining: [String] = []
        while !rest.isEmpty {
            let a = rest.removeFirst()
            switch a {
            case "--config":
                guard let v = rest.first else { throw UsageError(description: "--config needs a file") }
                configFlag = v
                rest.removeFirst()
            case "--log-level":
                guard let v = rest.first, let l = LogLevel(rawValue: v) else {
                    throw UsageError(description: "--log-level needs one of debug, info, warning, error")
                }
                logLevel = l
                rest.removeFirst()
            case "-h", "--help":
                wantsHelp = true
            default:
                if commandName == nil && !a.hasPrefix("-") { commandName = a } else { remaining.append(a) }
            }
        }
        if commandName == "help" {
            commandName = remaining.first
            remaining = []
            wantsHelp = true
        }
        guard let name = commandName else {
            if let first = remaining.first { throw UsageError(description: "unknown option \(first) (see `clawvoice --help`)") }
            return nil
        }
        guard let command = commands.first(where: { $0.name == name }) else {
            throw UsageError(description: "unknown command '\(name)' (see `clawvoice --help`)")
        }
        var p = Parsed(command: command, configFlag: configFlag, logLevel: logLevel, wantsHelp: wantsHelp)
        var i = 0
        while i < remaining.count {
            var a = remaining[i]
            var inline: String?
            if a.hasPrefix("--"), let eq = a.firstIndex(of: "=") {
                inline = String(a[a.index(after: eq)...])
                a = String(a[..<eq])
            }
            // `volume -10` is a number, not an option: a dash and digits (and a %) is always a positional.
            if a.hasPrefix("-") && a.count > 1 && Int(a.hasSuffix("%") ? String(a.dropLast()) : a) == nil {
                guard let takesValue = command.flags[a] else {
                    throw UsageError(description: "\(name): unknown option \(a) (see `clawvoice \(name) --help`)")
                }
                if takesValue {
                    if let inline { p.flags[a] = inline }
                    else {
                        guard i + 1 < remaining.count else { throw UsageError(description: "\(name): \(a) needs a value") }
                        p.flags[a] = remaining[i + 1]
                        i += 1
                    }
                } else {
                    p.flags[a] = "true"
                }
            } else {
                p.positionals.append(a)
            }
            i += 1
        }
        if p.positionals.count > command.maxPositionals {
            throw UsageError(description: "\(name): unexpected argument '\(p.positionals[command.maxPositionals])' (see `clawvoice \(name) --help`)")
        }
        return p
    }

    /// Runs the CLI and returns the process exit status.
    public static func main(_ args: [String], environment: [String: String] = ProcessInfo.processInfo.environment) async -> Int32 {
        if args == ["--version"] || args == ["-V"] || args == ["version"] {
            print("clawvoice \(ClawvoiceVersion.current)")
            return 0
        }
        let parsed: Parsed?
        do { parsed = try parse(args) } catch {
            fail(error.description)
            return 2
        }
        guard let p = parsed else {
            print(topHelp(), terminator: "")
            return args.isEmpty ? 2 : 0
        }
        if p.wantsHelp {
            print(help(p.command), terminator: "")
            return 0
        }
        // Needs no config, so a broken one does not stop its example from being printed.
        if p.command.name == ConfigFiles.command.name { return ConfigFiles.run(p) }
        do {
            let (config, paths) = try RuntimePaths.load(configFlag: p.configFlag, environment: environment)
            let log = LogSink.stderr(minimum: p.logLevel ?? config.log.level)
            return try await execute(p, config: config, paths: paths, log: log, environment: environment)
        } catch {
            fail("\(error)")
            // A command used wrongly is 2, like a flag that does not parse; anything that went wrong doing it is 1.
            return error is UsageError ? 2 : 1
        }
    }

    static func fail(_ line: String) {
        // One line whatever the error says, so scripts and journald see one record.
        let oneLine = line.split(whereSeparator: \.isNewline).joined(separator: " ")
        FileHandle.standardError.write(Data("clawvoice: \(oneLine)\n".utf8))
    }

    /// Unbuffered, so progress shows at once even when stdout is a pipe.
    static func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))

    }

    static func execute(_ p: Parsed, config: ClawConfig, paths: RuntimePaths, log: LogSink,
                        environment: [String: String]) async throws -> Int32 {
        switch p.command.name {
        case "pair":
            var r = PairRequest()
            r.setupCode = p.positionals.first
            r.url = p.flags["--url"]
            var discovered: DiscoveredGateway?
            if r.setupCode == nil && r.url == nil {
                let g = try await DiscoverCommand.choose(p, config: config, environment: environment, say: { say($0) })
                if let fp = g.tlsFingerprint {
                    say("It advertises TLS certificate sha256 \(fp) (a hint, not proof: the certificate is checked when pairing)")
                }
                discovered = g
                r.url = g.url
            }
            // Secrets from a file, standard input or the environment keep them out of `ps`. An
            // explicit one of either kind outranks both kinds from the environment or config.
            let tokenGiven = p.flags["--token"] != nil || p.flags["--token-file"] != nil
            let passwordGiven = p.flags["--password"] != nil || p.flags["--password-file"] != nil
            r.token = try Secrets.resolve("token", value: p.flags["--token"], file: p.flags["--token-file"],
                                          fallback: r.url != nil && !passwordGiven ? config.gateway.token : nil, command: "pair")
            r.password = try Secrets.resolve("password", value: p.flags["--password"], file: p.flags["--password-file"],
                                             fallback: r.url != nil && !tokenGiven && r.token == nil ? config.gateway.password : nil,
                                             command: "pair")
            r.secretFlag = p.flags["--token-file"].map { "--token-file \($0)" } ?? p.flags["--password-file"].map { "--password-file \($0)" }
                ?? (p.flags["--token"] != nil ? "--token -" : p.flags["--password"] != nil ? "--password -" : nil)
            r.confirmTrust = TLSTrust.terminalConfirm()
            r.name = discovered?.name ?? p.flags["--name"]
            r.allowInsecure = p.flags["--allow-insecure"] != nil || config.gateway.allowInsecure
            if let fp = p.flags["--tls-fingerprint"] {
                guard let n = TLSFingerprint.normalize(fp) else {
                    throw UsageError(description: "pair: --tls-fingerprint must be a SHA-256 fingerprint (64 hex digits)")
                }
                r.tlsFingerprint = n
            }
            if let t = p.flags["--timeout"] {
                guard let s = Double(t), s > 0 else { throw UsageError(description: "pair: --timeout needs a number of seconds") }
                r.timeout = .seconds(s)
            }
            if r.setupCode != nil && r.url != nil {
                throw UsageError(description: "pair: give either a setup code or --url, not both")
            }
            if r.setupCode == nil && r.url == nil {
                throw UsageError(description: "pair: give a setup code or --url (see `clawvoice pair --help`)")
            }
            if r.token != nil && r.password != nil {
                throw UsageError(description: "pair: give --token or --password, not both")
            }
            return try await PairingFlow.run(r, paths: paths, config: config, log: log, say: { say($0) })
        case "discover":
            return try await DiscoverCommand.run(p, config: config, environment: environment, say: { say($0) })
        case "run":
            // One daemon for the life of the process: a gateway switch rebuilds its link in place,
            // SIGHUP reloads this config file.
            let (flag, env) = (p.configFlag, environment)
            let daemon = try NodeDaemon(paths: paths, config: config, log: log,
                                        reload: { try RuntimePaths.load(configFlag: flag, environment: env).0 })
            try await daemon.run()
            return 0
        case "session":
            let action = p.positionals.first ?? "show"
            var request: JSONValue = ["cmd": "session"]
            if action == "use" {
                guard p.positionals.count == 2 else { throw UsageError(description: "session use needs a session KEY (e.g. agent:main:kitchen)") }
                if let why = ControlLine.sessionKeyProblem(p.positionals[1]) { throw UsageError(description: "session use: \(why)") }
                request = ["cmd": "session", "use": .string(p.positionals[1])]
            } else if action != "show" {
                throw UsageError(description: "session: use KEY, or no argument to show the current session")
            }
            let r = try ControlSocketClient.send(request, path: paths.controlSocket)
            say(action == "use" ? "now talking to \(r["sessionKey"]?.stringValue ?? "?"); capture and speech were stopped"
                                : "current session: \(r["sessionKey"]?.stringValue ?? "the gateway's main session")")
            return 0
        case "status":
            let response = try ControlSocketClient.send(["cmd": "status"], path: paths.controlSocket)
            if p.flags["--json"] != nil {
                say(response.description)
            } else {
                say(formatStatus(response))
            }
            return 0
        case "gateways":
            return try gateways(p, config: config, paths: paths)
        case "doctor":
            return try await DoctorCommand.run(p, config: config, paths: paths, environment: environment, say: { say($0) })
        case "service":
            return try ServiceCommand.run(p, paths: paths, environment: environment, say: { say($0) })
        case "outbox":
            return try OutboxCommand.run(p, config: config, paths: paths, say: { say($0) })
        case "forget":
            return try ForgetCommand.run(p, paths: paths, say: { say($0) })
        case "send":
            return try OutboxCommand.send(p, config: config, paths: paths, say: { say($0) })
        case "ptt":
            guard let action = p.positionals.first, ["start", "stop", "cancel", "once"].contains(action) else {
                throw UsageError(description: "ptt needs one of start, stop, cancel, once")
            }
            let r = try ControlSocketClient.send(["cmd": "ptt", "action": .string(action)], path: paths.controlSocket, timeoutSeconds: 90)
            guard r["ok"]?.boolValue == true, let result = r["result"] else {
                throw Failure(description: "ptt \(action): \(r["error"]?.stringValue ?? "failed")")
            }
            if p.flags["--json"] != nil { say(result.description) } else {
                var line = "capture \(result["captureId"]?.stringValue ?? "?")"
                if let st = result["status"]?.stringValue { line += ": \(st)" }
                if let t = result["transcript"]?.stringValue { line += " \"\(t)\"" }
                say(line)
            }
            return 0
        case "events":
            let wanted = p.flags["--filter"].map { Set($0.split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) }) }
            if let w = wanted, let bad = w.first(where: { !NodeEvents.names.contains($0) }) {
                throw UsageError(description: "events: unknown event '\(bad)' (one of \(NodeEvents.names.joined(separator: ", ")))")
            }
            let daemonEnded = try ControlSocketClient.stream(["cmd": "events"], path: paths.controlSocket) { line in
                if let w = wanted, let name = (try? JSONCoding.decode(JSONValue.self, from: Data(line.utf8)))?["event"]?.stringValue,
                   !w.contains(name) { return true }
                say(line)
                return true
            }
            // A script waiting on events must learn that none will come, not see a clean end.
            if daemonEnded {
                throw Failure(description: "events: the daemon went away (it stopped or restarted); "
                              + "run `clawvoice events` again once `clawvoice status` answers")
            }
            return 0
        case "call", "hangup":
            let r = try ControlSocketClient.send(["cmd": .string(p.command.name)], path: paths.controlSocket, timeoutSeconds: 10)
            guard r["ok"]?.boolValue == true else { throw Failure(description: "\(p.command.name): \(r["error"]?.stringValue ?? "failed")") }
            if p.command.name == "call" {
                say(r["started"]?.boolValue == true ? "calling: `clawvoice status` shows the call, `clawvoice hangup` ends it" : "a call is already on")
            } else {
                say(r["stopped"]?.boolValue == true ? "hung up" : "no call was on")
            }
            return 0
        case "stop", "mute", "unmute", "volume":
            let control: NodeControl
            switch p.command.name {
            case "stop": control = .stop
            case "mute": control = .mute(true)
            case "unmute": control = .mute(false)
            default:
                guard let c = NodeControl.volumeArgument(p.positionals.first) else {
                    throw UsageError(description: "volume: give a level from 0 to 150, or +N / -N (got \(p.positionals.first ?? ""))")
                }
                control = c
            }
            let r = try ControlSocketClient.send(control.request, path: paths.controlSocket)
            guard r["ok"]?.boolValue == true else { throw Failure(description: "\(p.command.name): \(r["error"]?.stringValue ?? "failed")") }
            switch p.command.name {
            case "stop": say(r["stopped"]?.boolValue == true ? "stopped speaking" : "nothing was playing")
            case "mute", "unmute": say(r["muted"]?.boolValue == true ? "muted: microphone and wake word off (clawvoice unmute)" : "unmuted")
            default: say("volume \(r["volume"]?.intValue ?? 0)%")
            }
            return 0
        case "say":
            guard let text = p.positionals.first, !text.trimmingCharacters(in: .whitespaces).isEmpty else {
                throw UsageError(description: "say needs the text to speak (see `clawvoice say --help`)")
            }
            let local = p.flags["--local"] != nil
            let out = p.flags["--out"]
            if out == nil, let r = try? ControlSocketClient.send(["cmd": "say", "text": .string(text), "local": .bool(local)],
                                                               path: paths.controlSocket, timeoutSeconds: 120) {
                guard r["ok"]?.boolValue == true else { throw Failure(description: "say: \(r["error"]?.stringValue ?? "failed")") }
                var line = "spoke \(String(format: "%.2f", (r["durationMs"]?.doubleValue ?? 0) / 1000)) s via \(r["engine"]?.stringValue ?? "?")"
                if let why = r["fallbackReason"]?.stringValue { line += "; fell back because \(why)" }
                say(line)
                return 0
            }
            return try await SayCommand.run(text: text, local: local, out: out, config: config, paths: paths, log: log, say: { say($0) })
        case "history":
            return try HistoryCommand.run(p, config: config, paths: paths, say: { say($0) })
        case "listen":
            return try ListenCommand.run(p, paths: paths, say: { say($0) })
        case "wake":
            let action = p.positionals.first ?? ""
            guard action == "detect" || action == "listen" else {
                throw UsageError(description: "wake: the action is `detect` or `listen` (see `clawvoice wake --help`)")
            }
            let phrases = p.flags["--phrases"].map { $0.split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty } }
            var sensitivity = 0.5
            if let s = p.flags["--sensitivity"] {
                guard let v = Double(s), (0...1).contains(v) else { throw UsageError(description: "wake \(action): --sensitivity needs a number from 0 to 1, got \(s)") }
                sensitivity = v
            }
            let models = p.flags["--models"] ?? config.wake.modelsDirectory ?? WakeModelCatalog.defaultDirectory()
            if action == "listen" {
                var seconds: Double?
                if let s = p.flags["--seconds"] {
                    guard let v = Double(s), v > 0 else { throw UsageError(description: "wake listen: --seconds needs a positive number, got \(s)") }
                    seconds = v
                }
                return try await WakeCommand.listen(phrases: phrases, modelsDirectory: models, sensitivity: sensitivity,
                                                    source: p.flags["--source"] ?? config.audio.source, seconds: seconds,
                                                    terminal: isatty(STDOUT_FILENO) == 1, say: { say($0) })
            }
            guard let input = p.flags["--input"] else { throw UsageError(description: "wake detect needs --input FILE.wav") }
            return try WakeCommand.detect(input: input, phrases: phrases, scores: p.flags["--scores"] != nil,
                                          modelsDirectory: models, sensitivity: sensitivity, say: { say($0) })
        case "audio":
            guard p.positionals.first == "devices" else { throw UsageError(description: "audio: the only action is `devices`") }
            return try await AudioDevicesCommand.run(json: p.flags["--json"] != nil, say: { say($0) })
        case "demo":
            // The demo's own lines tell the story; only warnings from the machinery below.
            let quiet = LogSink.stderr(minimum: p.logLevel ?? .warning)
            return try await Demo.run(message: p.flags["--message"] ?? "Hello from clawvoice", wavPath: p.flags["--out"],
                                      log: quiet, say: { say($0) })
        default:
            throw UsageError(description: "unknown command \(p.command.name)")
        }
    }

    static func formatStatus(_ r: JSONValue) -> String {
        var lines: [String] = []
        let g = r["gateway"]
        lines.append("gateway \(g?["name"]?.stringValue ?? "?") (\(g?["url"]?.stringValue ?? "?"))")
        for role in ["node", "operator"] {
            guard let s = r["sessions"]?[role] else { continue }
            var line = "  \(role.padding(toLength: 9, withPad: " ", startingAt: 0)) \(s["state"]?.stringValue ?? "?"): \(s["detail"]?.stringValue ?? "")"
            if let next = s["nextStep"]?.stringValue { line += "\n            → \(next)" }
            for limit in s["limits"]?.arrayValue?.compactMap(\.stringValue) ?? [] { line += "\n            ⚠ \(limit)" }
            lines.append(line)
        }
        if let key = r["sessionKey"]?.stringValue { lines.append("  session   \(key)") }
        // Muted is one state of the microphone: one mic line, and the wake line agrees with it.
        let muted = r["muted"]?.boolValue == true
        let capture = r["capture"]?.stringValue
        if muted {
            let stream = capture.map { $0 == "running" ? "" : "; capture \($0)" } ?? ""
            lines.append("  mic       muted: microphone and wake word off (clawvoice unmute)\(stream)")
        } else if let capture {
            lines.append("  mic       \(capture)\(r["ptt"]?.stringValue.map { $0 == "idle" ? "" : ", \($0)" } ?? "")")
        }
        if let v = r["volume"]?.intValue, v != 100 { lines.append("  volume    \(v)%") }
        if let button = r["button"]?.stringValue, button != "off" { lines.append("  button    \(button)") }
        lines += formatWake(r["wake"], muted: muted)
        lines += formatCall(r["call"])
        if let n = r["outbox"]?.intValue, n > 0 { lines.append("  outbox    \(n) turn\(n == 1 ? "" : "s") waiting (`clawvoice outbox list`)") }
        return lines.joined(separator: "\n")
    }

    /// The call line of `status` (talk.calls on): the call and which path it took, or how the last ended.
    static func formatCall(_ c: JSONValue?) -> [String] {
        guard let c, c.objectValue != nil else { return [] }
        var lines: [String]
        let phase = c["phase"]?.stringValue ?? "idle"
        if phase != "idle" {
            lines = ["  call      \(phase) over \(c["path"]?.stringValue ?? "?") (\(c["callId"]?.stringValue ?? "?"), session \(c["sessionKey"]?.stringValue ?? "not resolved yet"))"]
        } else if let end = c["lastEnd"], end.objectValue != nil {
            lines = ["  call      none; the last (\(end["path"]?.stringValue ?? "?")) ended: \(end["cause"]?.stringValue ?? "?")\(end["detail"]?.stringValue.map { " (\($0))" } ?? "")"]
        } else {
            lines = ["  call      none (`clawvoice call` starts one)"]
        }
        if let why = c["upgradeRequired"]?.stringValue { lines.append("            ⚠ gateway upgrade required: \(why)") }
        return lines
    }

    /// The wake lines of `status`: what is listened for, the last wake, and each trigger that
    /// has no model with the command that trains it.
    static func formatWake(_ w: JSONValue?, muted: Bool = false) -> [String] {
        guard let w, w.objectValue != nil else { return ["  wake      off"] }
        let listening = (w["listening"]?.arrayValue ?? []).compactMap(\.stringValue)
        var line = "  wake      " + (listening.isEmpty ? "no models for the gateway's triggers" : "listening for \(listening.joined(separator: ", "))")
        if muted || w["state"]?.stringValue == "muted" {
            line = "  wake      off while muted" + (listening.isEmpty ? "" : " (\(listening.joined(separator: ", ")) after `clawvoice unmute`)")
        }
        if w["enabled"]?.boolValue == false { line = "  wake      off (wake.enabled is false)" }
        if let n = w["detections"]?.intValue, n > 0 {
            line += "; \(n) wake\(n == 1 ? "" : "s"), last \"\(w["lastPhrase"]?.stringValue ?? "?")\" → \(w["lastOutcome"]?.stringValue ?? "?")"
        }
        var lines = [line]
        for (trigger, session) in (w["routing"]?.objectValue ?? [:]).sorted(by: { $0.key < $1.key }) {
            lines.append("            \"\(trigger)\" goes to \(session.stringValue ?? "?")")
        }
        for m in w["missing"]?.arrayValue ?? [] {
            lines.append("            \"\(m["phrase"]?.stringValue ?? "?")\" has no model → \(m["command"]?.stringValue ?? "")")
        }
        if let e = w["error"]?.stringValue { lines.append("            models: \(e)") }
        return lines
    }

    static func gateways(_ p: Parsed, config: ClawConfig, paths: RuntimePaths) throws -> Int32 {
        let store = try openStore(paths)
        let action = p.positionals.first ?? "list"
        switch action {
        case "list":
            let all = try store.gateways()
            if all.isEmpty {
                say("No gateways paired yet. Pair one with `clawvoice pair <setup-code>` or `clawvoice pair --url URL --token-file FILE`.")
                return 0
            }
            for g in all {
                let roles = try store.tokens(gateway: g.name).map(\.role).sorted()
                let pin = g.tlsFingerprint.map { " pinned \($0.prefix(16))…" } ?? ""
                say("\(g.isActive ? "*" : " ") \(g.name)  \(g.url)  tokens: \(roles.isEmpty ? "none" : roles.joined(separator: ","))\(pin)")
            }
            return 0
        case "use", "forget":
            guard p.positionals.count == 2 else { throw UsageError(description: "gateways \(action) needs a gateway NAME") }
            let name = p.positionals[1]
            // The config's gateway.url picks the gateway at every start (resolveActiveGateway), so a
            // switch made here would be undone at once: say so instead of pretending it worked.
            if action == "use", let url = config.gateway.url, GatewayNaming.name(for: url) != name {
                throw UsageError(description: "gateways use: the config's gateway.url (\(url)) picks the gateway; "
                                 + "remove it from the config (or unset CLAWVOICE_GATEWAY_URL) to switch with `gateways use`")
            }
            guard try store.gateway(named: name) != nil else {
                throw UsageError(description: "no gateway named '\(name)' (see `clawvoice gateways`)")
            }
            let wasActive = try store.activeGateway()?.name == name
            if action == "use" {
                try store.setActiveGateway(name: name)
                say("Active gateway: \(name).")
            } else {
                let queued = try store.outboxCount(gateway: name)
                try store.deleteGateway(name: name)
                say("Forgot \(name): its tokens, pin, transcript cache"
                    + (queued > 0 ? " and the \(queued) turn\(queued == 1 ? "" : "s") waiting in its outbox are deleted." : " and outbox are deleted."))
            }
            // A running daemon stops talking at once and comes back on the (new) active gateway.
            if action == "use" || wasActive,
               (try? ControlSocketClient.send(["cmd": "restart", "reason": .string("gateway \(action == "use" ? "switched" : "forgotten")")],
                                              path: paths.controlSocket, timeoutSeconds: 5)) != nil {
                say("The running daemon switched over.")
            }
            return 0
        default:
            throw UsageError(description: "gateways: unknown action '\(action)' (list, use NAME, forget NAME)")
        }
    }
}
