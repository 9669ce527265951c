// `clawvoice session [use KEY]`: show or switch the chat session through the running daemon.

import ClawvoiceCore
import Foundation
import GatewayClient
import GatewayCrypto
import GatewayProtocol
import NodeRuntime

/// `clawvoice session`.
enum SessionCommand {
    static let command = CLI.Command(name: "session", abstract: "Show or switch the chat session the node talks to.",
                usage: "clawvoice session [use KEY]",
                details: """
                Switching stops everything at once, as the phone apps do: a capture in progress is cancelled,
                the transcription relay is closed, speech stops within 50 ms, and late replies of the old
                session are dropped. KEY looks like agent:main:kitchen (`clawvoice history` lists sessions).
                """, flags: [:], maxPositionals: 2)

    static func run(_ p: CLI.Parsed, config: ClawConfig, paths: RuntimePaths, log: LogSink, environment: [String: String]) async throws -> Int32 {
        let action = p.positionals.first ?? "show"
        var request: JSONValue = ["cmd": "session"]
        if action == "use" {
            guard p.positionals.count == 2 else { throw CLI.UsageError(description: "session use needs a session KEY (e.g. agent:main:kitchen)") }
            if let why = ControlLine.sessionKeyProblem(p.positionals[1]) { throw CLI.UsageError(description: "session use: \(why)") }
            request = ["cmd": "session", "use": .string(p.positionals[1])]
        } else if action != "show" {
            throw CLI.UsageError(description: "session: use KEY, or no argument to show the current session")
        }
        let r = try ControlSocketClient.send(request, path: paths.controlSocket)
        CLI.say(action == "use" ? "now talking to \(r["sessionKey"]?.stringValue ?? "?"); capture and speech were stopped"
                            : "current session: \(r["sessionKey"]?.stringValue ?? "the gateway's main session")")
        return 0
    }
}
