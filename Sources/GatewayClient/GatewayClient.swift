// GatewayClient owns the live link to an OpenClaw Gateway: one WebSocket session per role
// (node, operator) from one device identity, the handshake and its signature, pairing as a
// waiting state, reconnect with backoff, the tick watchdog, request/response matching and
// node.invoke dispatch. Timing and retry decisions live in pure values (ConnectionMachine,
// ReconnectBackoff) so they are tested without sockets; GatewaySession carries them out.
// It must not touch audio, the outbox or the CLI's output format.

import Foundation

/// Severity of a log line.
public enum LogLevel: String, Sendable, Comparable {
    case debug, info, warning, error
    private var rank: Int { switch self { case .debug: 0; case .info: 1; case .warning: 2; case .error: 3 } }
    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rank < b.rank }
}

/// Where log lines go: journald-friendly single lines on stderr in the daemon, a buffer in tests.
/// Credentials and key material must never be passed in.
public struct LogSink: Sendable {
    public var minimum: LogLevel
    private let write: @Sendable (LogLevel, String, String) -> Void

    public init(minimum: LogLevel = .info, write: @escaping @Sendable (LogLevel, String, String) -> Void) {
        self.minimum = minimum
        self.write = write
    }

    public func log(_ level: LogLevel, _ component: String, _ message: String) {
        guard level >= minimum else { return }
        write(level, component, message)
    }

    public static func stderr(minimum: LogLevel = .info) -> LogSink {
        LogSink(minimum: minimum) { level, component, message in
            let line = "\(level.rawValue) \(component): \(message)\n"
            FileHandle.standardError.write(Data(line.utf8))
        }
    }

    public static let silent = LogSink(minimum: .error) { _, _, _ in }
}
