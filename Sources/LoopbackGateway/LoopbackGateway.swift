// LoopbackGateway is a stand-in OpenClaw Gateway on 127.0.0.1 for `clawvoice demo` and the
// tests: it speaks the handshake as the spec describes it (challenge, closed connect schema,
// device-proof checks, token/password/bootstrap auth, pairing with request ids), sends ticks,
// routes node.invoke, answers chat.send with an echo agent, serves voicewake.get, and can be
// told to misbehave (drop, restart, stall ticks, malformed frames). It is the one fake in the
// project; it shares only the wire values of GatewayProtocol with the client it tests.
// This file: its state, start/stop, and frames in and out. Everything that runs later (the event
// pump, the tick, delayed answers, the echo agent, clips, the offer route's answers) is a child
// of one runner task per start(), handed over through `spawn`; stop() cancels them all.

import Foundation
import GatewayProtocol
import WebSocketTransport

public actor LoopbackGateway {
    typealias Job = @Sendable () async -> Void

    public let configuration: Configuration
    var server: WebSocketServer?
    var boundPort: Int = 0
    var connections: [ConnectionID: Connection] = [:]
    var devices: [String: Device] = [:]
    var pending: [String: PendingPairing] = [:]
    var bootstrapTokens: Set<String> = []
    var revokedAfterRemoval: Set<String> = []
    var invokeWaiters: [String: CheckedContinuation<NodeInvokeResult, any Error>] = [:]
    var lastInvoke: String?
    var recorded: [(role: String, frame: RequestFrame)] = []
    var chatSeen: [String: JSONValue] = [:]   // idempotencyKey → send response
    var history: [String: [JSONValue]] = [:]  // sessionKey → messages
    /// The runner of this start(): the event pump, the tick and every spawned job are its children.
    var runner: Task<Void, Never>?
    /// Where `spawn` posts jobs for the current runner (nil while stopped).
    nonisolated let jobs = Locked<AsyncStream<Job>.Continuation?>(nil)
    var triggers: [String]
    var wakeRoutes: [JSONValue] = []
    var wakeRoutesUpdatedAtMs: Int64 = 0
    let startedAt = Date()
    public var ticksStalled = false
    var relays: [String: RelayRecord] = [:]
    var relayOwners: [String: ConnectionID] = [:]
    var relayOrder: [String] = []
    var nextTranscripts: [String] = []
    var speakRequests: [(String, JSONValue)] = []
    var finishedRuns: Set<String> = []
    /// Milliseconds the loopback itself spent producing talk.speak/tts.speak clips and relay transcripts.
    var serviceMs: Double = 0
    var audioFault: AudioFault = .none
    var connectAttemptLog: [ConnectAttempt] = []
    var forcedConnectErrors: [ErrorShape] = []
    var startingConnects = 0
    var startingRetryAfterMs: Int64 = 0
    var deniedOperatorConnects = 0
    var calls: [String: CallRecord] = [:]
    var callOrder: [String] = []
    var offerBroker: LoopbackOfferBroker?
    var callMediaEnd: (@Sendable (String) async throws -> String)?
    var realtimeRelays: [String: RealtimeRelayRecord] = [:]
    var realtimeRelayOrder: [String] = []
    let log: @Sendable (String) -> Void

    public init(configuration: Configuration = Configuration(), log: @escaping @Sendable (String) -> Void = { _ in }) {
        self.configuration = configuration
        self.triggers = configuration.triggers
        self.log = log
    }

    // MARK: lifecycle

    public func start() throws {
        var o = WebSocketServerOptions()
        o.host = "127.0.0.1"
        o.port = boundPort != 0 ? boundPort : configuration.port
        o.tlsCertificatePEMPath = configuration.tlsCertificatePath
        o.tlsPrivateKeyPEMPath = configuration.tlsKeyPath
        let s = try WebSocketServer(options: o)
        server = s
        boundPort = s.port
        let (stream, sink) = AsyncStream.makeStream(of: Job.self)
        jobs.withLock { $0 = sink }
        try startOfferBroker()
        let interval = configuration.tickIntervalMs
        // Unstructured: the test peer is started and stopped by callers with no task group (tests, demo); stop() cancels it.
        runner = Task { [weak self] in
            await withDiscardingTaskGroup { group in
                group.addTask { [weak self] in for await e in s.events { await self?.serverEvent(e) } }
                group.addTask { [weak self] in
                    while !Task.isCancelled {
                        try? await Task.sleep(for: .milliseconds(interval))
                        await self?.broadcastTick()
                    }
                }
                for await job in stream { group.addTask(operation: job) }  // ends when stop() cancels
                group.cancelAll()
            }
        }
        log("loopback gateway listening on \(url)")
    }

    /// Runs `job` as a child of the current runner; false (and nothing runs) while stopped.
    @discardableResult
    nonisolated func spawn(_ job: @escaping Job) -> Bool {
        guard let sink = jobs.value else { return false }
        if case .enqueued = sink.yield(job) { return true }
        return false
    }

    public func stop() async {
        jobs.withLock { $0?.finish(); $0 = nil }
        runner?.cancel()
        runner = nil
        stopOfferBroker()
        if let server {
            // shutdown() joins the server's thread: keep that wait off the cooperative pool.
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                DispatchQueue.global().async { server.shutdown(); c.resume() }
            }
        }
        server = nil
        connections.removeAll()
        for (_, w) in invokeWaiters { w.resume(throwing: LoopbackError.disconnected) }
        invokeWaiters.removeAll()
    }

    public var port: Int { boundPort }
    public var url: String { "\(configuration.tlsCertificatePath == nil ? "ws" : "wss")://127.0.0.1:\(boundPort)" }

    /// Stops and starts again on the same port, keeping pairings and tokens, like a gateway restart.
    public func restart(downForMs: Int = 200, announce: Bool = true) async throws {
        if announce {
            for c in connections.values where c.helloDone {
                sendEvent("shutdown", ["reason": "restart", "restartExpectedMs": .number(Double(downForMs))], to: c.id)
            }
            for id in connections.keys { server?.close(id, code: 1012, reason: "service restart") }
            try? await Task.sleep(for: .milliseconds(50))
        }
        await stop()
        try? await Task.sleep(for: .milliseconds(downForMs))
        try start()
    }

    // MARK: sending

    func send(_ frame: GatewayFrame, to id: ConnectionID) {
        guard let server, var data = try? frame.encoded() else { return }
        if case .event = frame, !configuration.extraEventKeys.isEmpty,
           case .object(var o)? = try? JSONCoding.decode(JSONValue.self, from: data) {
            for (k, v) in configuration.extraEventKeys where o[k] == nil || k == "stateVersion" { o[k] = v }
            data = (try? JSONCoding.encode(JSONValue.object(o))) ?? data
        }
        server.send(configuration.binaryFrames ? .binary(Array(data)) : .text(String(decoding: data, as: UTF8.self)), to: id)
    }

    func sendEvent(_ name: String, _ payload: JSONValue, to id: ConnectionID, seq: Bool = true) {
        var s: Int64?
        if seq, var c = connections[id] {
            c.seq += 1
            s = c.seq
            connections[id] = c
        }
        send(.event(EventFrame(event: name, payload: payload, seq: s)), to: id)
    }

    func broadcast(_ name: String, _ payload: JSONValue, roles: Set<String>) {
        for c in connections.values where c.helloDone && roles.contains(c.role ?? "") {
            sendEvent(name, payload, to: c.id)
        }
    }

    func broadcastTick() {
        guard !ticksStalled else { return }
        let ts = Int64(Date().timeIntervalSince1970 * 1000)
        for c in connections.values where c.helloDone { sendEvent("tick", ["ts": .number(Double(ts))], to: c.id) }
    }

    func reply(_ id: String, _ payload: JSONValue, to conn: ConnectionID) {
        send(.response(.success(id, payload)), to: conn)
    }

    func fail(_ id: String, _ error: ErrorShape, to conn: ConnectionID) {
        send(.response(.failure(id, error)), to: conn)
    }

    // MARK: receiving

    func serverEvent(_ e: WebSocketServerEvent) {
        switch e {
        case .connected(let id, let headers):
            let nonce = UUID().uuidString.lowercased()
            connections[id] = Connection(id: id, nonce: nonce, origin: headers["origin"])
            let ts = Int64(Date().timeIntervalSince1970 * 1000)
            send(.event(EventFrame(event: "connect.challenge", payload: ["nonce": .string(nonce), "ts": .number(Double(ts))])), to: id)
        case .message(let id, let message):
            guard connections[id] != nil else { return }
            let bytes: [UInt8]
            switch message {
            case .text(let s): bytes = Array(s.utf8)
            case .binary(let b): bytes = b
            }
            received(bytes, from: id)
        case .disconnected(let id, _, _):
            connections.removeValue(forKey: id)
        }
    }

    func received(_ bytes: [UInt8], from id: ConnectionID) {
        guard let conn = connections[id] else { return }
        if !conn.helloDone && bytes.count > 64 * 1024 {
            log("pre-auth frame of \(bytes.count) bytes refused")
            server?.close(id, code: 1009, reason: "frame too large")
            return
        }
        let frame: GatewayFrame
        do { frame = try GatewayFrame.decode(bytes) } catch {
            log("\(error) from connection \(id.raw)")
            if !conn.helloDone { server?.close(id, code: 1008, reason: "invalid handshake") }
            return
        }
        guard case .request(let req) = frame else {
            if case .cancel = frame { return }  // old servers ignore unknown frame types
            return
        }
        if !conn.helloDone {
            handshake(req, conn)
        } else {
            recorded.append((conn.role ?? "?", req))
            method(req, conn)
        }
    }

}

public enum LoopbackError: Error, Sendable, CustomStringConvertible {
    case noNode, invokeTimedOut, disconnected
    public var description: String {
        switch self {
        case .noNode: return "no node is connected to the loopback gateway"
        case .invokeTimedOut: return "the node did not answer the invoke in time"
        case .disconnected: return "the loopback gateway stopped"
        }
    }
}
