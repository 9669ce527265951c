// `clawvoice history` and `clawvoice listen`, and the daemon's side of both.
//
// history answers from the transcript cache in the store at once, daemon or not, and says how
// old the answer is; when a daemon runs it is asked (without waiting) to refresh the session
// from chat.history, so the next `history` is current. listen goes through the daemon, which
// owns the speaker: it finds the message in the cache (refreshing when it is missing) and
// toggles the ListenPlayer.

import ClawvoiceCore
import Daemon
import Foundation
import GatewayClient
import GatewayCrypto
import GatewayProtocol
import NodeRuntime
import Store
import Talk

enum HistoryCommand {
    /// A cache older than this is marked stale.
    static let staleAfterMs: Int64 = 60_000
    /// Default and largest `--limit`.
    static let defaultLimit = 20
    static let maxLimit = TranscriptSync.pageLimit
    /// Longest text shown per message before it is cut with "…".
    static let maxTextChars = 100

    static let command = CLI.Command(
        name: "history", abstract: "Show recent messages of a chat session, from the local cache (works offline).",
        usage: "clawvoice history [--session KEY] [--limit N] [--ids] [--json]",
        details: """
        Answers at once from the transcript cache this node keeps per gateway, and says how old it is:
        "(cached 75s ago, stale)" past 60 s, "(offline: daemon not running)" when no daemon can refresh it.
        A running daemon is asked to fetch the session again from chat.history in the background, so
        running history again shortly after shows the current state.

        Options:
          --session KEY   the session (default: talk.sessionKey, else the gateway's main session)
          --limit N       how many of the newest messages to show (default 20, at most 100)
          --ids           show each message's id (for `clawvoice listen MESSAGE_ID`)
          --json          print the session and its messages as JSON
        """,
        flags: ["--session": true, "--limit": true, "--ids": false, "--json": false], maxPositionals: 0)

    static func run(_ p: CLI.Parsed, config: ClawConfig, paths: RuntimePaths, say: (String) -> Void) throws -> Int32 {
        var limit = defaultLimit
        if let l = p.flags["--limit"] {
            guard let n = Int(l), n > 0 else { throw CLI.UsageError(description: "history: --limit needs a positive number") }
            limit = min(n, maxLimit)
        }
        let store = try openStore(paths)
        guard let record = try resolveActiveGateway(config: config, store: store) else {
            throw ConfigError("no gateway paired yet: run `clawvoice pair <setup-code>` first; there is no history to show")
        }
        // One short round trip first: whether a daemon runs (and is connected), which session it is
        // on (`clawvoice session use` switches it at run time), and it starts the refresh.
        var request: [String: JSONValue] = ["cmd": "history-refresh"]
        if let s = p.flags["--session"] { request["session"] = .string(s) }
        let offline: String?
        var key = HistorySession.key(explicit: p.flags["--session"], config: config, store: store, gateway: record.name)
        if let r = try? ControlSocketClient.send(.object(request), path: paths.controlSocket, timeoutSeconds: 1) {
            offline = r["connected"]?.boolValue == false ? "gateway not connected" : nil
            if let k = r["sessionKey"]?.stringValue, !k.isEmpty { key = k }
        } else {
            offline = "daemon not running"
        }
        let session = try store.cachedSession(gateway: record.name, sessionKey: key)
        let messages = try store.cachedMessages(gateway: record.name, sessionKey: key, limit: limit)
        let now = nowMs()
        if p.flags["--json"] != nil {
            say(json(gateway: record.name, key: key, session: session, messages: messages, offline: offline, nowMs: now).description)
            return 0
        }
        for line in format(gateway: record.name, key: key, session: session, messages: messages, offline: offline,
                           showIds: p.flags["--ids"] != nil, nowMs: now) {
            say(line)
        }
        return 0
    }

    /// The header and one `role  time  text` line per message.
    static func format(gateway: String, key: String, session: CachedSession?, messages: [CachedMessage], offline: String?,
                       showIds: Bool, nowMs: Int64) -> [String] {
        var header = "\(key) on \(gateway)"
        if let s = session {
            let age = s.ageMs(nowMs: nowMs)
            header += age > staleAfterMs ? " (cached \(age / 1000)s ago, stale)" : " (cached \(age / 1000)s ago)"
        } else {
            header += " (not cached yet)"
        }
        if let offline { header += " (offline: \(offline))" }
        var lines = [header]
        if messages.isEmpty {
            lines.append(offline == nil
                ? "  no messages cached yet; the daemon is fetching them: run `clawvoice history` again in a moment"
                : "  no messages cached; start the daemon (`clawvoice run`) to fetch them")
            return lines
        }
        let width = max(9, messages.map(\.role.count).max() ?? 0)
        for m in messages {
            var line = "  "
            if showIds { line += (m.messageId ?? "-") + "  " }
            line += m.role.padding(toLength: width, withPad: " ", startingAt: 0) + "  "
            line += time(m.timestampMs, nowMs: nowMs) + "  " + oneLine(m.text)
            lines.append(line)
        }
        return lines
    }

    static func json(gateway: String, key: String, session: CachedSession?, messages: [CachedMessage], offline: String?,
                     nowMs: Int64) -> JSONValue {
        func opt(_ s: String?) -> JSONValue { s.map { .string($0) } ?? .null }
        func opt(_ n: Int64?) -> JSONValue { n.map { .number(Double($0)) } ?? .null }
        let age = session?.ageMs(nowMs: nowMs)
        return ["gateway": .string(gateway), "sessionKey": .string(key), "cached": .bool(session != nil),
                "refreshedAtMs": opt(session?.refreshedAtMs), "ageMs": opt(age), "stale": .bool((age ?? Int64.max) > staleAfterMs),
                "offline": opt(offline),
                "messages": .array(messages.map { m in
                    ["id": opt(m.messageId), "role": .string(m.role), "text": .string(m.text), "timestampMs": opt(m.timestampMs),
                     "runId": opt(m.runId), "idempotencyKey": opt(m.idempotencyKey)]
                })]
    }

    /// "14:02" today, "2026-11-28 14:02" on another day, "--:--" without a timestamp (local time).
    static func time(_ ms: Int64?, nowMs: Int64) -> String {
        guard let ms else { return "--:--" }
        let date = Date(timeIntervalSince1970: Double(ms) / 1000)
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.dateFormat = Calendar.current.isDate(date, inSameDayAs: Date(timeIntervalSince1970: Double(nowMs) / 1000))
            ? "HH:mm" : "yyyy-MM-dd HH:mm"
        return f.string(from: date)
    }

    /// The text on one line, cut to `maxTextChars` with "…".
    static func oneLine(_ text: String) -> String {
        let flat = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }.joined(separator: " ")
        if flat.isEmpty { return "(no text)" }
        return flat.count > maxTextChars ? String(flat.prefix(maxTextChars - 1)) + "…" : flat
    }
}

enum ListenCommand {
    static let command = CLI.Command(
        name: "listen", abstract: "Speak a chat message (the newest answer by default); again stops it.",
        usage: "clawvoice listen [--last | MESSAGE_ID] [--session KEY]",
        details: """
        Asks the running daemon to speak an assistant message with the gateway's tts.speak voice (espeak-ng
        on this device when the gateway cannot). One message plays at a time: asking for the message that
        is playing stops it, asking for another one replaces it. It also interrupts a spoken reply.
        Message ids are shown by `clawvoice history --ids`.

        Options:
          --last          the newest assistant message of the session (the default)
          --session KEY   the session for --last (default: talk.sessionKey, else the gateway's main session)
          --json          print the daemon's answer as JSON
        """,
        flags: ["--last": false, "--session": true, "--json": false], maxPositionals: 1)

    static func run(_ p: CLI.Parsed, paths: RuntimePaths, say: (String) -> Void) throws -> Int32 {
        let id = p.positionals.first
        if id != nil && p.flags["--last"] != nil {
            throw CLI.UsageError(description: "listen: give --last or a MESSAGE_ID, not both")
        }
        var request: [String: JSONValue] = ["cmd": "listen"]
        if let id { request["messageId"] = .string(id) } else { request["last"] = true }
        if let s = p.flags["--session"] { request["session"] = .string(s) }
        // The daemon may fetch chat.history first (up to 15 s) when the message is not cached.
        let r = try ControlSocketClient.send(.object(request), path: paths.controlSocket, timeoutSeconds: 30)
        if p.flags["--json"] != nil { say(r.description) }
        guard r["ok"]?.boolValue == true else {
            throw CLI.Failure(description: "listen: \(r["error"]?.stringValue ?? "failed")")
        }
        if p.flags["--json"] != nil { return 0 }
        let message = r["messageId"]?.stringValue ?? "?"
        switch r["action"]?.stringValue {
        case "stopped":
            say("stopped message \(message)")
        default:
            var line = "speaking message \(message) (\(Int(r["chars"]?.doubleValue ?? 0)) chars)"
            if let replaced = r["replaced"]?.stringValue { line += ", instead of \(replaced)" }
            say(line)
        }
        return 0
    }
}
