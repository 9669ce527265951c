// `clawvoice run`: keeps both sessions to the active gateway up and serves the control socket.

import Foundation
import GatewayClient
import GatewayProtocol
import Store

/// The node commands this build declares. Talk and notification land in later parts; until then
/// they are declared (so pairing approves them once) and answer UNAVAILABLE with the reason.
public enum NodeCommands {
    public static let ptt = ["talk.ptt.start", "talk.ptt.stop", "talk.ptt.cancel", "talk.ptt.once"]
    public static let all = ptt + ["system.notify"]

    public static func registry() -> NodeCommandRegistry {
        let r = NodeCommandRegistry()
        for c in ptt { r.registerUnavailable(c, reason: "push-to-talk is not implemented in this build yet") }
        r.registerUnavailable("system.notify", reason: "spoken notifications are not implemented in this build yet")
        return r
    }
}

/// Opens the store, making sure the state directory exists with the right modes.
public func openStore(_ paths: RuntimePaths) throws -> ClawStore {
    try ClawStore(directory: paths.stateDir)
}

/// Picks the gateway to run against: the config's URL (kept in the store under its host name) or the active paired one.
public func resolveActiveGateway(config: ClawConfig, store: ClawStore) throws -> GatewayRecord? {
    if let url = config.gateway.url {
        let name = GatewayNaming.name(for: url)
        var record = try store.gateway(named: name) ?? GatewayRecord(name: name, url: url, addedAtMs: nowMs())
        record.url = url
        record.sharedToken = config.gateway.token ?? record.sharedToken
        record.password = config.gateway.password ?? record.password
        record.tlsFingerprint = config.gateway.tlsFingerprint ?? record.tlsFingerprint
        record.allowInsecure = config.gateway.allowInsecure || record.allowInsecure
        try store.upsertGateway(record)
        try store.setActiveGateway(name: name)
        return try store.gateway(named: name)
    }
    return try store.activeGateway()
}

func nowMs() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

public enum GatewayNaming {
    /// `host` for the default port, else `host:port`.
    public static func name(for url: String) -> String {
        guard let c = URLComponents(string: url), let host = c.host, !host.isEmpty else { return "gateway" }
        if let p = c.port, p != 18789 { return "\(host):\(p)" }
        return host
    }
}

/// The running node: both sessions, the control socket, until SIGINT/SIGTERM.
public final class NodeDaemon: Sendable {
    let paths: RuntimePaths
    let config: ClawConfig
    let log: LogSink
    let link: GatewayLink
    let store: ClawStore
    let startedAtMs = nowMs()
    private let control: Mutex<ControlSocketServer?> = Mutex(nil)

    public init(paths: RuntimePaths, config: ClawConfig, log: LogSink, timing: ConnectionTiming = ConnectionTiming()) throws {
        self.paths = paths
        self.config = config
        self.log = log
        store = try openStore(paths)
        let (identity, instanceId) = try store.loadOrCreateIdentity()
        guard let record = try resolveActiveGateway(config: config, store: store) else {
            throw ConfigError("no gateway paired yet: run `clawvoice pair <setup-code>` or `clawvoice pair --url ws://HOST:18789 --token TOKEN` first")
        }
        link = GatewayLink(record: record, store: store, identity: identity, instanceId: instanceId, config: config,
                           commands: NodeCommands.registry(), log: log, timing: timing)
        log.log(.info, "daemon", "device \(identity.deviceId.prefix(16))…, gateway \(record.name) (\(record.url))")
    }

    public func run() async throws {
        let server = try ControlSocketServer(path: paths.controlSocket) { [weak self] request in
            guard let self else { return ["ok": false, "error": "daemon stopping"] }
            return await self.handle(request)
        }
        control.withLock { $0 = server }
        log.log(.info, "daemon", "control socket at \(paths.controlSocket)")
        await link.start()
        await waitForSignal()
        log.log(.info, "daemon", "stopping")
        await link.stop()
        server.stop()
    }

    func handle(_ request: JSONValue) async -> JSONValue {
        switch request["cmd"]?.stringValue {
        case "ping":
            return ["ok": true]
        case "status":
            return await statusJSON()
        default:
            return ["ok": false, "error": .string("unknown command \(request["cmd"]?.stringValue ?? "(none)")")]
        }
    }

    func statusJSON() async -> JSONValue {
        var sessions: [String: JSONValue] = [:]
        for role in SessionRole.allCases {
            let s = role == .node ? await link.node.currentStatus() : await link.operator.currentStatus()
            sessions[role.rawValue] = (try? JSONValue(encoding: s)) ?? .null
        }
        let key = (try? store.gateway(named: link.record.name))??.mainSessionKey
        return ["ok": true, "version": .string(ClawvoiceVersion.current), "pid": .number(Double(getpid())),
                "uptimeMs": .number(Double(nowMs() - startedAtMs)),
                "gateway": ["name": .string(link.record.name), "url": .string(link.record.url)],
                "sessions": .object(sessions), "sessionKey": key.map { .string($0) } ?? .null,
                "capture": "unavailable", "playback": "unavailable", "wake": "off", "outbox": 0]
    }
}

/// Suspends until SIGINT or SIGTERM.
public func waitForSignal() async {
    signal(SIGINT, SIG_IGN)
    signal(SIGTERM, SIG_IGN)
    signal(SIGPIPE, SIG_IGN)
    let sources = [SIGINT, SIGTERM].map { DispatchSource.makeSignalSource(signal: $0, queue: .global()) }
    await withCheckedContinuation { (cont: CheckedContinuation<Void, Never>) in
        let once = Mutex(false)
        for s in sources {
            s.setEventHandler {
                let first = once.withLock { v -> Bool in defer { v = true }; return !v }
                if first { cont.resume() }
            }
            s.resume()
        }
    }
    for s in sources { s.cancel() }
}
