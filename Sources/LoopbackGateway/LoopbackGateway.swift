// LoopbackGateway is a stand-in OpenClaw Gateway on 127.0.0.1 for `clawvoice demo` and the
// tests: it speaks the handshake as the spec describes it (challenge, closed connect schema,
// device-proof checks, token/password/bootstrap auth, pairing with request ids), sends ticks,
// routes node.invoke, answers chat.send with an echo agent, serves voicewake.get, and can be
// told to misbehave (drop, restart, stall ticks, malformed frames). It is the one fake in the
// project; it shares only the wire values of GatewayProtocol with the client it tests.

import Foundation
import GatewayProtocol
import WebSocketTransport

public actor LoopbackGateway {
    public enum AuthMode: Sendable, Equatable {
        case none
        case token(String)
        case password(String)
    }

    public struct Configuration: Sendable {
        public var auth: AuthMode = .token("loopback-shared-token")
        /// Approve pairing requests at once (the demo); tests approve explicitly.
        public var autoApprove = false
        /// Whether a setup code's bootstrap pairing hands over an operator token too (newer
        /// gateways); false is a gateway whose codes pair the node only.
        public var bootstrapHandsOverOperator = true
        public var tickIntervalMs = 15_000
        public var mainSessionKey = "agent:main:main"
        public var port = 0
        /// Send frames as binary WebSocket messages, as newer gateways may.
        public var binaryFrames = false
        /// Accept only v2 signatures, like gateways deployed before v3.
        public var legacySignaturesOnly = false
        public var triggers = VoiceWakeTriggers.defaults
        public var tlsCertificatePath: String?
        public var tlsKeyPath: String?
        /// Delay before each echo delta, so tests can watch a reply stream.
        public var echoDeltaDelayMs = 20
        /// The transcription relay's input contract. G.711 µ-law at 8 kHz is the only one the real
        /// relay takes (transcription-relay.ts); the Opus mode stays for relays that name it.
        public var relay: RelayMode = .g711MuLaw
        /// talk.session.create fails with `UNAVAILABLE` and `details.talkIssue` (no provider).
        public var relayUnavailable = false
        /// Which protocol generation the gateway plays (see `ProtocolMode`).
        public var protocolMode: ProtocolMode = .current
        /// The top-level `sessionKey` that `invoke` stamps on `node.invoke.request` by default.
        public var invokeSessionKey: InvokeSessionKeyForm = .mainSession
        /// Extra top-level keys put on every event frame, as newer gateways add them
        /// (`recipientProfileId`, a partial `stateVersion`); clients must ignore them.
        public var extraEventKeys: [String: JSONValue] = [:]
        /// talk.speak's format when the request names none.
        public var talkSpeakDefaultFormat = "pcm_24000"
        /// What `talk.config` reports as `talk.silenceTimeoutMs` (nil: the key is absent).
        public var silenceTimeoutMs: Int? = nil
        /// tts.speak has no format parameter; this is what it returns.
        public var ttsSpeakFormat = "wav"
        /// `talk.config`'s `talk.agentId` (nil: absent) and `session.mainKey` (D2).
        public var talkAgentId: String? = nil
        public var talkMainKey = "main"
        /// hello-ok's `features.capabilities` (e.g. `talk-session-target-v1`); empty: the key is absent.
        public var capabilities: [String] = []
        /// A multi-agent gateway: a talk.* `sessionKey` that is the bare "main" has no owner and
        /// is refused (D2, openclaw/openclaw#133958).
        public var multiAgentTalk = false
        /// Which `chat` deltas carry the cumulative `message` (D3).
        public var deltaSnapshots: DeltaSnapshots = .every
        public init() {}
    }

    /// D3: today's gateways put the cumulative `message` on every delta; the newest protocol
    /// docs put it only on the first text frame of a run, later ones carry only `deltaText`.
    public enum DeltaSnapshots: Sendable, Equatable { case every, firstOnly }

    /// The protocol the gateway speaks and how it refuses a range it cannot serve.
    public enum ProtocolMode: Sendable, Equatable {
        /// Protocol 4; nodes may use 3 (`min ≤ 4 ≤ max`, or node with `min ≤ 3 ≤ max`); mismatch
        /// details `{code:"PROTOCOL_MISMATCH", clientMinProtocol, clientMaxProtocol, expectedProtocol:4, minimumProbeProtocol:3}`.
        case current
        /// A released protocol-3 gateway: accepts `min ≤ 3 ≤ max`, answers hello-ok with protocol 3,
        /// refuses with `INVALID_REQUEST "protocol mismatch"`, `details:{expectedProtocol:3}` and no `code`.
        case releasedV3
        /// As `releasedV3`, but it also refuses any range that reaches above 3 (what makes the
        /// official node hosts' exact-4 first attempt fail), so a client's 3…3 retry is exercised.
        case releasedV3Exact
    }

    /// What `invoke` sends as the request's top-level `sessionKey`.
    public enum InvokeSessionKeyForm: Sendable, Equatable {
        /// The configured main session key, as a gateway stamps the invoking agent's session.
        case mainSession
        case key(String)
        /// `"sessionKey": null`.
        case null
        /// No key at all, like gateways before July 2026.
        case omitted
    }

    /// One connect request as it arrived, for tests of what the client offered.
    public struct ConnectAttempt: Sendable {
        public var nonce: String
        public var params: JSONValue
        public var connectionId: Int
    }

    /// A pairing request waiting for `approve`.
    public struct PendingPairing: Sendable, Equatable {
        public var requestId: String
        public var deviceId: String
        public var role: String
        public var scopes: [String]
        public var reason: String
    }

    struct Device {
        var publicKey: String
        var platform: String
        var deviceFamily: String
        var roles: [String: [String]] = [:]   // approved role → scopes
        var tokens: [String: String] = [:]     // role → device token
        var revoked: Set<String> = []
    }

    struct Connection {
        var id: ConnectionID
        var nonce: String
        var helloDone = false
        var role: String?
        var scopes: [String] = []
        var deviceId: String?
        var seq: Int64 = 0
        var origin: String?
        var subscriptions: Set<String> = []
    }

    public let configuration: Configuration
    private var server: WebSocketServer?
    private var boundPort: Int = 0
    var connections: [ConnectionID: Connection] = [:]
    private var devices: [String: Device] = [:]
    private var pending: [String: PendingPairing] = [:]
    private var bootstrapTokens: Set<String> = []
    private var revokedAfterRemoval: Set<String> = []
    private var invokeWaiters: [String: CheckedContinuation<NodeInvokeResult, any Error>] = [:]
    private var lastInvoke: String?
    private var recorded: [(role: String, frame: RequestFrame)] = []
    var chatSeen: [String: JSONValue] = [:]   // idempotencyKey → send response
    var history: [String: [JSONValue]] = [:]  // sessionKey → messages
    private var tickTask: Task<Void, Never>?
    private var eventTask: Task<Void, Never>?
    var triggers: [String]
    var wakeRoutes: [JSONValue] = []
    var wakeRoutesUpdatedAtMs: Int64 = 0
    private let startedAt = Date()
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
    private var connectAttemptLog: [ConnectAttempt] = []
    private var forcedConnectErrors: [ErrorShape] = []
    private var startingConnects = 0
    private var startingRetryAfterMs: Int64 = 0
    var deniedOperatorConnects = 0
    private let log: @Sendable (String) -> Void

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
        eventTask = Task { [weak self] in
            for await e in s.events { await self?.serverEvent(e) }
        }
        tickTask = Task { [weak self, interval = configuration.tickIntervalMs] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(interval))
                await self?.broadcastTick()
            }
        }
        log("loopback gateway listening on \(url)")
    }

    public func stop() async {
        tickTask?.cancel()
        eventTask?.cancel()
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

    // MARK: test and demo controls

    public func pendingPairings() -> [PendingPairing] { pending.values.sorted { $0.requestId < $1.requestId } }

    public func approve(_ requestId: String) -> Bool {
        guard let p = pending.removeValue(forKey: requestId), devices[p.deviceId] != nil else { return false }
        devices[p.deviceId]!.roles[p.role] = p.scopes
        log("approved \(p.role) for device \(p.deviceId.prefix(12))… (\(requestId))")
        return true
    }

    public func approveAll() { for id in pending.keys { _ = approve(id) } }

    public func reject(_ requestId: String) { pending.removeValue(forKey: requestId) }

    /// Revokes a device's token for a role: its next connect gets AUTH_DEVICE_TOKEN_MISMATCH.
    public func revokeToken(deviceId: String, role: String) {
        guard let t = devices[deviceId]?.tokens.removeValue(forKey: role) else { return }
        devices[deviceId]!.revoked.insert(t)
    }

    public func isPaired(deviceId: String, role: String) -> Bool { devices[deviceId]?.roles[role] != nil }

    /// A single-use bootstrap token and the setup code that carries it.
    public func makeSetupCode(expiresInMs: Int64 = 600_000) -> String {
        let token = "bt_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        bootstrapTokens.insert(token)
        let payload: JSONValue = ["url": .string(url), "bootstrapToken": .string(token),
                                  "expiresAtMs": .number(Double(Int64(Date().timeIntervalSince1970 * 1000) + expiresInMs))]
        return Base64URL.encode(Array((try? JSONCoding.encode(payload)) ?? Data()))
    }

    /// Requests the node's clients made after hello, in order, optionally of one method.
    public func requests(method: String? = nil) -> [RequestFrame] {
        recorded.map(\.frame).filter { method == nil || $0.method == method }
    }

    public func connectedRoles() -> [String] {
        connections.values.filter(\.helloDone).compactMap(\.role).sorted()
    }

    public func connectionCount() -> Int { connections.count }

    /// Every connect request received, in order (including rejected ones).
    public func connectAttempts() -> [ConnectAttempt] { connectAttemptLog }

    /// Answers the next connects with these errors, one each, before any other check (for the
    /// shapes a real gateway sends that the loopback would not produce by itself).
    public func failNextConnects(with errors: [ErrorShape]) { forcedConnectErrors += errors }

    /// Removes a device altogether (`openclaw devices remove`): its tokens stop working and it is no longer paired.
    public func removeDevice(_ deviceId: String) {
        guard let d = devices.removeValue(forKey: deviceId) else { return }
        for c in connections.values where c.deviceId == deviceId { server?.close(c.id, code: 1008, reason: "device removed") }
        revokedAfterRemoval.formUnion(d.tokens.values)
    }

    /// Answers the next `count` connects with `UNAVAILABLE` "gateway starting" and close 1013.
    public func simulateStartup(connects count: Int, retryAfterMs: Int64) {
        startingConnects = count
        startingRetryAfterMs = retryAfterMs
    }

    /// Makes talk.speak and tts.speak misbehave (or behave again with `.none`).
    public func setAudioFault(_ fault: AudioFault) { audioFault = fault }

    /// The next relay sessions report these texts instead of the audio's length and level.
    public func supplyTranscript(_ text: String) { nextTranscripts.append(text) }

    /// Relay sessions in the order they were created.
    public func relayRecords() -> [RelayRecord] { relayOrder.compactMap { relays[$0] } }
    public func relayRecord(_ id: String) -> RelayRecord? { relays[id] }

    /// Total time the loopback spent on its own work (clips, transcripts), for the bench to subtract.
    public func serviceTimes() -> Double { serviceMs }

    /// Whether the echo agent has sent the `final` event of this run.
    public func isRunFinished(_ runId: String) -> Bool { finishedRuns.contains(runId) }

    /// (method, params) of every talk.speak / tts.speak call.
    public func speakCalls() -> [(String, JSONValue)] { speakRequests }

    /// Stops (or resumes) every frame the gateway would send on its own, as a hung gateway does.
    public func stallTicks(_ stalled: Bool) { ticksStalled = stalled }

    /// Cuts every connection without a close frame.
    public func dropAll() { for id in connections.keys { server?.drop(id) } }

    /// Sends raw text (malformed JSON, unknown frame types, out-of-order responses) to every connection.
    public func sendRaw(_ text: String, role: String? = nil) {
        for c in connections.values where role == nil || c.role == role {
            server?.send(.text(text), to: c.id)
        }
    }

    public func sendRawBinary(_ bytes: [UInt8], role: String? = nil) {
        for c in connections.values where role == nil || c.role == role {
            server?.send(.binary(bytes), to: c.id)
        }
    }

    /// Asks the connected node to run a command and waits for its result.
    /// `sessionKey` picks the top-level key's form (nil: the configured `invokeSessionKey`).
    public func invoke(command: String, paramsJSON: String? = nil, timeoutMs: Int64? = 30_000,
                       deviceId: String? = nil, sessionKey: InvokeSessionKeyForm? = nil,
                       wait: Duration = .seconds(20)) async throws -> NodeInvokeResult {
        guard let node = connections.values.first(where: { $0.helloDone && $0.role == "node" && (deviceId == nil || $0.deviceId == deviceId) }),
              let nodeId = node.deviceId else { throw LoopbackError.noNode }
        let id = UUID().uuidString.lowercased()
        let session: InvokeSessionKey
        switch sessionKey ?? configuration.invokeSessionKey {
        case .mainSession: session = .value(configuration.mainSessionKey)
        case .key(let k): session = .value(k)
        case .null: session = .null
        case .omitted: session = .omitted
        }
        let request = NodeInvokeRequest(id: id, nodeId: nodeId, command: command, paramsJSON: paramsJSON,
                                        timeoutMs: timeoutMs, idempotencyKey: UUID().uuidString, session: session)
        var payload = request.payload
        if paramsJSON == nil, case .object(var o) = payload { o["paramsJSON"] = .null; payload = .object(o) }
        lastInvoke = id
        sendEvent("node.invoke.request", payload, to: node.id, seq: false)
        return try await withCheckedThrowingContinuation { cont in
            invokeWaiters[id] = cont
            Task { [weak self] in
                try? await Task.sleep(for: wait)
                await self?.timeoutInvoke(id)
            }
        }
    }

    /// The id of the most recent invoke sent to a node.
    public func lastInvokeId() -> String? { lastInvoke }

    /// Sends `node.invoke.cancel` with the newest (`invokeId`) or the older (`id`) key.
    public func cancelInvoke(_ id: String, legacyKey: Bool = false) {
        for c in connections.values where c.helloDone && c.role == "node" {
            sendEvent("node.invoke.cancel", legacyKey ? ["id": .string(id), "nodeId": .string(c.deviceId ?? "")]
                                                      : ["invokeId": .string(id), "nodeId": .string(c.deviceId ?? "")], to: c.id, seq: false)
        }
    }

    public func setTriggers(_ list: [String]) {
        triggers = list
        broadcast("voicewake.changed", VoiceWakeTriggers(triggers: list).payload, roles: ["node", "operator"])
    }

    /// Replaces the wake routes (`[{trigger, target:{sessionKey}|{agentId}|{mode:"current"}}]`)
    /// and sends `voicewake.routing.changed` to every node and operator, as voicewake.routing.set does.
    public func setWakeRoutes(_ routes: [JSONValue]) {
        wakeRoutes = Array(routes.prefix(32))
        wakeRoutesUpdatedAtMs = Int64(Date().timeIntervalSince1970 * 1000)
        broadcast("voicewake.routing.changed", wakeRoutingPayload, roles: ["node", "operator"])
    }

    var wakeRoutingPayload: JSONValue {
        ["config": ["version": 1, "defaultTarget": ["mode": "current"], "routes": .array(wakeRoutes),
                    "updatedAtMs": .number(Double(wakeRoutesUpdatedAtMs))]]
    }

    func takeInvokeWaiter(_ id: String) -> CheckedContinuation<NodeInvokeResult, any Error>? {
        invokeWaiters.removeValue(forKey: id)
    }

    func appendHistory(_ key: String, _ message: JSONValue) { history[key, default: []].append(message) }

    func subscribe(_ id: ConnectionID, key: String, on: Bool) {
        if on { connections[id]?.subscriptions.insert(key) } else { connections[id]?.subscriptions.remove(key) }
    }

    func connectionList() -> [Connection] { Array(connections.values) }

    func emit(_ name: String, _ payload: JSONValue, to id: ConnectionID, seq: Bool) { sendEvent(name, payload, to: id, seq: seq) }

    private func timeoutInvoke(_ id: String) {
        invokeWaiters.removeValue(forKey: id)?.resume(throwing: LoopbackError.invokeTimedOut)
    }

    // MARK: sending

    private func send(_ frame: GatewayFrame, to id: ConnectionID) {
        guard let server, var data = try? frame.encoded() else { return }
        if case .event = frame, !configuration.extraEventKeys.isEmpty,
           case .object(var o)? = try? JSONCoding.decode(JSONValue.self, from: data) {
            for (k, v) in configuration.extraEventKeys where o[k] == nil || k == "stateVersion" { o[k] = v }
            data = (try? JSONCoding.encode(JSONValue.object(o))) ?? data
        }
        server.send(configuration.binaryFrames ? .binary(Array(data)) : .text(String(decoding: data, as: UTF8.self)), to: id)
    }

    private func sendEvent(_ name: String, _ payload: JSONValue, to id: ConnectionID, seq: Bool = true) {
        var s: Int64?
        if seq, var c = connections[id] {
            c.seq += 1
            s = c.seq
            connections[id] = c
        }
        send(.event(EventFrame(event: name, payload: payload, seq: s)), to: id)
    }

    private func broadcast(_ name: String, _ payload: JSONValue, roles: Set<String>) {
        for c in connections.values where c.helloDone && roles.contains(c.role ?? "") {
            sendEvent(name, payload, to: c.id)
        }
    }

    private func broadcastTick() {
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

    private func serverEvent(_ e: WebSocketServerEvent) {
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

    private func received(_ bytes: [UInt8], from id: ConnectionID) {
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

    private func reject(_ req: RequestFrame, _ conn: Connection, _ error: ErrorShape, close code: Int = 1008, reason: String? = nil) {
        fail(req.id, error, to: conn.id)
        log("connect rejected: \(error)")
        let server = self.server
        let id = conn.id
        let closeReason = String((reason ?? error.message).prefix(120))
        // Give the response a moment to leave before the close frame, as the real gateway's ws library does.
        Task {
            try? await Task.sleep(for: .milliseconds(20))
            server?.close(id, code: code, reason: closeReason)
        }
    }

    private func handshake(_ req: RequestFrame, _ conn: Connection) {
        guard req.method == "connect" else {
            reject(req, conn, ErrorShape(code: "INVALID_REQUEST", message: "invalid handshake: first request must be connect"))
            return
        }
        connectAttemptLog.append(ConnectAttempt(nonce: conn.nonce, params: req.params ?? .null, connectionId: Int(conn.id.raw)))
        if !forcedConnectErrors.isEmpty {
            reject(req, conn, forcedConnectErrors.removeFirst())
            return
        }
        if startingConnects > 0 {
            startingConnects -= 1
            reject(req, conn, ErrorShape(code: "UNAVAILABLE", message: "gateway starting; retry shortly",
                                         details: ["reason": "startup-sidecars"], retryable: true,
                                         retryAfterMs: startingRetryAfterMs), close: 1013, reason: "gateway starting")
            return
        }
        if let origin = conn.origin {
            reject(req, conn, ErrorShape(code: "INVALID_REQUEST", message: "origin not allowed: \(origin)",
                                         details: ["code": "CONTROL_UI_ORIGIN_NOT_ALLOWED", "reason": "origin-not-allowed"]))
            return
        }
        let p: ConnectParams
        switch HandshakeCheck.validate(req.params) {
        case .failure(let e): reject(req, conn, e); return
        case .success(let v): p = v
        }
        let isNode = p.role == "node" && p.client.mode == "node"
        let offered = p.minProtocol...max(p.minProtocol, p.maxProtocol)
        switch configuration.protocolMode {
        case .current:
            guard offered.contains(4) || (isNode && offered.contains(3)) else {
                reject(req, conn, ErrorShape(code: "INVALID_REQUEST", message: "protocol mismatch",
                                             details: ["code": "PROTOCOL_MISMATCH", "clientMinProtocol": .number(Double(p.minProtocol)),
                                                       "clientMaxProtocol": .number(Double(p.maxProtocol)), "expectedProtocol": 4,
                                                       "minimumProbeProtocol": 3]), close: 1002)
                return
            }
        case .releasedV3, .releasedV3Exact:
            let refuses = !offered.contains(3) || (configuration.protocolMode == .releasedV3Exact && offered.upperBound > 3)
            if refuses {
                // The released-v3 shape: no details.code (openclaw-gateway-client tests/session.rs).
                reject(req, conn, ErrorShape(code: "INVALID_REQUEST", message: "protocol mismatch",
                                             details: ["expectedProtocol": 3]), close: 1002)
                return
            }
        }
        let helloProtocol = configuration.protocolMode == .current ? 4 : 3
        guard p.role == "node" || p.role == "operator" else {
            reject(req, conn, ErrorShape(code: "INVALID_REQUEST", message: "invalid role"))
            return
        }
        if p.role == "node" && !p.scopes.isEmpty {
            reject(req, conn, HandshakeCheck.invalidParams("/scopes", "must be empty for nodes"))
            return
        }
        guard let device = p.device else {
            reject(req, conn, ErrorShape(code: "NOT_PAIRED", message: "device identity required", details: ["code": "DEVICE_IDENTITY_REQUIRED"]))
            return
        }
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        if let e = HandshakeCheck.verifyDevice(p, expectedNonce: conn.nonce, nowMs: now, acceptV3: !configuration.legacySignaturesOnly) {
            reject(req, conn, e)
            return
        }
        // Credentials: shared secret first, then the device token (shared-token fallback), then bootstrap.
        let auth = p.auth ?? ConnectAuth()
        var known = devices[device.id]
        var viaBootstrap = false
        var authorised = false
        // A device token is accepted in either slot: `auth.deviceToken` (newest official clients)
        // or `auth.token` (older ones, checked as the shared secret first, then as a device token).
        if let t = auth.token, let dt = known?.tokens[p.role], t == dt { authorised = true }
        if !authorised, let t = auth.deviceToken {
            if let dt = known?.tokens[p.role], t == dt {
                authorised = true
            } else if auth.token == nil && auth.password == nil {
                reject(req, conn, authError("AUTH_DEVICE_TOKEN_MISMATCH", "unauthorized: device token mismatch (rotated or revoked)"))
                return
            }
        }
        if !authorised, let b = auth.bootstrapToken {
            guard bootstrapTokens.contains(b), p.role == "node" else {
                reject(req, conn, authError("AUTH_BOOTSTRAP_TOKEN_INVALID", "unauthorized: bootstrap token invalid or expired"))
                return
            }
            viaBootstrap = true
            authorised = true
        }
        if !authorised {
            switch configuration.auth {
            case .none:
                authorised = true
            case .token(let shared):
                if let t = auth.token, t == shared { authorised = true }
                else if let t = auth.token, known?.revoked.contains(t) == true || known?.tokens.isEmpty == false || revokedAfterRemoval.contains(t) {
                    reject(req, conn, authError("AUTH_DEVICE_TOKEN_MISMATCH", "unauthorized: device token mismatch (rotated or revoked)"))
                    return
                } else if auth.token != nil {
                    reject(req, conn, authError("AUTH_TOKEN_MISMATCH", "unauthorized: gateway token mismatch (provide gateway auth token)"))
                    return
                } else if auth.password == nil {
                    reject(req, conn, authError("AUTH_TOKEN_MISSING", "unauthorized: gateway token missing (provide gateway auth token)"))
                    return
                }
            case .password(let pw):
                if let given = auth.password {
                    guard given == pw else {
                        reject(req, conn, authError("AUTH_PASSWORD_MISMATCH", "unauthorized: gateway password mismatch"))
                        return
                    }
                    authorised = true
                } else if let t = auth.token, known?.revoked.contains(t) == true {
                    reject(req, conn, authError("AUTH_DEVICE_TOKEN_MISMATCH", "unauthorized: device token mismatch (rotated or revoked)"))
                    return
                } else {
                    reject(req, conn, authError("AUTH_PASSWORD_MISSING", "unauthorized: gateway password missing"))
                    return
                }
            }
            if !authorised {
                reject(req, conn, authError("AUTH_UNAUTHORIZED", "unauthorized"))
                return
            }
        }
        // Pairing: the device record pins platform and family; each role is approved separately.
        if known == nil {
            known = Device(publicKey: device.publicKey, platform: p.client.platform, deviceFamily: p.client.deviceFamily ?? "")
            devices[device.id] = known
        }
        var deviceTokens: [JSONValue] = []
        if viaBootstrap {
            // The node-pairing profile for node-host: approve the node and hand over an operator token too.
            bootstrapTokens.remove(auth.bootstrapToken!)
            devices[device.id]!.roles["node"] = []
            if configuration.bootstrapHandsOverOperator {
                devices[device.id]!.roles["operator"] = ["operator.read", "operator.write", "operator.talk"]
                let opToken = issueToken(device.id, role: "operator")
                deviceTokens.append(["deviceToken": .string(opToken), "role": "operator",
                                     "scopes": ["operator.read", "operator.write", "operator.talk"], "issuedAtMs": .number(Double(now))])
            }
        }
        if known!.platform != p.client.platform || known!.deviceFamily != (p.client.deviceFamily ?? "") {
            pairingRequired(req, conn, deviceId: device.id, role: p.role, scopes: p.scopes, reason: "metadata-upgrade")
            return
        }
        let approvedScopes = devices[device.id]!.roles[p.role]
        if approvedScopes == nil || !Set(p.scopes).isSubset(of: Set(approvedScopes!)) {
            if configuration.autoApprove {
                devices[device.id]!.roles[p.role] = p.scopes
            } else {
                pairingRequired(req, conn, deviceId: device.id, role: p.role, scopes: p.scopes,
                                reason: approvedScopes == nil ? (devices[device.id]!.roles.isEmpty ? "not-paired" : "role-upgrade") : "scope-upgrade")
                return
            }
        }
        if let refusal = accessPolicyRefusal(role: p.role) {
            reject(req, conn, refusal)
            return
        }
        let token = devices[device.id]!.tokens[p.role] ?? issueToken(device.id, role: p.role)
        var c = conn
        c.helloDone = true
        c.role = p.role
        c.scopes = p.scopes
        c.deviceId = device.id
        connections[conn.id] = c
        var auth2: [String: JSONValue] = ["role": .string(p.role), "scopes": .array(p.scopes.map { .string($0) }),
                                          "deviceToken": .string(token), "issuedAtMs": .number(Double(now))]
        if !deviceTokens.isEmpty { auth2["deviceTokens"] = .array(deviceTokens) }
        let hello: JSONValue = [
            "type": "hello-ok", "protocol": .number(Double(helloProtocol)),
            "server": ["version": "loopback-1", "connId": .string("conn-\(conn.id.raw)")],
            "features": features,
            "snapshot": ["presence": [], "health": [:], "stateVersion": ["presence": 1, "health": 1],
                         "uptimeMs": .number(Double(Int64(Date().timeIntervalSince(startedAt) * 1000))),
                         "sessionDefaults": ["defaultAgentId": "main", "mainKey": "main", "mainSessionKey": .string(configuration.mainSessionKey)],
                         "authMode": .string(authModeName)],
            "auth": .object(auth2),
            "policy": ["maxPayload": 26_214_400, "maxBufferedBytes": 52_428_800, "tickIntervalMs": .number(Double(configuration.tickIntervalMs))],
        ]
        reply(req.id, hello, to: conn.id)
        log("\(p.role) connected: device \(device.id.prefix(12))…")
        if p.role == "node" {
            sendEvent("voicewake.changed", VoiceWakeTriggers(triggers: triggers).payload, to: conn.id)
            sendEvent("voicewake.routing.changed", wakeRoutingPayload, to: conn.id)
        }
    }

    var advertisedMethods: [String] {
        Self.methods + ["talk.speak", "tts.speak", "talk.config"]
            + (configuration.relay == .disabled ? [] : ["talk.session.create", "talk.session.appendAudio", "talk.session.close"])
    }

    private var authModeName: String {
        switch configuration.auth { case .none: "none"; case .token: "token"; case .password: "password" }
    }

    private func authError(_ code: String, _ message: String) -> ErrorShape {
        ErrorShape(code: "INVALID_REQUEST", message: message, details: ["code": .string(code), "authReason": .string(code.lowercased())])
    }

    private func issueToken(_ deviceId: String, role: String) -> String {
        let t = "dt_\(role)_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        devices[deviceId]?.tokens[role] = t
        return t
    }

    private func pairingRequired(_ req: RequestFrame, _ conn: Connection, deviceId: String, role: String, scopes: [String], reason: String) {
        let existing = pending.values.first { $0.deviceId == deviceId && $0.role == role && $0.scopes == scopes }
        let requestId = existing?.requestId ?? "r_" + String(UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(12))
        pending[requestId] = PendingPairing(requestId: requestId, deviceId: deviceId, role: role, scopes: scopes, reason: reason)
        let message = reason == "role-upgrade" ? "pairing required: device is asking for a higher role than currently approved"
            : reason == "scope-upgrade" ? "pairing required: device is asking for more scopes than currently approved"
            : reason == "metadata-upgrade" ? "pairing required: device metadata changed"
            : "pairing required: device is not approved yet"
        let error = ErrorShape(code: "NOT_PAIRED", message: message, details: [
            "code": "PAIRING_REQUIRED", "reason": .string(reason), "requestId": .string(requestId),
            "remediationHint": "Approve this device from the pending pairing requests.",
            "deviceId": .string(deviceId), "requestedRole": .string(role), "requestedScopes": .array(scopes.map { .string($0) })])
        reject(req, conn, error, reason: "\(message) (requestId: \(requestId))")
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
