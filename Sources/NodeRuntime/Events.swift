// `clawvoice events` and event commands: every event of the daemon (wake, listeningStarted,
// listeningStopped, turnSent, replyStarted, replyFinished, speaking, stopWord, error, muted,
// unmuted, connected, disconnected) as one JSON line to each subscriber of the control socket, and
// through the command the config names for it, with its fields in the environment (as
// wyoming-satellite's --*-command flags run theirs).

import ClawvoiceCore
import GatewayCrypto
import Synchronization
import Foundation
import GatewayClient
import GatewayProtocol

public enum NodeEvents {
    /// Every event with its fields (the config's `events` section and its docs come from this list).
    public static let catalog: [(name: String, fields: String)] = [
        ("wake", "phrase, score"),
        ("listeningStarted", "captureId, sessionKey, trigger (ptt|wake)"),
        ("listeningStopped", "captureId, reason (ended|cancelled)"),
        ("turnSent", "idempotencyKey, runId, sessionKey"),
        ("replyStarted", "runId, sessionKey"),
        ("replyFinished", "runId, sessionKey, state"),
        ("speaking", "state (started|stopped)"),
        ("stopWord", "score: \"stop\" stopped the speech"),
        ("error", "message"),
        ("muted", "no fields"),
        ("unmuted", "no fields"),
        ("connected", "role, gateway, detail"),
        ("disconnected", "role, gateway, detail"),
        ("callStarted", "callId, path (webrtc|relay), origin, sessionKey"),
        ("callEnded", "callId, path, reason"),
    ]
    public static let names = catalog.map { $0.name }

    /// The JSON line: `{"event":NAME,"ts":ms,…fields}`.
    public static func line(_ name: String, _ fields: [String: String], ts: Int64) -> String {
        var o: [String: JSONValue] = fields.mapValues { .string($0) }
        o["event"] = .string(name)
        o["ts"] = .number(Double(ts))
        return JSONValue.object(o).description
    }

    /// The environment of an event command: CLAWVOICE_EVENT, CLAWVOICE_TS and CLAWVOICE_<FIELD>
    /// for each field, the name in upper snake case (captureId → CLAWVOICE_CAPTURE_ID).
    public static func environment(_ name: String, _ fields: [String: String], ts: Int64) -> [String: String] {
        var env = ["CLAWVOICE_EVENT": name, "CLAWVOICE_TS": String(ts)]
        for (k, v) in fields { env["CLAWVOICE_" + snake(k)] = v }
        return env
    }

    static func snake(_ s: String) -> String {
        var out = ""
        for ch in s {
            if ch.isUppercase && !out.isEmpty { out += "_" }
            out += ch.uppercased()
        }
        return out
    }
}
