// Shared helpers for the gateway integration tests: a real SQLite store in a temp dir, a
// captured log, sessions with shortened timings, and named waits with deadlines.

import ClawvoiceCore
import Foundation
import GatewayClient
import GatewayCrypto
import GatewayProtocol
import LoopbackGateway
import Store
import Testing

final class LogCapture: Sendable {
    private let lines = Locked<[String]>([])
    var sink: LogSink {
        LogSink(minimum: .debug) { [lines] level, component, message in
            lines.withLock { $0.append("\(level.rawValue) \(component): \(message)") }
        }
    }
    var all: [String] { lines.withLock { $0 } }
    func contains(_ s: String) -> Bool { all.contains { $0.contains(s) } }
}

/// Polls `condition` until it holds or `timeout` passes.
func eventually(_ what: String, timeout: Duration = .seconds(10), _ condition: () async -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    Issue.record("timed out waiting for: \(what)")
    return false
}

final class StatusLog: Sendable {
    private let items = Locked<[SessionStatus]>([])
    var callback: @Sendable (SessionStatus) -> Void { { [items] s in items.withLock { $0.append(s) } } }
    var all: [SessionStatus] { items.withLock { $0 } }
    func count(_ state: SessionStatus.State, role: String? = nil) -> Int {
        all.filter { $0.state == state && (role == nil || $0.role == role) }.count
    }
}

struct Harness {
    let dir: String
    let store: ClawStore
    let identity: DeviceIdentity
    let instanceId: String
    let log = LogCapture()
    let statuses = StatusLog()

    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("cv-gc-\(UUID().uuidString.prefix(8))").path
        store = try ClawStore(directory: dir)
        (identity, instanceId) = try store.loadOrCreateIdentity()
    }

    static var fastTiming: ConnectionTiming {
        var t = ConnectionTiming()
        t.pairingPollFastMs = 100
        t.pairingPollSlowMs = 200
        t.backoffBaseMs = 50
        t.backoffMaxMs = 400
        t.quickRetryMs = 30
        t.deferPollMs = 50
        t.challengeTimeoutMs = 6_000
        t.handshakeTimeoutMs = 15_000
        return t
    }

    func addGateway(_ url: String, name: String = "lb", token: String? = nil, password: String? = nil,
                    bootstrap: String? = nil, pin: String? = nil) throws {
        try store.upsertGateway(GatewayRecord(name: name, url: url, tlsFingerprint: pin, bootstrapToken: bootstrap,
                                              sharedToken: token, password: password, isActive: true,
                                              addedAtMs: Int64(Date().timeIntervalSince1970 * 1000)))
    }

    func session(_ role: SessionRole, url: String, name: String = "lb", credentials: GatewayCredentials,
                 commands: NodeCommandRegistry? = nil, pin: String? = nil, timing: ConnectionTiming = Harness.fastTiming,
                 onEvent: @escaping @Sendable (EventFrame) -> Void = { _ in }) -> GatewaySession {
        var options = SessionOptions(displayName: "test node", version: "0.1.0-test")
        options.timing = timing
        return GatewaySession(role: role, endpoint: GatewayEndpoint(name: name, url: url, tlsFingerprint: pin),
                              credentials: credentials, identity: identity, instanceId: instanceId, store: store,
                              options: options, commands: role == .node ? (commands ?? NodeCommandRegistry()) : nil,
                              log: log.sink, onStatus: statuses.callback, onEvent: onEvent)
    }

    func cleanup() { try? FileManager.default.removeItem(atPath: dir) }
}

func gateway(_ configure: (inout LoopbackGateway.Configuration) -> Void = { _ in }) async throws -> LoopbackGateway {
    var c = LoopbackGateway.Configuration()
    c.auth = .token("shared-t")
    // The client drops a link after two tick intervals of silence: at 300 ms a 600 ms stall of
    // this 2-core machine under `make test`'s round 1 reconnected sessions mid-test (a 17 MiB
    // frame took longer than that to arrive). Tests of the tick rule set their own interval.
    c.tickIntervalMs = 1_000
    c.echoDeltaDelayMs = 5
    configure(&c)
    let g = LoopbackGateway(configuration: c)
    try await g.start()
    return g
}
