// `clawvoice call` and `hangup`: a realtime call through the running daemon.

import ClawvoiceCore
import Foundation
import GatewayClient
import GatewayCrypto
import GatewayProtocol
import NodeRuntime

/// `clawvoice call|hangup`.
enum CallCommand {
    static let call = CLI.Command(name: "call", abstract: "Start a realtime call with the agent (talk.calls must be on).",
                usage: "clawvoice call",
                details: """
                The node asks the gateway for a Gateway-controlled WebRTC call (talk.client.create with
                gateway-control-v1) in the current talk session, and the room is in a live conversation until
                `clawvoice hangup`, talk.stop, two minutes without speech, or the gateway ends it. While a call
                holds the room push-to-talk and wake words answer BUSY. The agent can start one too (talk.start),
                once the gateway allows talk.start and talk.stop (gateway.nodes.commands.allow).
                """, flags: [:], maxPositionals: 0)

    static let hangup = CLI.Command(name: "hangup", abstract: "End the realtime call.",
                usage: "clawvoice hangup", details: "Says whether a call was ended; `status` shows how the last call ended.",
                flags: [:], maxPositionals: 0)

    static func run(_ p: CLI.Parsed, config: ClawConfig, paths: RuntimePaths, log: LogSink, environment: [String: String]) async throws -> Int32 {
        let r = try ControlSocketClient.send(["cmd": .string(p.command.name)], path: paths.controlSocket, timeoutSeconds: 10)
        guard r["ok"]?.boolValue == true else { throw CLI.Failure(description: "\(p.command.name): \(r["error"]?.stringValue ?? "failed")") }
        if p.command.name == "call" {
            CLI.say(r["started"]?.boolValue == true ? "calling: `clawvoice status` shows the call, `clawvoice hangup` ends it" : "a call is already on")
        } else {
            CLI.say(r["stopped"]?.boolValue == true ? "hung up" : "no call was on")
        }
        return 0
    }
}
