// `clawvoice demo`: the whole link on this machine against the built-in loopback gateway.

import Foundation
import GatewayClient
import GatewayProtocol
import LoopbackGateway
import Store

public enum Demo {
    public static func run(message: String, log: LogSink, say: @escaping @Sendable (String) -> Void) async throws -> Int32 {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("clawvoice-demo-\(UUID().uuidString.prefix(8))").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var gc = LoopbackGateway.Configuration()
        gc.autoApprove = true
        gc.auth = .token("demo-token")
        let gateway = LoopbackGateway(configuration: gc)
        try await gateway.start()
        let url = await gateway.url
        say("Loopback gateway on \(url) (approves pairing by itself; its agent echoes what it hears).")

        let paths = RuntimePaths(configFile: "", configExplicit: false, stateDir: dir, controlSocket: dir + "/control.sock")
        var config = ClawConfig()
        config.node.displayName = "clawvoice demo"
        let store = try openStore(paths)
        let (identity, instanceId) = try store.loadOrCreateIdentity()
        let record = GatewayRecord(name: "loopback", url: url, sharedToken: "demo-token", isActive: true, addedAtMs: nowMs())
        try store.upsertGateway(record)
        say("Device \(identity.deviceId.prefix(16))… pairing as node and operator…")
        let link = GatewayLink(record: record, store: store, identity: identity, instanceId: instanceId, config: config,
                               commands: NodeCommands.registry(), log: log)
        await link.start()
        defer { Task { await link.stop(); await gateway.stop() } }
        if case .failure(let s) = await link.waitForBoth(timeout: .seconds(20)) {
            say("Demo failed: \(s.role) is \(s.state.rawValue): \(s.detail)")
            return 1
        }
        say("node: connected with token \(try store.token(gateway: "loopback", role: "node") != nil ? "stored" : "missing"); operator: connected")

        let sessionKey = try store.gateway(named: "loopback")?.mainSessionKey ?? "agent:main:main"
        let idempotencyKey = UUID().uuidString.lowercased()
        let reply = ReplyCollector(runId: idempotencyKey)
        let listener = link.onEvent { role, e in
            guard role == .operator, e.event == GatewayEvent.chat, let c = ChatEvent(payload: e.payload) else { return }
            reply.add(c)
        }
        say("→ chat.send to \(sessionKey): \"\(message)\"")
        let params = try JSONValue(encoding: ChatSendParams(sessionKey: sessionKey, message: message, idempotencyKey: idempotencyKey))
        let ack = try await link.operator.request(GatewayMethod.chatSend, params: params)
        say("  accepted: run \(ack["runId"]?.stringValue ?? "?"), status \(ack["status"]?.stringValue ?? "?")")
        guard let text = await reply.final(timeout: .seconds(10)) else {
            say("Demo failed: no reply within 10 s")
            return 1
        }
        link.removeListener(listener)
        say("← reply: \(text)")

        let result = try await gateway.invoke(command: "talk.ptt.start", paramsJSON: "{}", timeoutMs: 5_000)
        say("gateway → node talk.ptt.start: \(result.ok ? "ok \(result.payloadJSON ?? "")" : result.error?.message ?? "failed")")
        await link.stop()
        await gateway.stop()
        return 0
    }
}

/// Gathers one run's chat events into its final text.
final class ReplyCollector: Sendable {
    let runId: String
    private let state = Mutex<(text: String, done: Bool)>(("", false))
    init(runId: String) { self.runId = runId }

    func add(_ e: ChatEvent) {
        guard e.runId == runId else { return }
        state.withLock { s in
            switch e.state {
            case .delta:
                if let d = e.deltaText { s.text = e.replace ? d : s.text + d } else if let m = e.messageText { s.text = m }
            case .final:
                if let m = e.messageText { s.text = m }
                s.done = true
            case .aborted, .error:
                s.done = true
            case .status:
                break
            }
        }
    }

    func final(timeout: Duration) async -> String? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let s = state.withLock { $0 }
            if s.done { return s.text }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }
}
