// `clawvoice run`: the daemon in the foreground (the Daemon module).

import ClawvoiceCore
import Daemon
import Foundation
import GatewayClient
import GatewayCrypto
import GatewayProtocol
import NodeRuntime

/// `clawvoice run`.
enum RunCommand {
    static let command = CLI.Command(name: "run", abstract: "Run the node daemon: keep both sessions to the active gateway up.",
                usage: "clawvoice run",
                details: """
                The node itself, in the foreground: connects as node and operator to the active gateway
                (`clawvoice gateways` marks it with *; the config's gateway.url takes its place), reconnects
                with backoff, listens for push-to-talk and wake words, sends turns through the outbox, speaks
                replies, and answers the other commands (status, ptt, stop, mute, volume, events, say, session)
                on its control socket. Logs go to stderr, one line each.
                SIGINT or SIGTERM stop it (queued turns stay in the outbox); SIGHUP reloads the config file.
                `clawvoice service install` runs it as a systemd user service instead.
                """, flags: [:], maxPositionals: 0)

    static func run(_ p: CLI.Parsed, config: ClawConfig, paths: RuntimePaths, log: LogSink, environment: [String: String]) async throws -> Int32 {
        // One daemon for the life of the process: a gateway switch rebuilds its link in place,
        // SIGHUP reloads this config file.
        let (flag, env) = (p.configFlag, environment)
        let daemon = try NodeDaemon(paths: paths, config: config, log: log,
                                    reload: { try RuntimePaths.load(configFlag: flag, environment: env).0 })
        try await daemon.run()
        return 0
    }
}
