// GatewayClient owns the live link to an OpenClaw Gateway: one WebSocket session per role
// (node, operator) from one device identity, the handshake and its signature, pairing as a
// waiting state, reconnect with backoff, the tick watchdog, request/response matching and
// node.invoke dispatch. Timing and retry decisions live in pure values (ConnectionMachine,
// ReconnectBackoff) so they are tested without sockets; GatewaySession carries them out.
// It must not touch audio, the outbox or the CLI's output format.

public import ClawvoiceCore
public import Foundation

/// Where log lines go: journald-friendly single lines on stderr in the daemon, a buffer in tests.
/// Credentials and key material must never be passed in.
/// How a log line looks: the decision is pure, given the environment and stderr's identity.
public enum LogFormat {
    /// syslog priorities: err 3, warning 4, info 6, debug 7.
    public static func priority(_ l: LogLevel) -> Int {
        switch l { case .error: 3; case .warning: 4; case .info: 6; case .debug: 7 }
    }

    public static func line(_ level: LogLevel, _ component: String, _ message: String, journald: Bool) -> String {
        journald ? "<\(priority(level))>\(component): \(message)" : "\(level.rawValue) \(component): \(message)"
    }

    /// systemd sets JOURNAL_STREAM=device:inode of the stream it connected; a stderr redirected
    /// elsewhere (a pipe, a file) since then is not journald's.
    public static func underJournald(_ journalStream: String?, stderr: (device: UInt64, inode: UInt64)?) -> Bool {
        guard let js = journalStream, let stderr else { return false }
        let parts = js.split(separator: ":")
        guard parts.count == 2, let dev = UInt64(parts[0]), let ino = UInt64(parts[1]) else { return false }
        return dev == stderr.device && ino == stderr.inode
    }

    public static func stderrDeviceInode() -> (device: UInt64, inode: UInt64)? {
        var st = stat()
        guard fstat(2, &st) == 0 else { return nil }
        return (UInt64(st.st_dev), UInt64(st.st_ino))
    }
}

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

    /// Plain `level component: message` lines on a terminal; under journald (JOURNAL_STREAM names
    /// this stderr) `<N>component: message` with N the syslog priority, so journald files each
    /// line at its level.
    public static func stderr(minimum: LogLevel = .info,
                              environment: [String: String] = ProcessInfo.processInfo.environment) -> LogSink {
        let journald = LogFormat.underJournald(environment["JOURNAL_STREAM"], stderr: LogFormat.stderrDeviceInode())
        return LogSink(minimum: minimum) { level, component, message in
            FileHandle.standardError.write(Data((LogFormat.line(level, component, message, journald: journald) + "\n").utf8))
        }
    }

    public static let silent = LogSink(minimum: .error) { _, _, _ in }
}
