// `clawvoice status`: the daemon's status over the control socket, as lines (or JSON).

import ClawvoiceCore
import Foundation
import GatewayClient
import GatewayCrypto
import GatewayProtocol
import NodeRuntime

/// `clawvoice status` and its lines.
enum StatusCommand {
    static let command = CLI.Command(name: "status", abstract: "Show the daemon's connection state per role.",
                usage: "clawvoice status [--json]",
                details: "Asks the running daemon over its control socket.\n\nOptions:\n  --json   print the full status as JSON",
                flags: ["--json": false], maxPositionals: 0)

    static func run(_ p: CLI.Parsed, config: ClawConfig, paths: RuntimePaths, log: LogSink, environment: [String: String]) async throws -> Int32 {
        let response = try ControlSocketClient.send(["cmd": "status"], path: paths.controlSocket)
        if p.flags["--json"] != nil {
            CLI.say(response.description)
        } else {
            CLI.say(StatusCommand.formatStatus(response))
        }
        return 0
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
        let enrolled = (w["enrolled"]?.arrayValue ?? []).compactMap(\.stringValue)
        if !enrolled.isEmpty {
            lines.append("            enrolled (tuned to this household's takes): \(enrolled.joined(separator: ", "))")
        }
        for m in w["missing"]?.arrayValue ?? [] {
            lines.append("            \"\(m["phrase"]?.stringValue ?? "?")\" has no model → \(m["command"]?.stringValue ?? "")")
        }
        if let e = w["error"]?.stringValue { lines.append("            models: \(e)") }
        return lines
    }
}
