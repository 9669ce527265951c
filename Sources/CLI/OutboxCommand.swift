// `clawvoice outbox list|retry N|drop N` and `clawvoice send "text"`. They work on the SQLite
// file directly, not through the daemon: the daemon's sender re-reads the queue at least
// twice a second, so a retry, drop or new turn takes effect within a second, and the commands
// also work (and queue) while no daemon runs.

import Daemon
import ClawvoiceCore
import Foundation
import GatewayCrypto
import GatewayProtocol
import NodeRuntime
import Store
import Talk

enum OutboxCommand {
    static let outboxCommand = CLI.Command(
        name: "outbox", abstract: "Show the turns waiting for the gateway; send a held one again or drop it.",
        usage: "clawvoice outbox [list [--json] | retry N | drop N]",
        details: """
        Every spoken or typed turn is written to a durable queue (per gateway, in the state database)
        before it is answered `queued`, and leaves it only when the gateway's chat history shows it.
        The daemon sends the oldest one first, with the same idempotency key on every try, so the
        gateway keeps exactly one copy. After 5 failed tries a turn is HELD, and the turns behind it
        wait too, until you decide. At most 50 turns wait per gateway; a turn still unsent 48 h after
        it was queued expires (the daemon logs it). Forgetting the gateway empties its queue.

          list      the waiting turns, oldest first: number, state, age, session, first words, last error
          retry N   send turn N again now, with a fresh count of tries (the running daemon picks it up
                    within a second)
          drop N    remove turn N unsent

        Options:
          --json    list as a JSON array
        """, flags: ["--json": false], maxPositionals: 2)

    static let sendCommand = CLI.Command(
        name: "send", abstract: "Queue a typed turn for the active gateway; the running daemon sends it.",
        usage: "clawvoice send \"text\" [--session KEY]",
        details: """
        Writes the text to the outbox (see `clawvoice outbox --help`) and prints its number. The
        running daemon sends it within a second; without a daemon it waits until `clawvoice run`.
        Fails with one line, and writes nothing, when 50 turns are already waiting.

        Options:
          --session KEY   the chat session (default: the current one, as `clawvoice session`
                          shows it: `session use`, else talk.sessionKey, else the gateway's main)
        """, flags: ["--session": true], maxPositionals: 1)

    /// `clawvoice outbox [list [--json] | retry N | drop N]` for the active gateway.
    static func run(_ p: CLI.Parsed, config: ClawConfig, paths: RuntimePaths, say: (String) -> Void) throws -> Int32 {
        let action = p.positionals.first ?? "list"
        if action == "list" {
            // Reading must work when writing cannot (a full disk): opening for writing creates the
            // WAL files and resolving the gateway records it, so a failure there falls back to a
            // store opened read only and a gateway looked up without writing.
            let (store, gatewayName) = try storeForReading(config: config, paths: paths)
            let items = try store.outbox(gateway: gatewayName)
            if p.flags["--json"] != nil {
                say(JSONValue.array(items.map(json)).description)
            } else {
                for line in describe(items, gateway: gatewayName, nowMs: nowMs()) { say(line) }
            }
            return 0
        }
        let store = try openStore(paths)
        let gateway = try activeGateway(config: config, store: store)
        switch action {
        case "list":
            let items = try store.outbox(gateway: gateway.name)
            if p.flags["--json"] != nil {
                say(JSONValue.array(items.map(json)).description)
            } else {
                for line in describe(items, gateway: gateway.name, nowMs: nowMs()) { say(line) }
            }
            return 0
        case "retry", "drop":
            guard p.positionals.count == 2, let seq = Int64(p.positionals[1]), seq > 0 else {
                throw CLI.UsageError(description: "outbox \(action) needs the turn's number N from `clawvoice outbox list`")
            }
            guard let item = try store.outboxItem(seq: seq), item.gateway == gateway.name else {
                throw StoreError.unknownOutboxItem(seq: seq, gateway: gateway.name)
            }
            if action == "retry" {
                guard try store.markOutboxPending(seq: seq) else { throw StoreError.unknownOutboxItem(seq: seq, gateway: gateway.name) }
                say("Turn \(seq) (\"\(item.preview)\") will be sent again\(daemonNote(paths)).")
            } else {
                guard try store.deleteOutbox(seq: seq) else { throw StoreError.unknownOutboxItem(seq: seq, gateway: gateway.name) }
                say("Dropped turn \(seq) (\"\(item.preview)\"); it was not sent.")
            }
            return 0
        default:
            throw CLI.UsageError(description: "outbox: unknown action '\(action)' (list, retry N, drop N)")
        }
    }

    /// `clawvoice send "text" [--session KEY]`: queues a typed turn and prints its number.
    static func send(_ p: CLI.Parsed, config: ClawConfig, paths: RuntimePaths, say: (String) -> Void) throws -> Int32 {
        guard let text = p.positionals.first, !text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            throw CLI.UsageError(description: "send needs the text to send (see `clawvoice send --help`)")
        }
        if let key = p.flags["--session"], key.isEmpty || key.count > 512 {
            throw CLI.UsageError(description: "send: --session needs a session key of 1 to 512 characters")
        }
        let store = try openStore(paths)
        let gateway = try activeGateway(config: config, store: store)
        let session = HistorySession.key(explicit: p.flags["--session"], config: config, store: store, gateway: gateway.name)
        let item = try store.enqueueOutbox(gateway: gateway.name, sessionKey: session, message: text,
                                           idempotencyKey: UUID().uuidString.lowercased(), nowMs: nowMs())
        say("Queued turn \(item.seq) for \(gateway.name) (session \(session))\(daemonNote(paths)).")
        return 0
    }

    /// The store and the active gateway's name, opened for writing if possible, else read only.
    private static func storeForReading(config: ClawConfig, paths: RuntimePaths) throws -> (ClawStore, String) {
        do {
            let store = try openStore(paths)
            return (store, try activeGateway(config: config, store: store).name)
        } catch {
            guard let ro = try? ClawStore(readingOnly: paths.stateDir) else { throw error }
            if let url = config.gateway.url { return (ro, GatewayNaming.name(for: url)) }
            if let active = try ro.activeGateway() { return (ro, active.name) }
            throw error
        }
    }

    private static func activeGateway(config: ClawConfig, store: ClawStore) throws -> GatewayRecord {
        guard let g = try resolveActiveGateway(config: config, store: store, remember: true) else {
            throw ConfigError("no gateway paired yet: run `clawvoice pair <setup-code>` or `clawvoice pair --url ws://HOST:18789 --token-file FILE` first")
        }
        return g
    }

    /// What happens next, depending on whether a daemon answers.
    private static func daemonNote(_ paths: RuntimePaths) -> String {
        if (try? ControlSocketClient.send(["cmd": "ping"], path: paths.controlSocket, timeoutSeconds: 2)) != nil {
            return "; the running daemon sends it within a second"
        }
        return "; no daemon is running, so it goes out when `clawvoice run` starts"
    }

    static func describe(_ items: [OutboxItem], gateway: String, nowMs: Int64) -> [String] {
        guard !items.isEmpty else { return ["Nothing waits for \(gateway): the outbox is empty."] }
        var lines = ["\(items.count) turn\(items.count == 1 ? "" : "s") waiting for \(gateway), oldest first:"]
        for item in items {
            let state: String
            switch item.state {
            case .pending: state = item.attempts == 0 ? "queued" : "retrying"
            case .sent: state = "sent, awaiting chat.history"
            case .held: state = "HELD"
            }
            var line = "  \(item.seq)  \(state)  \(age(nowMs - item.createdAtMs)) ago  \(item.sessionKey)  \"\(item.preview)\""
            if item.attempts > 0 { line += "  tries: \(item.attempts)" }
            if let e = item.lastError, item.state != .sent { line += "  last error: \(e)" }
            lines.append(line)
        }
        if let held = items.first(where: { $0.state == .held }) {
            lines.append("Held turns wait for you, and the turns behind them wait too: `clawvoice outbox retry \(held.seq)` "
                         + "sends it again, `clawvoice outbox drop \(held.seq)` discards it.")
        }
        return lines
    }

    static func age(_ ms: Int64) -> String {
        let s = max(ms, 0) / 1000
        if s < 90 { return "\(s) s" }
        if s < 90 * 60 { return "\(s / 60) min" }
        if s < 48 * 3600 { return "\(s / 3600) h" }
        return "\(s / 86400) d"
    }

    static func json(_ item: OutboxItem) -> JSONValue {
        func opt(_ s: String?) -> JSONValue { s.map { .string($0) } ?? .null }
        return ["seq": .number(Double(item.seq)), "state": .string(item.state.rawValue), "sessionKey": .string(item.sessionKey),
                "message": .string(item.message), "hasAttachments": .bool(item.attachmentsJSON != nil),
                "idempotencyKey": .string(item.idempotencyKey), "createdAtMs": .number(Double(item.createdAtMs)),
                "attempts": .number(Double(item.attempts)), "nextAttemptAtMs": .number(Double(item.nextAttemptAtMs)),
                "sentAtMs": item.sentAtMs.map { .number(Double($0)) } ?? .null, "runId": opt(item.runId),
                "lastError": opt(item.lastError)]
    }
}
