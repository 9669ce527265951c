// The only file that calls sqlite3_*. One connection handle, owned here, closed in deinit.

internal import CSQLite
import Foundation

/// A value bound to a `?` parameter. Everything goes through bindings, never string
/// interpolation, so no credential ever appears in SQL text or in an SQLite error.
enum SQLiteValue {
    case null
    case integer(Int64)
    case text(String)
    case blob([UInt8])

    static func text(_ s: String?) -> SQLiteValue { s.map(SQLiteValue.text) ?? .null }
    static func bool(_ b: Bool) -> SQLiteValue { .integer(b ? 1 : 0) }
}

/// One SQLite connection. Not Sendable: `ClawStore` serialises every call with its lock,
/// and the connection is opened NOMUTEX because of that.
final class SQLiteDatabase {
    private let handle: OpaquePointer
    let path: String

    /// `immutable`: open read only and treat the file as unchanging (no locks, no -shm, -wal
    /// ignored), for reading when nothing can be written.
    init(path: String, immutable: Bool = false) throws(StoreError) {
        var db: OpaquePointer?
        var flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        var name = path
        if immutable {
            flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX
            let escaped = path.replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: "?", with: "%3f")
                .replacingOccurrences(of: "#", with: "%23")
            name = "file:\(escaped)?immutable=1"
        }
        let rc = sqlite3_open_v2(name, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
            sqlite3_close_v2(db)
            throw Self.error(call: "sqlite3_open_v2", code: rc, message: message, path: path)
        }
        handle = db
        self.path = path
        sqlite3_extended_result_codes(db, 1)
    }

    deinit {
        sqlite3_close_v2(handle)
    }

    /// How long a statement waits for another process's lock before failing with SQLITE_BUSY.
    func setBusyTimeout(milliseconds: Int32) throws(StoreError) {
        let rc = sqlite3_busy_timeout(handle, milliseconds)
        guard rc == SQLITE_OK else { throw failure("sqlite3_busy_timeout", rc) }
    }

    /// Runs one or more statements without bindings (schema, pragmas, transaction control).
    func execute(_ sql: String) throws(StoreError) {
        let rc = sqlite3_exec(handle, sql, nil, nil, nil)
        guard rc == SQLITE_OK else { throw failure("sqlite3_exec", rc) }
    }

    /// Runs one statement that returns no rows; returns the number of rows it changed.
    @discardableResult
    func run(_ sql: String, _ values: [SQLiteValue] = []) throws(StoreError) -> Int {
        let statement = try prepare(sql, values)
        while try statement.step() {}
        return Int(sqlite3_changes(handle))
    }

    /// Runs one statement and maps each result row.
    func query<T>(_ sql: String, _ values: [SQLiteValue] = [], _ map: (SQLiteRow) throws(StoreError) -> T) throws(StoreError) -> [T] {
        let statement = try prepare(sql, values)
        var rows: [T] = []
        while try statement.step() {
            rows.append(try map(SQLiteRow(statement: statement.handle)))
        }
        return rows
    }

    /// Runs `body` inside BEGIN IMMEDIATE … COMMIT. IMMEDIATE takes the write lock up front,
    /// so two processes (daemon and CLI) cannot both read-then-write and deadlock on upgrade.
    func transaction<T>(_ body: () throws(StoreError) -> T) throws(StoreError) -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    private func prepare(_ sql: String, _ values: [SQLiteValue]) throws(StoreError) -> SQLiteStatement {
        var raw: OpaquePointer?
        let rc = sqlite3_prepare_v2(handle, sql, -1, &raw, nil)
        guard rc == SQLITE_OK, let raw else { throw failure("sqlite3_prepare_v2", rc) }
        let statement = SQLiteStatement(handle: raw, database: self)
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let rc: Int32
            switch value {
            case .null:
                rc = sqlite3_bind_null(raw, index)
            case .integer(let n):
                rc = sqlite3_bind_int64(raw, index, n)
            case .text(let s):
                rc = sqlite3_bind_text(raw, index, s, -1, cv_sqlite_transient())
            case .blob(let bytes):
                rc = bytes.withUnsafeBytes { buffer in
                    // A nil pointer would bind NULL, not an empty blob.
                    buffer.baseAddress == nil
                        ? sqlite3_bind_zeroblob(raw, index, 0)
                        : sqlite3_bind_blob(raw, index, buffer.baseAddress, Int32(buffer.count), cv_sqlite_transient())
                }
            }
            guard rc == SQLITE_OK else { throw failure("sqlite3_bind", rc) }
        }
        return statement
    }

    fileprivate func failure(_ call: String, _ rc: Int32) -> StoreError {
        Self.error(call: call, code: sqlite3_extended_errcode(handle), message: String(cString: sqlite3_errmsg(handle)), path: path)
    }

    private static func error(call: String, code: Int32, message: String, path: String) -> StoreError {
        switch code & 0xff {
        case SQLITE_NOTADB, SQLITE_CORRUPT:
            return .notADatabase(path: path, message: message)
        case SQLITE_CONSTRAINT where code == sqliteConstraintForeignKey:
            return .foreignKey(message: message)
        default:
            return .sqlite(call: call, code: code, message: message)
        }
    }

    private static let sqliteConstraintForeignKey = SQLITE_CONSTRAINT | (3 << 8)
}

/// A prepared statement; finalized when the last reference goes.
private final class SQLiteStatement {
    let handle: OpaquePointer
    private let database: SQLiteDatabase

    init(handle: OpaquePointer, database: SQLiteDatabase) {
        self.handle = handle
        self.database = database
    }

    deinit { sqlite3_finalize(handle) }

    /// True while there is a row to read.
    func step() throws(StoreError) -> Bool {
        switch sqlite3_step(handle) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        case let rc: throw database.failure("sqlite3_step", rc)
        }
    }
}

/// The current row of a query, valid only inside the mapping closure.
struct SQLiteRow {
    fileprivate let statement: OpaquePointer

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(statement, column) == SQLITE_NULL }

    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(statement, column) }

    func bool(_ column: Int32) -> Bool { int64(column) != 0 }

    func text(_ column: Int32) -> String? {
        guard let p = sqlite3_column_text(statement, column) else { return nil }
        return String(cString: p)
    }

    func blob(_ column: Int32) -> [UInt8]? {
        if isNull(column) { return nil }
        // SQLite's documented order: fetch the pointer first, then its size.
        let p = sqlite3_column_blob(statement, column)
        let count = Int(sqlite3_column_bytes(statement, column))
        guard count > 0, let p else { return [] }
        return Array(UnsafeRawBufferPointer(start: p, count: count))
    }
}
