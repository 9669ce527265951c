// `clawvoice service install|uninstall|status`: the systemd user unit. What to do is a pure
// plan from gathered facts (where the binary and an installed unit are, systemd's user search
// path, linger); the executor only writes the unit and runs `systemctl --user`.

import ClawvoiceCore
public import Foundation
import GatewayCrypto
import NodeRuntime
import Daemon
import Store
#if canImport(Glibc)
import Glibc
#endif

/// The user unit's text. config/clawvoice.service is this text for `%h/.local/bin/clawvoice`
/// (a test keeps the two equal); `make install` writes it with the installed binary's path.
public enum ServiceUnit {
    public static let name = "clawvoice.service"
    /// The first line of every unit clawvoice writes itself, so uninstall removes only its own.
    public static let marker = "# systemd user unit for the clawvoice node daemon"

    public static func text(executable: String) -> String {
        """
        \(marker) (ServiceUnit.swift holds the same text).
        # Installed by `make install`; enabled by `clawvoice service install`. Pair first: clawvoice pair <setup-code>
        [Unit]
        Description=clawvoice: OpenClaw voice node
        After=network-online.target pipewire-pulse.service pulseaudio.service
        Wants=network-online.target

        [Service]
        # READY=1 once the node session is up (or waiting for approval) and the microphone runs;
        # STATUS= says what it does; the watchdog is kicked only while its services answer.
        Type=notify
        NotifyAccess=main
        WatchdogSec=30
        ExecStart=\(executable) run
        ExecReload=/bin/kill -HUP $MAINPID
        Restart=on-failure
        RestartSec=5
        # Logs are single lines on stderr with syslog priorities; journalctl --user -u clawvoice -p warning.

        [Install]
        WantedBy=default.target

        """
    }
}

/// What `service` decides from. Gathered by `ServiceFacts.gather`, built by hand in tests.
public struct ServiceFacts: Sendable, Equatable {
    /// The running binary's real path.
    public var executable: String
    public var user: String
    public var isRoot: Bool
    /// $XDG_CONFIG_HOME (default ~/.config) and $XDG_DATA_HOME (default ~/.local/share).
    public var configHome: String
    public var dataHome: String
    public var dataDirs: [String] = ["/usr/local/share", "/usr/share"]
    /// The unit installed with a binary in `<prefix>/bin`, when it exists (`installedUnit(executable:)`).
    public var installedUnit: String?
    /// Whether `<configHome>/systemd/user/clawvoice.service` exists and clawvoice wrote it.
    public var ownUnitExists: Bool = false
    /// /var/lib/systemd/linger/<user> exists.
    public var linger: Bool = false
    /// A gateway is paired (or configured), so `run` has something to connect to.
    public var paired: Bool = true

    public var ownUnitPath: String { configHome + "/systemd/user/" + ServiceUnit.name }

    /// systemd's user unit search path (systemd.unit(5)), the directories a unit is found in by name.
    public var searchPath: [String] {
        [configHome + "/systemd/user", "/etc/systemd/user", dataHome + "/systemd/user"]
            + dataDirs.map { $0 + "/systemd/user" } + ["/usr/local/lib/systemd/user", "/usr/lib/systemd/user"]
    }

    public static func gather(environment env: [String: String], paired: Bool) -> ServiceFacts {
        let home = env["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let user = env["USER"].flatMap { $0.isEmpty ? nil : $0 } ?? (getpwuid(getuid()).map { String(cString: $0.pointee.pw_name) } ?? "root")
        var f = ServiceFacts(executable: exe, user: user, isRoot: getuid() == 0,
                             configHome: env["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? home + "/.config",
                             dataHome: env["XDG_DATA_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? home + "/.local/share")
        if let dirs = env["XDG_DATA_DIRS"], !dirs.isEmpty { f.dataDirs = dirs.split(separator: ":").map(String.init) }
        f.installedUnit = installedUnit(executable: exe)
        if let data = FileManager.default.contents(atPath: f.ownUnitPath) {
            f.ownUnitExists = String(decoding: data, as: UTF8.self).hasPrefix(ServiceUnit.marker)
        }
        f.linger = FileManager.default.fileExists(atPath: "/var/lib/systemd/linger/" + user)
        f.paired = paired
        return f
    }

    /// The unit installed beside a binary in `<prefix>/bin`: `<prefix>/share/systemd/user` (make
    /// install) or `<prefix>/lib/systemd/user` (the Debian package's /usr/lib/systemd/user).
    public static func installedUnit(executable: String,
                                     exists: (String) -> Bool = { FileManager.default.fileExists(atPath: $0) }) -> String? {
        let prefix = ((executable as NSString).deletingLastPathComponent as NSString).deletingLastPathComponent
        return ["share", "lib"].map { "\(prefix)/\($0)/systemd/user/\(ServiceUnit.name)" }.first(where: exists)
    }
}

/// One thing `service` does, in order.
public enum ServiceStep: Sendable, Equatable {
    case writeUnit(path: String, text: String)
    case removeFile(String)
    /// `systemctl --user <arguments>`.
    case systemctl([String])
}

public enum ServicePlan {
    /// The command that lets the user manager (and so the unit) run without a login.
    public static func lingerCommand(_ f: ServiceFacts) -> String {
        (f.isRoot ? "" : "sudo ") + "loginctl enable-linger \(f.user)"
    }

    /// Enable the unit make install put beside the binary, or, for a binary that came without
    /// one, write a unit for this binary into ~/.config/systemd/user.
    public static func install(_ f: ServiceFacts) -> (steps: [ServiceStep], notes: [String]) {
        var steps: [ServiceStep] = []
        var notes: [String] = []
        var enableTarget = ServiceUnit.name
        if let unit = f.installedUnit {
            // A stale unit we wrote for another copy would shadow the installed one.
            if f.ownUnitExists { steps.append(.removeFile(f.ownUnitPath)) }
            let dir = (unit as NSString).deletingLastPathComponent
            if !f.searchPath.contains(dir) { enableTarget = unit }  // enable by path links it
            notes.append("unit: \(unit)")
        } else {
            steps.append(.writeUnit(path: f.ownUnitPath, text: ServiceUnit.text(executable: f.executable)))
            notes.append("unit: \(f.ownUnitPath) (runs \(f.executable))")
        }
        steps.append(.systemctl(["daemon-reload"]))
        steps.append(.systemctl(["enable", "--now", enableTarget]))
        if !f.paired {
            notes.append("not paired yet: the service starts once `clawvoice pair <setup-code>` is done (then `systemctl --user restart clawvoice`)")
        }
        notes.append(f.linger ? "linger is on: it runs without a login too"
                              : "to keep it running without a login (and start it at boot): \(lingerCommand(f))")
        return (steps, notes)
    }

    public static func uninstall(_ f: ServiceFacts) -> [ServiceStep] {
        var steps: [ServiceStep] = [.systemctl(["disable", "--now", ServiceUnit.name])]
        if f.ownUnitExists { steps.append(.removeFile(f.ownUnitPath)) }
        steps.append(.systemctl(["daemon-reload"]))
        return steps
    }

    /// `service status` from `systemctl --user is-enabled` and `is-active` answers.
    public static func statusLines(enabled: String, active: String, facts f: ServiceFacts) -> [String] {
        var lines = ["clawvoice.service: \(enabled.isEmpty ? "not installed" : enabled), \(active.isEmpty ? "unknown" : active)"]
        if enabled != "enabled" { lines.append("  → clawvoice service install") }
        else if active != "active" { lines.append("  → journalctl --user -u clawvoice -n 20   (why it is not running)") }
        lines.append(f.linger ? "linger: on (runs without a login)" : "linger: off → \(lingerCommand(f))")
        return lines
    }
}

enum ServiceCommand {
    static let command = CLI.Command(
        name: "service", abstract: "Install, remove or check the systemd user service that runs the daemon.",
        usage: "clawvoice service install|uninstall|status",
        details: """
        install    enable and start clawvoice.service for this user: the unit `make install` put in
                   <prefix>/share/systemd/user (the Debian package: /usr/lib/systemd/user), or, for a
                   binary without one, a unit written to
                   ~/.config/systemd/user that runs this binary. Prints the one command that lets it run
                   without a login: loginctl enable-linger USER.
        uninstall  stop and disable it (and remove a unit install wrote).
        status     whether it is enabled and running, and whether linger is on.
        Needs a systemd user session (`systemctl --user` must work).
        """, flags: [:], maxPositionals: 1)

    static func run(_ p: CLI.Parsed, paths: RuntimePaths, environment: [String: String], say: (String) -> Void) throws -> Int32 {
        let action = p.positionals.first ?? "status"
        let paired = (try? openStore(paths).activeGateway()) != nil
        let facts = ServiceFacts.gather(environment: environment, paired: paired)
        switch action {
        case "install":
            let (steps, notes) = ServicePlan.install(facts)
            try perform(steps, environment: environment)
            say("clawvoice.service is enabled and started.")
            for n in notes { say("  " + n) }
            return 0
        case "uninstall":
            try perform(ServicePlan.uninstall(facts), environment: environment)
            say("clawvoice.service is stopped and disabled.")
            return 0
        case "status":
            let enabled = systemctl(["is-enabled", ServiceUnit.name], environment: environment)
            let active = systemctl(["is-active", ServiceUnit.name], environment: environment)
            if enabled.status != 0 && enabled.output.isEmpty && !enabled.error.isEmpty {
                throw CLI.Failure(description: "systemctl --user: \(enabled.error.trimmingCharacters(in: .whitespacesAndNewlines)) (no systemd user session?)")
            }
            for l in ServicePlan.statusLines(enabled: enabled.output.trimmingCharacters(in: .whitespacesAndNewlines),
                                             active: active.output.trimmingCharacters(in: .whitespacesAndNewlines), facts: facts) { say(l) }
            return 0
        default:
            throw CLI.UsageError(description: "service: the action is install, uninstall or status")
        }
    }

    static func perform(_ steps: [ServiceStep], environment: [String: String]) throws {
        for step in steps {
            switch step {
            case .writeUnit(let path, let text):
                try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                do { try text.write(toFile: path, atomically: true, encoding: .utf8) } catch {
                    throw CLI.Failure(description: "cannot write \(path): \(error.localizedDescription)")
                }
            case .removeFile(let path):
                try? FileManager.default.removeItem(atPath: path)
            case .systemctl(let args):
                let r = systemctl(args, environment: environment)
                // disable of a unit that is not there is not a failure of uninstall
                if r.status != 0 && !(args.first == "disable" && r.error.contains("does not exist")) {
                    let why = (r.error + r.output).split(whereSeparator: \.isNewline).first.map(String.init) ?? "exit \(r.status)"
                    throw CLI.Failure(description: "systemctl --user \(args.joined(separator: " ")): \(why)"
                                      + (why.contains("bus") ? " (no systemd user session: log in on a console or over ssh, not with su)" : ""))
                }
            }
        }
    }

    /// Runs `systemctl --user …` found on PATH; output and exit status.
    static func systemctl(_ args: [String], environment: [String: String]) -> (status: Int32, output: String, error: String) {
        let path = (environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":").map { $0 + "/systemctl" }
            .first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let path else { return (127, "", "systemctl not found on PATH (is this a systemd system?)") }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = ["--user"] + args
        p.environment = environment
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = FileHandle.nullDevice
        do { try p.run() } catch { return (127, "", "\(path): \(error.localizedDescription)") }
        let o = out.fileHandleForReading.readDataToEndOfFile()
        let e = err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
    }
}
