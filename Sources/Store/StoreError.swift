// StoreError: one line per failure, naming the file or SQLite call. Never a seed or a token.

/// Why a store operation failed.
public enum StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The state directory could not be created or restricted to its owner.
    case directory(path: String, reason: String)
    /// A file in the state directory could not be created or chmod'ed.
    case permissions(path: String, reason: String)
    /// The file exists but is not an SQLite database, or is damaged.
    case notADatabase(path: String, message: String)
    /// The file was written by a newer clawvoice, whose schema this build does not know.
    case schemaTooNew(found: Int, supported: Int)
    /// A write referred to a row that does not exist (for example a token for a missing gateway).
    case foreignKey(message: String)
    /// No gateway with this name is configured.
    case unknownGateway(String)
    /// The stored identity is unusable (wrong seed length, or key and seed disagree).
    case corruptIdentity(String)
    /// A column held a value this build cannot read.
    case corruptValue(table: String, column: String)
    /// Generating or loading the Ed25519 key failed in OpenSSL.
    case identity(String)
    /// The gateway's outbox already holds `limit` turns; the new one was not written.
    case outboxFull(gateway: String, limit: Int)
    /// No outbox turn with this number is queued for the gateway (sent and confirmed, dropped, or never there).
    case unknownOutboxItem(seq: Int64, gateway: String)
    /// Any other SQLite failure: the call, its extended result code and `sqlite3_errmsg`.
    case sqlite(call: String, code: Int32, message: String)

    public var description: String {
        switch self {
        case .directory(let path, let reason):
            return "cannot prepare state directory \(path): \(reason)"
        case .permissions(let path, let reason):
            return "cannot restrict permissions of \(path): \(reason)"
        case .notADatabase(let path, let message):
            return "\(path) is not a usable SQLite database (\(message)); move it aside and pair again"
        case .schemaTooNew(let found, let supported):
            return "database schema version \(found) is newer than this clawvoice supports (\(supported)); upgrade clawvoice"
        case .foreignKey(let message):
            return "store write refers to a missing row (\(message))"
        case .unknownGateway(let name):
            return "no gateway named '\(name)'; add it first"
        case .corruptIdentity(let why):
            return "stored device identity is unusable: \(why); move the database aside and pair again"
        case .corruptValue(let table, let column):
            return "stored value in \(table).\(column) is unreadable"
        case .identity(let why):
            return "device identity: \(why)"
        case .outboxFull(let gateway, let limit):
            return "\(limit) turns are already waiting for \(gateway); `clawvoice outbox list` shows them, `clawvoice outbox drop N` removes one"
        case .unknownOutboxItem(let seq, let gateway):
            return "no turn \(seq) in the outbox for \(gateway); `clawvoice outbox list` shows the queued ones"
        case .sqlite(let call, let code, let message):
            return "\(call) failed: \(message) (SQLite code \(code))"
        }
    }
}
