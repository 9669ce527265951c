// `clawvoice gateways [list | use NAME | forget NAME]`: the paired gateways in the store; a running daemon is told to switch.

import ClawvoiceCore
import Foundation
import GatewayClient
import GatewayCrypto
import GatewayProtocol
import NodeRuntime
import Store

/// `clawvoice gateways`.
enum GatewaysCommand {
    static let command = CLI.Command(name: "gateways", abstract: "List paired gateways; switch or forget one.",
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
                flags: [:], maxPositionals: 2)

        static func run(_ p: CLI.Parsed, config: ClawConfig, paths: RuntimePaths, log: LogSink, environment: [String: String]) async throws -> Int32 {
        let store = try openStore(paths)
        let action = p.positionals.first ?? "list"
        switch action {
        case "list":
            let all = try store.gateways()
            if all.isEmpty {
                CLI.say("No gateways paired yet. Pair one with `clawvoice pair <setup-code>` or `clawvoice pair --url URL --token-file FILE`.")
                return 0
            }
            for g in all {
                let roles = try store.tokens(gateway: g.name).map(\.role).sorted()
                let pin = g.tlsFingerprint.map { " pinned \($0.prefix(16))…" } ?? ""
                CLI.say("\(g.isActive ? "*" : " ") \(g.name)  \(g.url)  tokens: \(roles.isEmpty ? "none" : roles.joined(separator: ","))\(pin)")
            }
            return 0
        case "use", "forget":
            guard p.positionals.count == 2 else { throw CLI.UsageError(description: "gateways \(action) needs a gateway NAME") }
            let name = p.positionals[1]
            // The config's gateway.url picks the gateway at every start (resolveActiveGateway), so a
            // switch made here would be undone at once: say so instead of pretending it worked.
            if action == "use", let url = config.gateway.url, GatewayNaming.name(for: url) != name {
                throw CLI.UsageError(description: "gateways use: the config's gateway.url (\(url)) picks the gateway; "
                                 + "remove it from the config (or unset CLAWVOICE_GATEWAY_URL) to switch with `gateways use`")
            }
            guard try store.gateway(named: name) != nil else {
                throw CLI.UsageError(description: "no gateway named '\(name)' (see `clawvoice gateways`)")
            }
            let wasActive = try store.activeGateway()?.name == name
            if action == "use" {
                try store.setActiveGateway(name: name)
                CLI.say("Active gateway: \(name).")
            } else {
                let queued = try store.outboxCount(gateway: name)
                try store.deleteGateway(name: name)
                CLI.say("Forgot \(name): its tokens, pin, transcript cache"
                    + (queued > 0 ? " and the \(queued) turn\(queued == 1 ? "" : "s") waiting in its outbox are deleted." : " and outbox are deleted."))
            }
            // A running daemon stops talking at once and comes back on the (new) active gateway.
            if action == "use" || wasActive,
               (try? ControlSocketClient.send(["cmd": "restart", "reason": .string("gateway \(action == "use" ? "switched" : "forgotten")")],
                                              path: paths.controlSocket, timeoutSeconds: 5)) != nil {
                CLI.say("The running daemon switched over.")
            }
            return 0
        default:
            throw CLI.UsageError(description: "gateways: unknown action '\(action)' (list, use NAME, forget NAME)")
        }
    }
}
