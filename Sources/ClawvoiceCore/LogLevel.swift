// LogLevel: the severity every log line carries; machines name it in their log actions.

/// Severity of a log line.
public enum LogLevel: String, Sendable, Comparable {
    case debug, info, warning, error
    private var rank: Int { switch self { case .debug: 0; case .info: 1; case .warning: 2; case .error: 3 } }
    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rank < b.rank }
}
