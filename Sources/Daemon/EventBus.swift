// The daemon's event fan-out: every NodeEvents line to each `clawvoice events` subscriber of the
// control socket, and to the command the config names for it.

import ClawvoiceCore
import GatewayCrypto
import Synchronization
import Foundation
import GatewayClient
import GatewayProtocol
import NodeRuntime

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
