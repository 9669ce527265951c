// The command line: parses arguments, prints help, runs a command, maps every failure to one
// line on stderr and a non-zero exit. The executable's main only calls `CLI.main`.

import ClawvoiceCore
import Daemon
import Discovery
public import Foundation
import GatewayClient
import GatewayCrypto
import GatewayProtocol
import NodeRuntime
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
        PairCommand.command,
        DiscoverCommand.command,
        RunCommand.command,
        StatusCommand.command,
        PTTCommand.command,
        ControlCommand.stop,
        ControlCommand.mute,
        CallCommand.call,
        CallCommand.hangup,
        ControlCommand.unmute,
        ControlCommand.volume,
        EventsCommand.command,
        SayCommand.command,
        AudioDevicesCommand.command,
        SessionCommand.command,
        WakeCommand.command,
        GatewaysCommand.command,
        HistoryCommand.command,
        OutboxCommand.sendCommand,
        OutboxCommand.outboxCommand,
        ListenCommand.command,
        ServiceCommand.command,
        DoctorCommand.command,
        ForgetCommand.command,
        ConfigCommand.command,
        Demo.command,
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
        if p.command.name == ConfigCommand.command.name { return ConfigCommand.run(p) }
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

    /// Hands the command to its type (one per subcommand, each in its own file).
    static func execute(_ p: Parsed, config: ClawConfig, paths: RuntimePaths, log: LogSink,
                        environment: [String: String]) async throws -> Int32 {
        let run: (Parsed, ClawConfig, RuntimePaths, LogSink, [String: String]) async throws -> Int32
        switch p.command.name {
        case "pair": run = PairCommand.run(_:config:paths:log:environment:)
        case "discover": return try await DiscoverCommand.run(p, config: config, environment: environment, say: { say($0) })
        case "run": run = RunCommand.run(_:config:paths:log:environment:)
        case "session": run = SessionCommand.run(_:config:paths:log:environment:)
        case "status": run = StatusCommand.run(_:config:paths:log:environment:)
        case "gateways": run = GatewaysCommand.run(_:config:paths:log:environment:)
        case "doctor": return try await DoctorCommand.run(p, config: config, paths: paths, environment: environment, say: { say($0) })
        case "service": return try ServiceCommand.run(p, paths: paths, environment: environment, say: { say($0) })
        case "outbox": return try OutboxCommand.run(p, config: config, paths: paths, say: { say($0) })
        case "forget": return try ForgetCommand.run(p, paths: paths, say: { say($0) })
        case "send": return try OutboxCommand.send(p, config: config, paths: paths, say: { say($0) })
        case "ptt": run = PTTCommand.run(_:config:paths:log:environment:)
        case "events": run = EventsCommand.run(_:config:paths:log:environment:)
        case "call", "hangup": run = CallCommand.run(_:config:paths:log:environment:)
        case "stop", "mute", "unmute", "volume": run = ControlCommand.run(_:config:paths:log:environment:)
        case "say": run = SayCommand.run(_:config:paths:log:environment:)
        case "history": return try HistoryCommand.run(p, config: config, paths: paths, say: { say($0) })
        case "listen": return try ListenCommand.run(p, paths: paths, say: { say($0) })
        case "wake": run = WakeCommand.run(_:config:paths:log:environment:)
        case "audio": run = AudioDevicesCommand.run(_:config:paths:log:environment:)
        case "demo": run = Demo.run(_:config:paths:log:environment:)
        default:
            throw UsageError(description: "unknown command \(p.command.name)")
        }
        return try await run(p, config, paths, log, environment)
    }

    /// `status`'s lines (StatusCommand).
    static func formatStatus(_ r: JSONValue) -> String { StatusCommand.formatStatus(r) }
}
