// The pair of sessions (node and operator) this device keeps to one gateway.

public import ClawvoiceCore
public import Foundation
public import GatewayClient
public import GatewayCrypto
public import GatewayProtocol
public import NodeRuntime
public import Store

/// Both roles to one gateway, started and stopped together, with their statuses in one place.
public final class GatewayLink: Sendable {
    public let record: GatewayRecord
    public let node: GatewaySession
    public let `operator`: GatewaySession
    private let statuses: Locked<[String: SessionStatus]>
    private let listeners: Locked<[UUID: @Sendable (SessionStatus) -> Void]>
    private let eventListeners: Locked<[UUID: @Sendable (SessionRole, EventFrame) -> Void]>

    public init(record: GatewayRecord, store: ClawStore, identity: DeviceIdentity, instanceId: String,
                config: ClawConfig, commands: NodeCommandRegistry, log: LogSink, timing: ConnectionTiming = ConnectionTiming(),
                version: String = ClawvoiceVersion.current) {
        self.record = record
        let statuses = Locked<[String: SessionStatus]>([:])
        let listeners = Locked<[UUID: @Sendable (SessionStatus) -> Void]>([:])
        let eventListeners = Locked<[UUID: @Sendable (SessionRole, EventFrame) -> Void]>([:])
        self.statuses = statuses
        self.listeners = listeners
        self.eventListeners = eventListeners
        var options = SessionOptions(displayName: config.node.displayName, version: version)
        options.modelIdentifier = config.node.modelIdentifier
        options.locale = Locale.preferredLanguages.first
        options.operatorClientId = config.gateway.operatorClient
        options.operatorClientMode = config.gateway.operatorClient == "cli" ? "cli" : "ui"
        options.timing = timing
        options.keepSharedSecret = config.gateway.keepSharedSecret
        let endpoint = GatewayEndpoint(name: record.name, url: record.url, tlsFingerprint: record.tlsFingerprint,
                                       allowInsecure: record.allowInsecure)
        let credentials = GatewayCredentials(sharedToken: record.sharedToken, password: record.password,
                                             bootstrapToken: record.bootstrapToken)
        let onStatus: @Sendable (SessionStatus) -> Void = { s in
            statuses.withLock { $0[s.role] = s }
            for l in listeners.withLock({ Array($0.values) }) { l(s) }
        }
        func onEvent(_ role: SessionRole) -> @Sendable (EventFrame) -> Void {
            { e in for l in eventListeners.withLock({ Array($0.values) }) { l(role, e) } }
        }
        node = GatewaySession(role: .node, endpoint: endpoint, credentials: credentials, identity: identity,
                              instanceId: instanceId, store: store, options: options, commands: commands, log: log,
                              onStatus: onStatus, onEvent: onEvent(.node))
        `operator` = GatewaySession(role: .operator, endpoint: endpoint, credentials: credentials, identity: identity,
                                    instanceId: instanceId, store: store, options: options, commands: nil, log: log,
                                    onStatus: onStatus, onEvent: onEvent(.operator))
    }

    /// Runs both sessions, each a child of one group, until the task is cancelled.
    public func run() async {
        await withDiscardingTaskGroup { group in
            group.addTask { await self.node.run() }
            group.addTask { await self.operator.run() }
        }
    }

    /// For callers without a task group to run `run()` in.
    public func start() async {
        await node.start()
        await `operator`.start()
    }

    public func stop() async {
        await node.stop()
        await `operator`.stop()
    }

    public func status(_ role: SessionRole) -> SessionStatus? { statuses.withLock { $0[role.rawValue] } }

    /// Calls `body` on every status change until the returned token is removed.
    @discardableResult
    public func onStatus(_ body: @escaping @Sendable (SessionStatus) -> Void) -> UUID {
        let id = UUID()
        listeners.withLock { $0[id] = body }
        return id
    }

    @discardableResult
    public func onEvent(_ body: @escaping @Sendable (SessionRole, EventFrame) -> Void) -> UUID {
        let id = UUID()
        eventListeners.withLock { $0[id] = body }
        return id
    }

    public func removeListener(_ id: UUID) {
        listeners.withLock { _ = $0.removeValue(forKey: id) }
        eventListeners.withLock { _ = $0.removeValue(forKey: id) }
    }

    /// Waits until both roles are connected; returns the first paused status instead if one pauses
    /// (or the one still missing when the time is up or the waiting task is cancelled).
    public func waitForBoth(timeout: Duration?) async -> Result<Void, SessionStatus> {
        let deadline = ContinuousClock.now + (timeout ?? .seconds(365 * 86_400))
        while true {
            let n = status(.node), o = status(.operator)
            if n?.state == .connected && o?.state == .connected { return .success(()) }
            if let p = [n, o].compactMap({ $0 }).first(where: { $0.state == .paused || $0.state == .stopped }) { return .failure(p) }
            if ContinuousClock.now >= deadline || Task.isCancelled {
                return .failure(n?.state != .connected ? (n ?? SessionStatus(role: "node", gateway: record.name, state: .connecting, detail: "timed out"))
                                : (o ?? SessionStatus(role: "operator", gateway: record.name, state: .connecting, detail: "timed out")))
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
    }
}

/// Both roles as one service.
extension GatewayLink: Service {}
