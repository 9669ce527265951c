// Store owns clawvoice's SQLite file: its schema and migrations, and the rows in it
// (the device identity, configured gateways, device tokens; later the outbox and the
// transcript cache). It depends on GatewayProtocol only for DeviceIdentity.
// It does no network and no audio. It holds credentials, so the directory is 0700, the
// files are 0600, and no error or description ever contains a seed, token or password.

public import GatewayCrypto
import Synchronization
import Foundation
import GatewayProtocol
#if canImport(Glibc)
import Glibc
#endif

/// The state database. Every call is synchronous and serialised by one lock, so the CLI
/// can call it directly and actors can share one instance.
public final class ClawStore: Sendable {
    /// File name inside the state directory.
    public static let fileName = "clawvoice.sqlite"
    /// Schema version this build migrates to.
    public static var supportedSchemaVersion: Int { Schema.latestVersion }

    public let directory: String
    public let databasePath: String
    /// Schema version of the file after opening (always `supportedSchemaVersion`).
    public let schemaVersion: Int

    /// The one connection; every call holds this lock for its whole statement or transaction.
    private let db: Mutex<SQLiteDatabase>

    /// Opens (creating if needed) `<directory>/clawvoice.sqlite` and migrates it.
    public init(directory: String) throws(StoreError) {
        self.directory = directory
        databasePath = (directory as NSString).appendingPathComponent(Self.fileName)

        try Self.prepareDirectory(directory)
        try Self.createPrivateFile(databasePath)

        let db = try SQLiteDatabase(path: databasePath)
        // Another clawvoice process (CLI next to the daemon) may hold the write lock briefly.
        try db.setBusyTimeout(milliseconds: 5000)
        // The first statement that reads the file: a corrupt file fails here as notADatabase.
        let mode = try db.query("PRAGMA journal_mode=WAL") { row in row.text(0) ?? "" }.first ?? ""
        guard mode.lowercased() == "wal" else {
            throw .sqlite(call: "PRAGMA journal_mode=WAL", code: 0, message: "journal mode stayed '\(mode)'")
        }
        try db.execute("PRAGMA foreign_keys=ON")
        schemaVersion = try Self.migrate(db)
        self.db = Mutex(db)

        // SQLite creates these with the database's mode; chmod anyway in case they predate us.
        for suffix in ["-wal", "-shm"] {
            let path = databasePath + suffix
            if FileManager.default.fileExists(atPath: path) { try Self.chmod(path, 0o600) }
        }
    }

    /// Opens an existing store for reading only, writing nothing at all: for listing what is
    /// there when the disk is full (opening normally creates the -wal and -shm files, which needs
    /// space). Immutable: no locks and no WAL index, so rows still only in a -wal file are not
    /// seen. After a clean close there are none; with a daemon running the normal open works.
    public init(readingOnly directory: String) throws(StoreError) {
        self.directory = directory
        databasePath = (directory as NSString).appendingPathComponent(Self.fileName)
        let db = try SQLiteDatabase(path: databasePath, immutable: true)
        let found = Int(try db.query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations") { $0.int64(0) }.first ?? 0)
        guard found <= Schema.latestVersion else { throw .schemaTooNew(found: found, supported: Schema.latestVersion) }
        guard found == Schema.latestVersion else {
            throw .sqlite(call: "open (read only)", code: 0, message: "schema version \(found) needs an upgrade, which cannot be written now")
        }
        schemaVersion = found
        self.db = Mutex(db)
    }

    /// The connection's journal mode ("wal" once open).
    public func journalMode() throws(StoreError) -> String {
        try locked { db throws(StoreError) in
            try db.query("PRAGMA journal_mode") { row in row.text(0) ?? "" }.first ?? ""
        }
    }

    // MARK: Identity

    /// Returns the node's identity, creating it on first use. The same identity comes back
    /// on every later call and after reopening: losing it means pairing again.
    public func loadOrCreateIdentity() throws(StoreError) -> (identity: DeviceIdentity, instanceId: String) {
        try locked { db throws(StoreError) in
            if let existing = try Self.loadIdentity(db) { return existing }
            let fresh: DeviceIdentity
            do throws(IdentityError) {
                fresh = try DeviceIdentity.generate()
            } catch {
                throw .identity(error.description)
            }
            // OR IGNORE: if another process created one since our read, theirs wins and we
            // read it back below, so both processes agree on one device id.
            try db.run(
                """
                INSERT OR IGNORE INTO identity(id, seed, public_key, device_id, instance_id, created_at_ms)
                VALUES (1, ?, ?, ?, ?, ?)
                """,
                [.blob(fresh.privateSeed), .blob(fresh.publicKey), .text(fresh.deviceId),
                 .text(UUID().uuidString.lowercased()), .integer(Self.nowMs())])
            guard let stored = try Self.loadIdentity(db) else {
                throw .corruptIdentity("identity row missing right after insert")
            }
            return stored
        }
    }

    private static func loadIdentity(_ db: SQLiteDatabase) throws(StoreError) -> (identity: DeviceIdentity, instanceId: String)? {
        let rows = try db.query("SELECT seed, public_key, device_id, instance_id FROM identity WHERE id = 1") {
            row in (row.blob(0) ?? [], row.blob(1) ?? [], row.text(2) ?? "", row.text(3) ?? "")
        }
        guard let (seed, publicKey, deviceId, instanceId) = rows.first else { return nil }
        guard seed.count == 32 else { throw .corruptIdentity("seed is \(seed.count) bytes, expected 32") }
        let identity: DeviceIdentity
        do throws(IdentityError) {
            identity = try DeviceIdentity(seed: seed)
        } catch {
            throw .identity(error.description)
        }
        guard identity.publicKey == publicKey, identity.deviceId == deviceId else {
            throw .corruptIdentity("stored public key or device id does not match the stored seed")
        }
        guard !instanceId.isEmpty else { throw .corruptIdentity("instance id is empty") }
        return (identity, instanceId)
    }

    // MARK: Gateways

    private static let gatewayColumns =
        "name, url, tls_fingerprint, allow_insecure, bootstrap_token, shared_token, password, is_active, main_session_key, added_at_ms"

    /// Inserts or replaces a gateway by name. `addedAtMs` is kept from the first insert.
    /// Upserting an active record deactivates every other gateway.
    public func upsertGateway(_ record: GatewayRecord) throws(StoreError) {
        try locked { db throws(StoreError) in
            try db.transaction { () throws(StoreError) in
                if record.isActive {
                    try db.run("UPDATE gateways SET is_active = 0 WHERE is_active = 1 AND name <> ?", [.text(record.name)])
                }
                try db.run(
                    """
                    INSERT INTO gateways(\(Self.gatewayColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT(name) DO UPDATE SET
                        url = excluded.url, tls_fingerprint = excluded.tls_fingerprint,
                        allow_insecure = excluded.allow_insecure, bootstrap_token = excluded.bootstrap_token,
                        shared_token = excluded.shared_token, password = excluded.password,
                        is_active = excluded.is_active, main_session_key = excluded.main_session_key
                    """,
                    [.text(record.name), .text(record.url), .text(record.tlsFingerprint), .bool(record.allowInsecure),
                     .text(record.bootstrapToken), .text(record.sharedToken), .text(record.password),
                     .bool(record.isActive), .text(record.mainSessionKey), .integer(record.addedAtMs)])
            }
        }
    }

    public func gateway(named name: String) throws(StoreError) -> GatewayRecord? {
        try locked { db throws(StoreError) in
            try db.query("SELECT \(Self.gatewayColumns) FROM gateways WHERE name = ?", [.text(name)], Self.gatewayRow).first
        }
    }

    /// All gateways, oldest first.
    public func gateways() throws(StoreError) -> [GatewayRecord] {
        try locked { db throws(StoreError) in
            try db.query("SELECT \(Self.gatewayColumns) FROM gateways ORDER BY added_at_ms, name", [], Self.gatewayRow)
        }
    }

    public func activeGateway() throws(StoreError) -> GatewayRecord? {
        try locked { db throws(StoreError) in
            try db.query("SELECT \(Self.gatewayColumns) FROM gateways WHERE is_active = 1", [], Self.gatewayRow).first
        }
    }

    /// Makes `name` the one active gateway.
    public func setActiveGateway(name: String) throws(StoreError) {
        try locked { db throws(StoreError) in
            try db.transaction { () throws(StoreError) in
                let exists = try db.query("SELECT 1 FROM gateways WHERE name = ?", [.text(name)]) { _ in true }
                guard !exists.isEmpty else { throw .unknownGateway(name) }
                // Clear first: the unique index allows only one row with is_active = 1 at any moment.
                try db.run("UPDATE gateways SET is_active = 0 WHERE is_active = 1 AND name <> ?", [.text(name)])
                try db.run("UPDATE gateways SET is_active = 1 WHERE name = ?", [.text(name)])
            }
        }
    }

    /// Deletes a gateway and, by cascade, its tokens. Returns false if it did not exist.
    @discardableResult
    public func deleteGateway(name: String) throws(StoreError) -> Bool {
        try locked { db throws(StoreError) in
            try db.run("DELETE FROM gateways WHERE name = ?", [.text(name)]) > 0
        }
    }

    /// Forgets the setup-code token once pairing has produced a device token.
    public func clearBootstrapToken(gateway: String) throws(StoreError) {
        try updateGateway(gateway, "UPDATE gateways SET bootstrap_token = NULL WHERE name = ?", [])
    }

    /// Removes the shared gateway token and password of a gateway once device tokens replace them.
    /// Returns whether there was anything to remove.
    @discardableResult
    public func clearSharedSecret(gateway: String) throws(StoreError) -> Bool {
        try locked { db throws(StoreError) in
            try db.run("UPDATE gateways SET shared_token = NULL, password = NULL WHERE name = ? AND (shared_token IS NOT NULL OR password IS NOT NULL)",
                       [.text(gateway)]) > 0
        }
    }

    public func setMainSessionKey(gateway: String, key: String?) throws(StoreError) {
        try updateGateway(gateway, "UPDATE gateways SET main_session_key = ? WHERE name = ?", [.text(key)])
    }

    /// The chat session chosen for `gateway` (`clawvoice session use`); nil: its main session.
    public func setCurrentSession(gateway: String, key: String?) throws(StoreError) {
        try updateGateway(gateway, "UPDATE gateways SET current_session_key = ? WHERE name = ?", [.text(key)])
    }

    public func currentSession(gateway: String) throws(StoreError) -> String? {
        try locked { db throws(StoreError) in
            try db.query("SELECT current_session_key FROM gateways WHERE name = ?", [.text(gateway)]) { $0.text(0) }.first ?? nil
        }
    }

    /// A node setting kept across restarts (`muted`, `volume`); nil when never set.
    public func setting(_ key: String) throws(StoreError) -> String? {
        try locked { db throws(StoreError) in
            try db.query("SELECT value FROM node_settings WHERE key = ?", [.text(key)]) { $0.text(0) }.first ?? nil
        }
    }

    /// Sets (or, with nil, removes) a node setting.
    public func setSetting(_ key: String, _ value: String?) throws(StoreError) {
        try locked { db throws(StoreError) in
            if let value {
                _ = try db.run("INSERT INTO node_settings(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                               [.text(key), .text(value)])
            } else {
                _ = try db.run("DELETE FROM node_settings WHERE key = ?", [.text(key)])
            }
        }
    }

    private func updateGateway(_ name: String, _ sql: String, _ values: [SQLiteValue]) throws(StoreError) {
        try locked { db throws(StoreError) in
            guard try db.run(sql, values + [.text(name)]) > 0 else { throw .unknownGateway(name) }
        }
    }

    private static func gatewayRow(_ row: SQLiteRow) throws(StoreError) -> GatewayRecord {
        GatewayRecord(
            name: row.text(0) ?? "", url: row.text(1) ?? "", tlsFingerprint: row.text(2), allowInsecure: row.bool(3),
            bootstrapToken: row.text(4), sharedToken: row.text(5), password: row.text(6), isActive: row.bool(7),
            mainSessionKey: row.text(8), addedAtMs: row.int64(9))
    }

    // MARK: Device tokens

    /// Stores the device token hello-ok issued for `role` on `gateway`, replacing any earlier one.
    /// Tokens are keyed by gateway so a token from gateway A is never offered to gateway B.
    public func saveToken(gateway: String, role: String, token: String, scopes: [String], nowMs: Int64) throws(StoreError) {
        let scopesJSON = try Self.encodeScopes(scopes)
        try locked { db throws(StoreError) in
            do throws(StoreError) {
                try db.run(
                    """
                    INSERT INTO tokens(gateway, role, token, scopes, updated_at_ms) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT(gateway, role) DO UPDATE SET
                        token = excluded.token, scopes = excluded.scopes, updated_at_ms = excluded.updated_at_ms
                    """,
                    [.text(gateway), .text(role), .text(token), .text(scopesJSON), .integer(nowMs)])
            } catch .foreignKey {
                throw .unknownGateway(gateway)
            }
        }
    }

    public func token(gateway: String, role: String) throws(StoreError) -> DeviceToken? {
        try locked { db throws(StoreError) in
            try db.query(
                "SELECT token, role, scopes, updated_at_ms FROM tokens WHERE gateway = ? AND role = ?",
                [.text(gateway), .text(role)], Self.tokenRow
            ).first
        }
    }

    /// Every token stored for `gateway`, ordered by role.
    public func tokens(gateway: String) throws(StoreError) -> [DeviceToken] {
        try locked { db throws(StoreError) in
            try db.query(
                "SELECT token, role, scopes, updated_at_ms FROM tokens WHERE gateway = ? ORDER BY role",
                [.text(gateway)], Self.tokenRow)
        }
    }

    /// Deletes a token (for example after AUTH_DEVICE_TOKEN_MISMATCH). Returns false if none was stored.
    @discardableResult
    public func deleteToken(gateway: String, role: String) throws(StoreError) -> Bool {
        try locked { db throws(StoreError) in
            try db.run("DELETE FROM tokens WHERE gateway = ? AND role = ?", [.text(gateway), .text(role)]) > 0
        }
    }

    private static func tokenRow(_ row: SQLiteRow) throws(StoreError) -> DeviceToken {
        let scopes: [String]
        do {
            scopes = try JSONDecoder().decode([String].self, from: Data((row.text(2) ?? "").utf8))
        } catch {
            throw .corruptValue(table: "tokens", column: "scopes")
        }
        return DeviceToken(token: row.text(0) ?? "", role: row.text(1) ?? "", scopes: scopes, updatedAtMs: row.int64(3))
    }

    private static func encodeScopes(_ scopes: [String]) throws(StoreError) -> String {
        do {
            return String(decoding: try JSONEncoder().encode(scopes), as: UTF8.self)
        } catch {
            throw .corruptValue(table: "tokens", column: "scopes")
        }
    }

    // MARK: Opening

    /// Internal so the store's other files (the transcript cache) share the one lock.
    func locked<T: Sendable>(_ body: (SQLiteDatabase) throws(StoreError) -> T) throws(StoreError) -> T {
        try db.withLock { (db: inout SQLiteDatabase) throws(StoreError) -> T in try body(db) }
    }

    /// Applies every migration the file has not seen yet, each in its own transaction.
    /// Returns the resulting version.
    private static func migrate(_ db: SQLiteDatabase) throws(StoreError) -> Int {
        try db.execute("CREATE TABLE IF NOT EXISTS schema_migrations(version INTEGER PRIMARY KEY, applied_at_ms INTEGER)")
        func currentVersion() throws(StoreError) -> Int {
            Int(try db.query("SELECT COALESCE(MAX(version), 0) FROM schema_migrations") { $0.int64(0) }.first ?? 0)
        }
        let found = try currentVersion()
        guard found <= Schema.latestVersion else { throw .schemaTooNew(found: found, supported: Schema.latestVersion) }
        for (index, sql) in Schema.migrations.enumerated() where index + 1 > found {
            let version = index + 1
            try db.transaction { () throws(StoreError) in
                // Re-read under the write lock: another process may have applied it since `found`.
                guard try currentVersion() < version else { return }
                try db.execute(sql)
                try db.run("INSERT INTO schema_migrations(version, applied_at_ms) VALUES (?, ?)",
                           [.integer(Int64(version)), .integer(nowMs())])
            }
        }
        return try currentVersion()
    }

    private static func prepareDirectory(_ path: String) throws(StoreError) {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else { throw .directory(path: path, reason: "exists and is not a directory") }
        } else {
            do {
                try FileManager.default.createDirectory(
                    atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw .directory(path: path, reason: error.localizedDescription)
            }
        }
        // Also tighten a directory that already existed with a looser mode.
        guard Glibc.chmod(path, 0o700) == 0 else { throw .directory(path: path, reason: Self.errnoText()) }
    }

    /// Creates the database file 0600 before SQLite opens it, so it is never readable by
    /// others even for a moment under a permissive umask. An existing file is only chmod'ed,
    /// never opened: closing any descriptor of a database file drops every POSIX lock this
    /// process holds on it, including those of a connection that is already open (SQLite
    /// documents this as a corruption hazard), so only a file that did not exist is opened.
    private static func createPrivateFile(_ path: String) throws(StoreError) {
        let fd = open(path, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0o600)
        if fd >= 0 {
            close(fd)
        } else if errno != EEXIST {
            throw .permissions(path: path, reason: errnoText())
        }
        try chmod(path, 0o600)
    }

    private static func chmod(_ path: String, _ mode: mode_t) throws(StoreError) {
        guard Glibc.chmod(path, mode) == 0 else { throw .permissions(path: path, reason: errnoText()) }
    }

    private static func errnoText() -> String { String(cString: strerror(errno)) }

    static func nowMs() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }
}
