import Foundation
import GatewayCrypto
import Testing
import GatewayProtocol
import Store

/// A fresh directory under the system temp dir, removed when the test ends.
private final class TempDirectory {
    let root: String
    /// The state directory itself; not created, so ClawStore has to make it.
    let path: String

    init() throws {
        root = FileManager.default.temporaryDirectory
            .appendingPathComponent("clawvoice-store-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        path = (root as NSString).appendingPathComponent("state")
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    var databasePath: String { (path as NSString).appendingPathComponent(ClawStore.fileName) }

    func mode(_ path: String) throws -> Int {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        return try #require(attributes[.posixPermissions] as? Int) & 0o777
    }
}

private func gateway(_ name: String, addedAtMs: Int64, active: Bool = false) -> GatewayRecord {
    GatewayRecord(name: name, url: "wss://\(name).example:443", bootstrapToken: "bt-\(name)", isActive: active, addedAtMs: addedAtMs)
}

@Suite struct `Opening the store` {
    @Test func `creates the directory 0700 and the database 0600`() throws {
        let temp = try TempDirectory()
        let store = try ClawStore(directory: temp.path)
        #expect(try temp.mode(temp.path) == 0o700)
        #expect(try temp.mode(temp.databasePath) == 0o600)
        for suffix in ["-wal", "-shm"] where FileManager.default.fileExists(atPath: temp.databasePath + suffix) {
            #expect(try temp.mode(temp.databasePath + suffix) == 0o600)
        }
        #expect(store.databasePath == temp.databasePath)
    }

    @Test func `tightens a directory and file that already existed with loose modes`() throws {
        let temp = try TempDirectory()
        try FileManager.default.createDirectory(atPath: temp.path, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o755])
        #expect(FileManager.default.createFile(atPath: temp.databasePath, contents: nil, attributes: [.posixPermissions: 0o644]))
        _ = try ClawStore(directory: temp.path)
        #expect(try temp.mode(temp.path) == 0o700)
        #expect(try temp.mode(temp.databasePath) == 0o600)
    }

    @Test func `uses WAL journaling`() throws {
        let temp = try TempDirectory()
        let store = try ClawStore(directory: temp.path)
        #expect(try store.journalMode() == "wal")
    }

    @Test func `reopening keeps the schema version and applies nothing twice`() throws {
        let temp = try TempDirectory()
        let first = try ClawStore(directory: temp.path).schemaVersion
        #expect(first == ClawStore.supportedSchemaVersion)
        #expect(first >= 1)
        for _ in 0..<3 {
            let store = try ClawStore(directory: temp.path)
            #expect(store.schemaVersion == first)
        }
    }

    @Test func `two stores on one file see each other's writes`() throws {
        let temp = try TempDirectory()
        let a = try ClawStore(directory: temp.path)
        let b = try ClawStore(directory: temp.path)
        try a.upsertGateway(gateway("home", addedAtMs: 1))
        #expect(try b.gateway(named: "home")?.url == "wss://home.example:443")
        #expect(try a.loadOrCreateIdentity().identity.deviceId == b.loadOrCreateIdentity().identity.deviceId)
    }

    @Test(arguments: [16, 4096])
    func `a garbage file gives a clear error instead of a crash`(size: Int) throws {
        let temp = try TempDirectory()
        try FileManager.default.createDirectory(atPath: temp.path, withIntermediateDirectories: true)
        let garbage = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 7) })
        try garbage.write(to: URL(fileURLWithPath: temp.databasePath))
        let error = #expect(throws: StoreError.self) { try ClawStore(directory: temp.path) }
        guard case .notADatabase(let path, _)? = error else {
            Issue.record("expected notADatabase, got \(String(describing: error))")
            return
        }
        #expect(path == temp.databasePath)
        let message = try #require(error).description
        #expect(message.contains("is not a usable SQLite database"))
        #expect(message.contains("move it aside"))
        #expect(!message.contains("\n"))
    }

    @Test func `a path that is a file, not a directory, is rejected`() throws {
        let temp = try TempDirectory()
        #expect(FileManager.default.createFile(atPath: temp.path, contents: Data("x".utf8)))
        let error = #expect(throws: StoreError.self) { try ClawStore(directory: temp.path) }
        #expect(error == .directory(path: temp.path, reason: "exists and is not a directory"))
    }
}

@Suite struct `Device identity in the store` {
    @Test func `is created once and reloaded identical after reopening`() throws {
        let temp = try TempDirectory()
        let (identity, instanceId): (DeviceIdentity, String)
        do {
            let store = try ClawStore(directory: temp.path)
            (identity, instanceId) = try store.loadOrCreateIdentity()
            let again = try store.loadOrCreateIdentity()
            #expect(again.identity.deviceId == identity.deviceId)
            #expect(again.instanceId == instanceId)
        }
        let reopened = try ClawStore(directory: temp.path).loadOrCreateIdentity()
        #expect(reopened.identity.deviceId == identity.deviceId)
        #expect(reopened.identity.publicKey == identity.publicKey)
        #expect(reopened.identity.privateSeed == identity.privateSeed)
        #expect(reopened.instanceId == instanceId)
        #expect(UUID(uuidString: instanceId) != nil)
    }

    @Test func `the reloaded identity still signs verifiably`() throws {
        let temp = try TempDirectory()
        _ = try ClawStore(directory: temp.path).loadOrCreateIdentity()
        let identity = try ClawStore(directory: temp.path).loadOrCreateIdentity().identity
        let signature = try identity.sign("v3|payload")
        #expect(DeviceIdentity.verify(publicKey: identity.publicKey, message: "v3|payload", signature: signature))
    }

    @Test func `separate directories get separate identities`() throws {
        let a = try TempDirectory(), b = try TempDirectory()
        let idA = try ClawStore(directory: a.path).loadOrCreateIdentity().identity.deviceId
        let idB = try ClawStore(directory: b.path).loadOrCreateIdentity().identity.deviceId
        #expect(idA != idB)
    }
}

@Suite struct `Gateways` {
    @Test func `upsert, lookup and listing in the order they were added`() throws {
        let temp = try TempDirectory()
        let store = try ClawStore(directory: temp.path)
        #expect(try store.gateways().isEmpty)
        #expect(try store.activeGateway() == nil)

        let office = GatewayRecord(
            name: "office", url: "wss://office:18789", tlsFingerprint: String(repeating: "ab", count: 32),
            allowInsecure: true, bootstrapToken: "bt", sharedToken: "shared", password: "pw",
            isActive: false, mainSessionKey: "agent:main:main", addedAtMs: 200)
        try store.upsertGateway(office)
        try store.upsertGateway(gateway("home", addedAtMs: 100))
        #expect(try store.gateway(named: "office") == office)
        #expect(try store.gateway(named: "nowhere") == nil)
        #expect(try store.gateways().map(\.name) == ["home", "office"])

        var changed = office
        changed.url = "wss://office-new:18789"
        changed.password = nil
        changed.addedAtMs = 999
        try store.upsertGateway(changed)
        let reloaded = try #require(try store.gateway(named: "office"))
        #expect(reloaded.url == "wss://office-new:18789")
        #expect(reloaded.password == nil)
        #expect(reloaded.addedAtMs == 200)
        #expect(try store.gateways().count == 2)
    }

    @Test func `switching the active gateway keeps exactly one active`() throws {
        let temp = try TempDirectory()
        let store = try ClawStore(directory: temp.path)
        for (i, name) in ["a", "b", "c"].enumerated() {
            try store.upsertGateway(gateway(name, addedAtMs: Int64(i)))
        }
        for name in ["b", "a", "c", "c", "b"] {
            try store.setActiveGateway(name: name)
            #expect(try store.activeGateway()?.name == name)
            #expect(try store.gateways().filter(\.isActive).map(\.name) == [name])
        }
        try store.upsertGateway(gateway("d", addedAtMs: 10, active: true))
        #expect(try store.gateways().filter(\.isActive).map(\.name) == ["d"])

        #expect(throws: StoreError.unknownGateway("zzz")) { try store.setActiveGateway(name: "zzz") }
        #expect(try store.activeGateway()?.name == "d")
    }

    @Test func `clearing the bootstrap token and setting the main session key`() throws {
        let temp = try TempDirectory()
        let store = try ClawStore(directory: temp.path)
        try store.upsertGateway(gateway("home", addedAtMs: 1))
        try store.clearBootstrapToken(gateway: "home")
        try store.setMainSessionKey(gateway: "home", key: "agent:main:main")
        let record = try #require(try store.gateway(named: "home"))
        #expect(record.bootstrapToken == nil)
        #expect(record.mainSessionKey == "agent:main:main")
        #expect(throws: StoreError.unknownGateway("away")) { try store.clearBootstrapToken(gateway: "away") }
        #expect(throws: StoreError.unknownGateway("away")) { try store.setMainSessionKey(gateway: "away", key: "k") }
    }

    @Test func `deleting a gateway deletes its tokens`() throws {
        let temp = try TempDirectory()
        let store = try ClawStore(directory: temp.path)
        try store.upsertGateway(gateway("home", addedAtMs: 1, active: true))
        try store.upsertGateway(gateway("work", addedAtMs: 2))
        try store.saveToken(gateway: "home", role: "node", token: "t-node", scopes: [], nowMs: 5)
        try store.saveToken(gateway: "home", role: "operator", token: "t-op", scopes: ["operator.read"], nowMs: 5)
        try store.saveToken(gateway: "work", role: "node", token: "t-work", scopes: [], nowMs: 5)

        #expect(try store.deleteGateway(name: "home"))
        #expect(try store.deleteGateway(name: "home") == false)
        #expect(try store.gateway(named: "home") == nil)
        #expect(try store.activeGateway() == nil)
        #expect(try store.tokens(gateway: "home").isEmpty)
        #expect(try store.token(gateway: "work", role: "node")?.token == "t-work")

        // A gateway re-added under the same name does not inherit the old tokens.
        try store.upsertGateway(gateway("home", addedAtMs: 3))
        #expect(try store.token(gateway: "home", role: "node") == nil)
    }

    @Test func `description redacts credentials`() {
        let record = GatewayRecord(name: "g", url: "wss://g", bootstrapToken: "bt-secret", sharedToken: "shared-secret",
                                   password: "pw-secret", addedAtMs: 1)
        for secret in ["bt-secret", "shared-secret", "pw-secret"] { #expect(!record.description.contains(secret)) }
    }
}

@Suite struct `Device tokens` {
    @Test func `save, load, replace and delete per gateway and role`() throws {
        let temp = try TempDirectory()
        let store = try ClawStore(directory: temp.path)
        try store.upsertGateway(gateway("a", addedAtMs: 1))
        try store.upsertGateway(gateway("b", addedAtMs: 2))

        try store.saveToken(gateway: "a", role: "node", token: "tok-a-node", scopes: [], nowMs: 10)
        try store.saveToken(gateway: "a", role: "operator", token: "tok-a-op", scopes: ["operator.read", "operator.talk"], nowMs: 11)
        #expect(try store.token(gateway: "a", role: "node") == DeviceToken(token: "tok-a-node", role: "node", scopes: [], updatedAtMs: 10))
        #expect(try store.token(gateway: "a", role: "operator")
            == DeviceToken(token: "tok-a-op", role: "operator", scopes: ["operator.read", "operator.talk"], updatedAtMs: 11))

        // Gateway A's tokens are never offered to gateway B.
        #expect(try store.token(gateway: "b", role: "node") == nil)
        #expect(try store.token(gateway: "b", role: "operator") == nil)

        try store.saveToken(gateway: "a", role: "node", token: "tok-a-node-2", scopes: ["x"], nowMs: 20)
        #expect(try store.token(gateway: "a", role: "node") == DeviceToken(token: "tok-a-node-2", role: "node", scopes: ["x"], updatedAtMs: 20))
        #expect(try store.tokens(gateway: "a").map(\.role) == ["node", "operator"])

        #expect(try store.deleteToken(gateway: "a", role: "node"))
        #expect(try store.deleteToken(gateway: "a", role: "node") == false)
        #expect(try store.token(gateway: "a", role: "node") == nil)
        #expect(try store.token(gateway: "a", role: "operator") != nil)
    }

    @Test func `tokens survive reopening`() throws {
        let temp = try TempDirectory()
        do {
            let store = try ClawStore(directory: temp.path)
            try store.upsertGateway(gateway("a", addedAtMs: 1))
            try store.saveToken(gateway: "a", role: "node", token: "persisted", scopes: [], nowMs: 1)
        }
        #expect(try ClawStore(directory: temp.path).token(gateway: "a", role: "node")?.token == "persisted")
    }

    @Test func `a token for an unknown gateway is refused without echoing the token`() throws {
        let temp = try TempDirectory()
        let store = try ClawStore(directory: temp.path)
        let error = #expect(throws: StoreError.self) {
            try store.saveToken(gateway: "ghost", role: "node", token: "tok-secret", scopes: [], nowMs: 1)
        }
        #expect(error == .unknownGateway("ghost"))
        #expect(error?.description.contains("tok-secret") == false)
        #expect(!DeviceToken(token: "tok-secret", role: "node", scopes: [], updatedAtMs: 1).description.contains("tok-secret"))
    }

    @Test func `the store is safe to share between concurrent tasks`() async throws {
        let temp = try TempDirectory()
        let store = try ClawStore(directory: temp.path)
        try store.upsertGateway(gateway("a", addedAtMs: 1))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<16 {
                group.addTask {
                    try store.saveToken(gateway: "a", role: "role-\(i)", token: "t\(i)", scopes: [], nowMs: Int64(i))
                    _ = try store.token(gateway: "a", role: "role-\(i)")
                }
            }
            try await group.waitForAll()
        }
        #expect(try store.tokens(gateway: "a").count == 16)
    }
}
