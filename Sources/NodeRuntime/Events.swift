// `clawvoice events` and event commands: every event of the daemon (wake, listeningStarted,
// listeningStopped, turnSent, replyStarted, replyFinished, speaking, stopWord, error, muted,
// unmuted, connected, disconnected) as one JSON line to each subscriber of the control socket, and
// through the command the config names for it, with its fields in the environment (as
// wyoming-satellite's --*-command flags run theirs).

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

/// Fans events out to subscribers and runs the configured commands. Never blocks the caller.
final class EventBus: Sendable {
    private let subscribers = Mutex<[Int: AsyncStream<String>.Continuation]>([:])
    private let nextId = Mutex(0)
    private let commands: Mutex<[String: String]>
    private let log: LogSink

    init(commands: [String: String], log: LogSink) {
        self.commands = Mutex(commands)
        self.log = log
    }

    func setCommands(_ c: [String: String]) { commands.withLock { $0 = c } }

    func publish(_ name: String, _ fields: [String: String] = [:]) {
        let ts = nowMs()
        let line = NodeEvents.line(name, fields, ts: ts)
        for c in subscribers.withLock({ Array($0.values) }) { c.yield(line) }
        if let command = commands.withLock({ $0[name] }) { run(command, env: NodeEvents.environment(name, fields, ts: ts)) }
    }

    /// A stream of lines until `unsubscribe` (or the daemon stopping).
    func subscribe() -> (Int, AsyncStream<String>) {
        let id = nextId.withLock { n in n += 1; return n }
        let (stream, sink) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .bufferingNewest(256))
        subscribers.withLock { $0[id] = sink }
        return (id, stream)
    }

    func unsubscribe(_ id: Int) { subscribers.withLock { $0.removeValue(forKey: id)?.finish() } }

    func finishAll() { subscribers.withLock { for c in $0.values { c.finish() }; $0.removeAll() } }

    /// `/bin/sh -c command`, not waited for; its output is dropped, a failure to start is logged.
    private func run(_ command: String, env extra: [String: String]) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/sh")
        p.arguments = ["-c", command]
        p.environment = ProcessInfo.processInfo.environment.merging(extra) { _, new in new }
        p.standardInput = FileHandle.nullDevice
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        let log = self.log
        p.terminationHandler = { p in
            if p.terminationStatus != 0 { log.log(.warning, "events", "\(extra["CLAWVOICE_EVENT"] ?? "?") command exited \(p.terminationStatus)") }
        }
        do { try p.run() } catch { log.log(.warning, "events", "cannot run the \(extra["CLAWVOICE_EVENT"] ?? "?") command: \(error)") }
    }
}
