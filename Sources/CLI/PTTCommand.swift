// `clawvoice ptt start|stop|cancel|once`: push-to-talk through the running daemon.

import ClawvoiceCore
import Foundation
import GatewayClient
import GatewayCrypto
import GatewayProtocol
import NodeRuntime

/// `clawvoice ptt`.
enum PTTCommand {
    static let command = CLI.Command(name: "ptt", abstract: "Push-to-talk through the running daemon: start, stop, cancel or once.",
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
                """, flags: ["--json": false], maxPositionals: 1)

    static func run(_ p: CLI.Parsed, config: ClawConfig, paths: RuntimePaths, log: LogSink, environment: [String: String]) async throws -> Int32 {
        guard let action = p.positionals.first, ["start", "stop", "cancel", "once"].contains(action) else {
            throw CLI.UsageError(description: "ptt needs one of start, stop, cancel, once")
        }
        let r = try ControlSocketClient.send(["cmd": "ptt", "action": .string(action)], path: paths.controlSocket, timeoutSeconds: 90)
        guard r["ok"]?.boolValue == true, let result = r["result"] else {
            throw CLI.Failure(description: "ptt \(action): \(r["error"]?.stringValue ?? "failed")")
        }
        if p.flags["--json"] != nil { CLI.say(result.description) } else {
            var line = "capture \(result["captureId"]?.stringValue ?? "?")"
            if let st = result["status"]?.stringValue { line += ": \(st)" }
            if let t = result["transcript"]?.stringValue { line += " \"\(t)\"" }
            CLI.say(line)
        }
        return 0
    }
}
