// One role's session to one gateway: owns its socket, its pending requests and its machine.
// `run()` is one loop over one stream: the socket's events (handed in by the client's service
// thread) and the wake-ups of one timer armed for the next deadline (a request's, or the
// machine's handshake, tick watchdog or retry), so an idle session costs nothing between them.
// Invokes and the Talk target's follow-up run as children of the loop's task group.

import ClawvoiceCore
import Dispatch
import Foundation
import GatewayCrypto
import GatewayProtocol
import Store
import WebSocketTransport

/// A session for one role (node or operator). Start it once; it reconnects by itself until stopped.
/// Every socket is a generation: callbacks and invoke results from an older socket are dropped.
public actor GatewaySession {
    public nonisolated let role: SessionRole
    public nonisolated let endpoint: GatewayEndpoint
    private let identity: DeviceIdentity
    private let instanceId: String
    private let store: ClawStore
    private let options: SessionOptions
    private let commands: NodeCommandRegistry?
    private let log: LogSink
    private let onStatus: @Sendable (SessionStatus) -> Void
    private let onEvent: @Sendable (EventFrame) -> Void
    private var credentials: GatewayCredentials

    private var machine: ConnectionMachine
    private let clock = ContinuousClock()
    private let epoch: ContinuousClock.Instant
    private var socket: WebSocketClient?
    private var generation = 0
    private var connectRequestId: String?
    private var sentAuth = ConnectAuth()
    private var pending: [String: PendingResponse] = [:]
    /// Request deadlines, earliest first; the timer is armed for the first (no task per request).
    private var deadlines: [(atMs: Int64, id: String, method: String, ms: Int64)] = []
    /// Running invokes: how to stop one (finishing its stream cancels its handler), and the
    /// signal that tells the handler why it was cancelled.
    private var invokes: [String: (stop: AsyncStream<Void>.Continuation, signal: InvokeSignal)] = [:]
    /// The loop's inbox while it runs; nil before start and after stop.
    private var inbox: AsyncStream<Input>.Continuation?
    /// Work for the loop's task group, made while it handles an input (invokes, the Talk target).
    private var jobs: [@Sendable () async -> Void] = []
    /// The one timer: a wake-up into the inbox at `armedMs`, the earliest deadline.
    private var timer: (any DispatchSourceTimer)?
    private var armedMs: Int64?
    /// The loop when `start()` began it (callers without a task group); `run()` needs none.
    private var runner: Task<Void, Never>?
    private var hello: HelloOk?
    private var connectedAtMs: Int64?
    private(set) var status: SessionStatus
    private var connectedWaiters: [CheckedContinuation<Void, Never>] = []
    private var lastSeq: Int64?
    /// The operator's default Talk target for this connection; nil until resolved.
    private var talkResolution: TalkTargetResolution?
    private var targetPending = false
    /// A retried rejection to name in the waiting status that follows (OPERATOR_ACCESS_DENIED).
    private var notice: ConnectionProblem?

    public init(role: SessionRole, endpoint: GatewayEndpoint, credentials: GatewayCredentials, identity: DeviceIdentity,
                instanceId: String, store: ClawStore, options: SessionOptions, commands: NodeCommandRegistry? = nil,
                log: LogSink, onStatus: @escaping @Sendable (SessionStatus) -> Void = { _ in },
                onEvent: @escaping @Sendable (EventFrame) -> Void = { _ in }) {
        self.role = role
        self.endpoint = endpoint
        self.credentials = credentials
        self.identity = identity
        self.instanceId = instanceId
        self.store = store
        self.options = options
        self.commands = commands
        self.log = log
        self.onStatus = onStatus
        self.onEvent = onEvent
        // Both roles fall back to 3…3 on a released-v3 gateway (issue 26).
        self.machine = ConnectionMachine(timing: options.timing)
        self.epoch = clock.now
        self.status = SessionStatus(role: role.rawValue, gateway: endpoint.name, state: .stopped, detail: "not started")
    }

    private var nowMs: Int64 {
        let d = clock.now - epoch
        return d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000
    }

    private var component: String { "gateway[\(endpoint.name)/\(role.rawValue)]" }

    // MARK: lifecycle

    /// What the loop takes, one at a time.
    private enum Input: Sendable {
        case socket(WebSocketEvent, generation: Int)
        /// The timer fired for the deadline at `dueMs`.
        case wake(dueMs: Int64)
    }

    /// Runs the session until its task is cancelled (or `stop()` is called): connects, and
    /// reconnects by itself. The way to run it as a service or a child of a task group.
    public func run() async {
        guard let stream = begin() else { return }
        await loop(stream)
        end()
    }

    /// Starts the session for a caller without a task group (tests, one-shot commands); `stop()`
    /// ends it. Connecting has begun (the status says so) when this returns.
    public func start() {
        guard let stream = begin() else { return }
        runner = Task { await self.loop(stream) }  // Unstructured: start()/stop() is the API for callers with no task group to run run() in; stop() cancels it
    }

    public func stop() {
        end()
        runner?.cancel()
        runner = nil
    }

    private func begin() -> AsyncStream<Input>? {
        guard inbox == nil else { return nil }
        let (stream, continuation) = AsyncStream.makeStream(of: Input.self)
        inbox = continuation
        setStatus(.connecting, "connecting to \(endpoint.url)")
        perform(machine.handle(.start, nowMs: nowMs))
        rearm()
        return stream
    }

    private func end() {
        perform(machine.handle(.stop, nowMs: nowMs))
        generation += 1  // what the old socket still hands in is dropped
        teardownSocket()
        cancelInvokes()
        timer?.cancel()
        timer = nil
        armedMs = nil
        inbox?.finish()
        inbox = nil
        setStatus(.stopped, "stopped")
        for w in connectedWaiters { w.resume() }
        connectedWaiters.removeAll()
    }

    /// The loop: one input at a time, then the children it asked for, then the timer re-armed.
    /// Ends when the inbox is finished (stop) or the task is cancelled; the children are then
    /// cancelled and waited for.
    private func loop(_ stream: AsyncStream<Input>) async {
        await withDiscardingTaskGroup { group in
            for await input in stream {
                switch input {
                case .socket(let event, let gen): socketEvent(event, generation: gen)
                case .wake(let due): wake(dueMs: due)
                }
                for job in jobs { group.addTask(operation: job) }
                jobs.removeAll()
                rearm()
            }
            group.cancelAll()
        }
    }

    /// Arms the timer for the earliest deadline. A deadline that moved later (every inbound
    /// frame moves the tick watchdog's) leaves the timer alone: its early wake finds nothing due
    /// and arms it again, so a busy socket does not reschedule it per frame.
    private func rearm() {
        let due = [machine.nextDeadlineMs, deadlines.first?.atMs].compactMap { $0 }.min()
        guard let due, armedMs.map({ due < $0 }) ?? true, let inbox else { return }
        armedMs = due
        let t: any DispatchSourceTimer
        if let timer { t = timer } else {
            t = DispatchSource.makeTimerSource(queue: .global())
            t.resume()
            timer = t
        }
        t.setEventHandler { inbox.yield(.wake(dueMs: due)) }
        t.schedule(deadline: .now() + .milliseconds(Int(max(0, due - nowMs))), leeway: .milliseconds(2))
    }

    /// Credentials changed (a new token or setup code): forget the pause and reconnect.
    public func update(credentials: GatewayCredentials) {
        self.credentials = credentials
        if case .paused = machine.phase { perform(machine.handle(.start, nowMs: nowMs)) }
    }

    public func currentStatus() -> SessionStatus { status }
    public func currentHello() -> HelloOk? { hello }
    /// The operator's default Talk target, as resolved on this connection (nil: not yet, or the node).
    public func talkTarget() -> TalkTargetResolution? { targetPending ? nil : talkResolution }
    /// The session the node names when none was chosen: the resolved Talk target, else hello-ok's
    /// main session; nil while the target is being resolved or when not connected.
    public func defaultSessionKey() -> String? {
        guard let hello, !targetPending else { return nil }
        return talkResolution?.target?.sessionKey ?? hello.mainSessionKey
    }
    public var isConnected: Bool { machine.phase == .connected }

    /// Waits until the session is connected, paused or stopped, or the timeout passes.
    public func waitUntilSettled(timeout: Duration) async -> SessionStatus {
        if settled { return status }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.waitForSettle() }
            group.addTask { try? await Task.sleep(for: timeout) }
            await group.next()
            group.cancelAll()
            self.releaseWaiters()
        }
        return status
    }

    private var settled: Bool {
        switch status.state { case .connected, .paused, .stopped: return true; default: return false }
    }

    private func waitForSettle() async {
        if settled { return }
        await withCheckedContinuation { connectedWaiters.append($0) }
    }

    private func releaseWaiters() {
        for w in connectedWaiters { w.resume() }
        connectedWaiters.removeAll()
    }

    private func wake(dueMs due: Int64) {
        if armedMs == due { armedMs = nil }  // fired: the next rearm schedules it again
        let now = nowMs
        while let d = deadlines.first, d.atMs <= now {
            deadlines.removeFirst()
            pending.removeValue(forKey: d.id)?.resolve(.failure(GatewayRequestError.timedOut(method: d.method, ms: d.ms)))
        }
        perform(machine.handle(.wake(dueMs: due), nowMs: now, random: Double.random(in: 0..<1)))
    }

    // MARK: requests

    /// Sends a request on the live socket and waits for its response payload.
    public func request(_ method: String, params: JSONValue? = nil, timeoutMs: Int64? = nil) async throws -> JSONValue {
        try await send(method, params: params, timeoutMs: timeoutMs).value()
    }

    /// Puts a request on the wire now and returns its response to await later: calls made one
    /// after another from one task leave in that order, however many are in flight.
    public func send(_ method: String, params: JSONValue? = nil, timeoutMs: Int64? = nil) throws -> PendingResponse {
        guard machine.phase == .connected, let socket else {
            throw GatewayRequestError.notConnected(status.detail)
        }
        let id = UUID().uuidString.lowercased()
        let text = try GatewayFrame.request(RequestFrame(id: id, method: method, params: params)).encodedString()
        let limit = max(hello?.maxPayload ?? options.maxMessageBytes, 1024)
        if text.utf8.count > limit { throw GatewayRequestError.tooLarge(bytes: text.utf8.count, limit: limit) }
        let timeout = timeoutMs ?? options.requestTimeoutMs
        let response = PendingResponse()
        pending[id] = response
        socket.send(.text(text))
        if timeout > 0 {
            let at = nowMs + timeout
            deadlines.insert((at, id, method, timeout), at: deadlines.firstIndex { $0.atMs > at } ?? deadlines.endIndex)
            rearm()
        }
        return response
    }

    /// Fire-and-forget send on the current generation only.
    private func send(_ frame: GatewayFrame, generation gen: Int) {
        guard gen == generation, let socket, let text = try? frame.encodedString() else { return }
        socket.send(.text(text))
    }

    // MARK: actions

    private func perform(_ actions: [ConnectionAction]) {
        for action in actions {
            switch action {
            case .openSocket:
                openSocket()
            case .sendConnect(let challenge, let version):
                sendConnect(challenge, version)
            case .closeSocket(let code, let reason):
                socket?.close(code: code, reason: reason)
                teardownSocket()
            case .connected(let h):
                connected(h)
            case .disconnected(let reason):
                log.log(.warning, component, "disconnected: \(reason)")
                failPending()
                cancelInvokes()
            case .deleteStoredToken:
                log.log(.warning, component, "the gateway rejected the stored device token; deleting it")
                try? store.deleteToken(gateway: endpoint.name, role: role.rawValue)
            case .pairingRequired(let req):
                pairingRequired(req)
            case .refused(let problem):
                if status.code != problem.code { log.log(.warning, component, "\(problem.summary); \(problem.nextStep)") }
                notice = problem
            case .retry(let ms, let reason):
                if let n = notice {
                    notice = nil
                    var s = SessionStatus(role: role.rawValue, gateway: endpoint.name, state: .waiting,
                                          detail: "\(n.summary); retrying in \(formatSeconds(ms))")
                    s.code = n.code
                    s.nextStep = n.nextStep
                    publish(s)
                } else if machine.isPairing || status.state == .pairing {
                    // Stay quiet while waiting for approval: the request id was already shown.
                    log.log(.debug, component, "pairing: next try in \(formatSeconds(ms))")
                } else {
                    log.log(.info, component, "\(reason); retrying in \(formatSeconds(ms))")
                    setStatus(.waiting, "\(reason); retrying in \(formatSeconds(ms))")
                }
            case .clientStalled(let ms):
                // Frames may be waiting unread; the machine has not counted this time against the gateway.
                log.log(ms >= 5_000 ? .warning : .info, component,
                        "this process did not run for \(formatSeconds(ms)) (machine overloaded or suspended?); the gateway's silence in that time is not held against it")
            case .paused(let problem):
                log.log(.error, component, problem.description)
                var s = SessionStatus(role: role.rawValue, gateway: endpoint.name, state: .paused, detail: problem.summary)
                s.nextStep = problem.nextStep
                publish(s)
            }
        }
        rearm()
    }

    private func openSocket() {
        teardownSocket()
        if role == .operator, credentials.sharedToken == nil, credentials.password == nil,
           (try? store.token(gateway: endpoint.name, role: role.rawValue)) == nil {
            if credentials.bootstrapToken != nil {
                if (try? store.gateway(named: endpoint.name))?.bootstrapToken == nil,
                   (try? store.token(gateway: endpoint.name, role: SessionRole.node.rawValue)) != nil {
                    // The node redeemed the code and no operator token came with it: waiting cannot help.
                    perform(machine.handle(.blocked(ConnectionProblem(
                        code: "NO_OPERATOR_TOKEN",
                        summary: "the setup code paired the node only: the gateway handed over no operator token",
                        nextStep: "add the operator role with `clawvoice pair --url \(endpoint.url) --token-file FILE` (the gateway's shared token), or use a setup code from a gateway that includes operator access")),
                                               nowMs: nowMs))
                    return
                }
                // The setup code is single-use and belongs to the node; its handoff brings the operator token.
                setStatus(.pairing, "waiting for the node session to finish pairing")
                perform(machine.handle(.deferred(reason: "waiting for node pairing"), nowMs: nowMs))
                return
            }
        }
        generation += 1
        let gen = generation
        let url: WebSocketURL
        do {
            url = try WebSocketURL(parsing: endpoint.url)
        } catch {
            perform(machine.handle(.socketFailed(message: "bad gateway URL \(endpoint.url): \(error)", permanent: true), nowMs: nowMs))
            return
        }
        var wsOptions = WebSocketClientOptions()
        wsOptions.tlsPinSHA256 = endpoint.tlsFingerprint
        wsOptions.allowInsecureRemote = endpoint.allowInsecure
        wsOptions.maxMessageBytes = options.maxMessageBytes
        wsOptions.pingInterval = .seconds(options.pingIntervalSeconds)
        let client: WebSocketClient
        do {
            client = try WebSocketClient(url: url, options: wsOptions) { [inbox] event, _ in
                inbox?.yield(.socket(event, generation: gen))
            }
        } catch {
            perform(machine.handle(.socketFailed(message: "\(error)", permanent: true), nowMs: nowMs))
            return
        }
        socket = client
        if status.state != .pairing { setStatus(.connecting, "connecting to \(endpoint.url)") }
        client.connect()
    }

    private func teardownSocket() {
        socket = nil
        connectRequestId = nil
    }

    /// The credential for this attempt, in the order of the newest official clients (the Linux
    /// app's `select_auth`, the Rust node host's `ConnectAuth::device_token`):
    /// 1. a setup code not redeemed yet, with no shared token or password → `auth.bootstrapToken`
    ///    (it wins over an old device token; spec §2.6 step 3);
    /// 2. the stored device token of this gateway and role → `auth.deviceToken`, alone: the shared
    ///    secret is not sent beside it, so revoking the device really locks it out;
    /// 3. else the shared token → `auth.token` and/or the password → `auth.password`.
    /// The signature binds `token ?? deviceToken ?? bootstrapToken`, i.e. whichever was sent.
    private func resolveAuth() -> (ConnectAuth, usedBootstrap: Bool) {
        let stored = try? store.token(gateway: endpoint.name, role: role.rawValue)
        let auth = Self.auth(role: role, credentials: credentials, storedDeviceToken: stored?.token)
        return (auth, auth.bootstrapToken != nil)
    }

    /// The pure part of `resolveAuth`, for tests.
    public static func auth(role: SessionRole, credentials: GatewayCredentials, storedDeviceToken: String?) -> ConnectAuth {
        var auth = ConnectAuth()
        if role == .node, let bootstrap = credentials.bootstrapToken, credentials.sharedToken == nil, credentials.password == nil {
            auth.bootstrapToken = bootstrap
        } else if let stored = storedDeviceToken, !stored.isEmpty {
            auth.deviceToken = stored
        } else {
            auth.token = credentials.sharedToken
            auth.password = credentials.password
        }
        return auth
    }

    private func sendConnect(_ challenge: ConnectChallenge, _ version: SignatureVersion) {
        let (auth, _) = resolveAuth()
        sentAuth = auth
        let isNode = role == .node
        let client = ClientInfo(id: isNode ? "node-host" : options.operatorClientId, displayName: options.displayName,
                                version: options.version, platform: SessionOptions.platform,
                                deviceFamily: SessionOptions.deviceFamily, modelIdentifier: options.modelIdentifier,
                                mode: isNode ? "node" : options.operatorClientMode, instanceId: instanceId)
        let scopes = isNode ? [] : options.operatorScopes
        let payload = DeviceAuthPayload.build(version: version == .v3 ? .v3 : .v2, deviceId: identity.deviceId,
                                              clientId: client.id, clientMode: client.mode, role: role.rawValue,
                                              scopes: scopes, signedAtMs: challenge.ts, token: auth.signatureToken,
                                              nonce: challenge.nonce, platform: client.platform,
                                              deviceFamily: client.deviceFamily)
        let signature: String
        do { signature = try identity.sign(payload) } catch {
            perform(machine.handle(.socketFailed(message: "could not sign the connect request: \(error)", permanent: true), nowMs: nowMs))
            return
        }
        let range = ConnectParams.protocolRange(for: role, protocolFallback: machine.protocolFallback)
        let params = ConnectParams(
            minProtocol: range.lowerBound, maxProtocol: range.upperBound, client: client,
            caps: isNode ? options.caps : nil, commands: isNode ? (commands?.declaredCommands ?? options.commands) : nil,
            permissions: isNode ? options.permissions : nil, role: role.rawValue, scopes: scopes,
            device: DeviceProof(id: identity.deviceId, publicKey: identity.publicKeyBase64URL, signature: signature,
                                signedAt: challenge.ts, nonce: challenge.nonce),
            auth: auth.isEmpty ? nil : auth, locale: options.locale, userAgent: "clawvoice/\(options.version)")
        let id = UUID().uuidString.lowercased()
        connectRequestId = id
        guard let p = try? JSONValue(encoding: params) else { return }
        send(.request(RequestFrame(id: id, method: GatewayMethod.connect, params: p)), generation: generation)
    }

    private func connected(_ h: HelloOk) {
        hello = h
        lastSeq = nil
        connectedAtMs = Int64(Date().timeIntervalSince1970 * 1000)
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        if let token = h.auth.deviceToken {
            try? store.saveToken(gateway: endpoint.name, role: role.rawValue, token: token, scopes: h.auth.scopes, nowMs: now)
        }
        if !h.auth.deviceTokens.isEmpty && trustedForHandoff {
            for t in h.auth.deviceTokens where t.role == "node" || t.role == "operator" {
                let scopes = t.role == "node" ? [] : t.scopes.filter {
                    ["operator.admin", "operator.approvals", "operator.questions", "operator.read", "operator.talk.secrets",
                     "operator.write", "operator.talk"].contains($0)
                }
                try? store.saveToken(gateway: endpoint.name, role: t.role, token: t.deviceToken, scopes: scopes, nowMs: now)
            }
        }
        if credentials.bootstrapToken != nil, role == .node, h.auth.deviceToken != nil {
            // Single use and short-lived: keep it no longer than pairing needs it.
            try? store.clearBootstrapToken(gateway: endpoint.name)
            credentials.bootstrapToken = nil
        }
        forgetSharedSecretIfDone()
        log.log(.info, component, "connected (gateway \(h.serverVersion), protocol \(h.protocolVersion), tick \(formatSeconds(Int64(h.tickIntervalMs))))")
        talkResolution = nil
        notice = nil
        guard role == .operator, options.resolveTalkTarget else {
            targetPending = false
            if !options.resolveTalkTarget, let key = h.mainSessionKey { try? store.setMainSessionKey(gateway: endpoint.name, key: key) }
            publishConnected(h)
            return
        }
        // The default Talk target first (issue 26, D2), so "connected" comes with the session
        // turns will name. A gateway without talk.config (or that refuses it) leaves the defaults.
        targetPending = true
        let asks = h.methods.isEmpty || h.methods.contains("talk.config")
        let answer = asks ? try? send("talk.config", params: ["includeSecrets": false], timeoutMs: 5_000) : nil
        let gen = generation
        jobs.append { [self] in  // the talk.config answer arrives after hello-ok is handled; a newer socket's generation drops it
            let config = try? await answer?.value()
            await finishTalkTarget(h, config: config, generation: gen)
        }
    }

    private func finishTalkTarget(_ h: HelloOk, config: JSONValue?, generation gen: Int) {
        guard gen == generation, machine.phase == .connected else { return }
        let r = TalkTarget.resolve(talkConfig: config, mainSessionKey: h.mainSessionKey, capabilities: h.capabilities)
        talkResolution = r
        targetPending = false
        switch r {
        case .resolved(let t):
            log.log(.info, component, "Talk target \(t.sessionKey) (from \(t.source.rawValue)\(t.gatewayTakesAgentId ? ", gateway takes agentId" : ""))")
        case .invalid(let why):
            log.log(.warning, component, "Talk target: \(why); turns go to the gateway's main session \(h.mainSessionKey ?? "main")")
        }
        if let key = defaultSessionKey() { try? store.setMainSessionKey(gateway: endpoint.name, key: key) }
        publishConnected(h)
    }

    private func publishConnected(_ h: HelloOk) {
        var s = SessionStatus(role: role.rawValue, gateway: endpoint.name, state: .connected,
                              detail: "connected to \(endpoint.url)\(h.protocolVersion == 3 ? " (protocol 3, degraded)" : "")")
        s.serverVersion = h.serverVersion
        s.mainSessionKey = defaultSessionKey()
        s.connectedAtMs = connectedAtMs
        s.protocolVersion = h.protocolVersion
        let limits = SessionLimits.lines(role: role, hello: h, target: talkTarget())
        s.limits = limits.isEmpty ? nil : limits
        publish(s)
    }

    /// Once this role got in with its device token and the other role has one too, the shared
    /// gateway token and password have done their job: they leave SQLite and this session's memory,
    /// unless the user asked to keep them (`gateway.keepSharedSecret`). Proving the device token
    /// first means a failed token can never strand the node without its way back in.
    private func forgetSharedSecretIfDone() {
        guard !options.keepSharedSecret, sentAuth.deviceToken != nil,
              credentials.sharedToken != nil || credentials.password != nil else { return }
        let other: SessionRole = role == .node ? .operator : .node
        guard (try? store.token(gateway: endpoint.name, role: other.rawValue)) != nil else { return }
        credentials.sharedToken = nil
        credentials.password = nil
        do {
            if try store.clearSharedSecret(gateway: endpoint.name) {
                log.log(.info, component, "signed in with the device token; the shared gateway secret is no longer stored (set gateway.keepSharedSecret to keep it)")
            }
        } catch {
            log.log(.warning, component, "could not remove the shared gateway secret from the store: \(error)")
        }
    }

    private var trustedForHandoff: Bool {
        guard let url = try? WebSocketURL(parsing: endpoint.url) else { return false }
        return url.secure || url.isLoopback || endpoint.allowInsecure
    }

    private func pairingRequired(_ req: PairingRequest) {
        let first = status.state != .pairing || status.requestId != req.requestId
        var s = SessionStatus(role: role.rawValue, gateway: endpoint.name, state: .pairing,
                              detail: "waiting for approval on the gateway (\(req.reason ?? "not-paired"))")
        s.requestId = req.requestId
        if let id = req.requestId {
            s.nextStep = "on the gateway host run: openclaw devices approve \(id)"
        } else {
            s.nextStep = "on the gateway host run: openclaw devices list, then openclaw devices approve <requestId>"
        }
        if first {
            log.log(.warning, component, "pairing required (\(req.reason ?? "not-paired")), request \(req.requestId ?? "?"); \(s.nextStep ?? "")")
        }
        publish(s)
    }

    private func setStatus(_ state: SessionStatus.State, _ detail: String) {
        var s = SessionStatus(role: role.rawValue, gateway: endpoint.name, state: state, detail: detail)
        if state == .pairing { s.requestId = status.requestId; s.nextStep = status.nextStep }
        publish(s)
    }

    private func publish(_ s: SessionStatus) {
        guard s != status else { return }
        status = s
        onStatus(s)
        if settled { releaseWaiters() }
    }

    private func failPending() {
        let all = pending
        pending.removeAll()
        deadlines.removeAll()
        for (_, c) in all { c.resolve(.failure(GatewayRequestError.disconnected)) }
    }

    private func cancelInvokes() {
        for (_, i) in invokes { i.signal.end(.disconnected); i.stop.finish() }
        invokes.removeAll()
    }

    // MARK: inbound

    private func socketEvent(_ event: WebSocketEvent, generation gen: Int) {
        guard gen == generation else { return }  // a late callback from a replaced socket
        switch event {
        case .opened:
            log.log(.debug, component, "socket open")
        case .message(let message):
            let size: Int
            switch message {
            case .text(let s): size = s.utf8.count
            case .binary(let b): size = b.count
            }
            receive(message, generation: gen)
            // Megabytes were decoded and (mostly) dropped again: hand the heap back (issue 11).
            if size >= 1 << 20 { ProcessMemory.trim() }
        case .closed(let code, let reason):
            teardownSocket()
            perform(machine.handle(.socketClosed(code: code, reason: reason), nowMs: nowMs, random: Double.random(in: 0..<1)))
        case .failed(let error):
            teardownSocket()
            let permanent: Bool
            if case .tlsPinMismatch = error { permanent = true } else { permanent = false }
            perform(machine.handle(.socketFailed(message: "\(error)", permanent: permanent), nowMs: nowMs, random: Double.random(in: 0..<1)))
        }
    }

    private func receive(_ message: WebSocketMessage, generation gen: Int) {
        let frame: GatewayFrame
        do {
            switch message {
            case .text(let s): frame = try GatewayFrame.decode(s)
            case .binary(let b): frame = try GatewayFrame.decode(b)
            }
        } catch {
            // A bad frame is logged and skipped; it still proves the gateway is alive.
            log.log(.warning, component, "\(error); ignored")
            perform(machine.handle(.inbound, nowMs: nowMs))
            return
        }
        handle(frame, generation: gen)
    }

    private func handle(_ frame: GatewayFrame, generation gen: Int) {
        switch frame {
        case .event(let e) where e.event == GatewayEvent.challenge:
            guard machine.phase == .opening else { return }
            guard let challenge = ConnectChallenge(payload: e.payload) else {
                log.log(.warning, component, "connect.challenge without a usable nonce and ts; ignored")
                return
            }
            perform(machine.handle(.challenge(challenge), nowMs: nowMs))
        case .response(let r) where r.id == connectRequestId:
            connectRequestId = nil
            if r.ok, let h = HelloOk(payload: r.payload) {
                perform(machine.handle(.helloOk(h), nowMs: nowMs))
            } else {
                let error = r.error ?? ErrorShape(code: "INVALID_REQUEST", message: "hello-ok payload not understood")
                perform(machine.handle(.connectRejected(error), nowMs: nowMs, random: Double.random(in: 0..<1)))
            }
        case .response(let r):
            perform(machine.handle(.inbound, nowMs: nowMs))
            guard let cont = pending.removeValue(forKey: r.id) else {
                log.log(.debug, component, "response for unknown request \(r.id); ignored")
                return
            }
            if r.ok { cont.resolve(.success(r.payload ?? .null)) }
            else { cont.resolve(.failure(GatewayRequestError.failed(r.error ?? ErrorShape(code: "UNKNOWN", message: "failed")))) }
        case .event(let e):
            perform(machine.handle(.inbound, nowMs: nowMs))
            guard machine.phase == .connected else { return }
            if let seq = e.seq {
                if let last = lastSeq, seq > last + 1 {
                    log.log(.info, component, "event gap: expected seq \(last + 1), got \(seq)")
                }
                lastSeq = seq
            }
            switch e.event {
            case GatewayEvent.tick:
                break
            case GatewayEvent.shutdown:
                let s = ShutdownEvent(payload: e.payload)
                log.log(.info, component, "gateway shutting down: \(s?.reason ?? "no reason")")
                perform(machine.handle(.shutdownNotice(restartExpectedMs: s?.restartExpectedMs), nowMs: nowMs))
            case GatewayEvent.nodeInvokeRequest where role == .node:
                invoke(e.payload, generation: gen)
            case GatewayEvent.nodeInvokeCancel where role == .node:
                if let c = NodeInvokeCancel(payload: e.payload), let running = invokes.removeValue(forKey: c.invokeId) {
                    log.log(.info, component, "invoke \(c.invokeId) cancelled by the gateway")
                    running.signal.end(.cancelled)
                    running.stop.finish()
                }
            default:
                onEvent(e)
            }
        case .request(let r):
            perform(machine.handle(.inbound, nowMs: nowMs))
            log.log(.debug, component, "unexpected request \(r.method) from the gateway; ignored")
        case .cancel:
            perform(machine.handle(.inbound, nowMs: nowMs))
        }
    }

    private func invoke(_ payload: JSONValue?, generation gen: Int) {
        guard let request = NodeInvokeRequest(payload: payload) else {
            // With an id it can still be answered; the gateway would otherwise wait for its timeout.
            if let id = NodeInvokeRequest.idOfUnusable(payload: payload) {
                log.log(.warning, component, "node.invoke.request \(id) without a command; answered INVALID_REQUEST")
                send(.request(RequestFrame(id: UUID().uuidString.lowercased(), method: GatewayMethod.nodeInvokeResult,
                                           params: try? JSONValue(encoding: NodeInvokeResult.failure(id: id, nodeId: identity.deviceId,
                                               error: NodeInvokeError(code: .invalidRequest, message: "node.invoke.request without a command"))))),
                     generation: gen)
            } else {
                log.log(.warning, component, "node.invoke.request without an id; ignored")
            }
            return
        }
        let nodeId = identity.deviceId
        guard let commands else {
            send(.request(RequestFrame(id: UUID().uuidString.lowercased(), method: GatewayMethod.nodeInvokeResult,
                                       params: try? JSONValue(encoding: NodeInvokeResult.failure(id: request.id, nodeId: nodeId,
                                           error: NodeInvokeError(code: .invalidRequest, message: "no commands"))))), generation: gen)
            return
        }
        // The answer leaves when the timeout says, not when the handler stops (InvokeLatch).
        // A child of the loop's group; node.invoke.cancel or a lost socket finishes `stop`, which
        // cancels the handler (the group cannot cancel one child on its own).
        let signal = InvokeSignal()
        let (stopped, stop) = AsyncStream.makeStream(of: Void.self)
        jobs.append { [self] in
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    await InvokeLatch.run(request, nodeId: nodeId, timeoutMs: request.timeoutMs ?? 30_000, signal: signal,
                                          handler: { await commands.handle(request, nodeId: nodeId) },
                                          answer: { await self.finishInvoke(request, $0, generation: gen) })
                }
                group.addTask { for await _ in stopped {} }
                await group.next()
                group.cancelAll()
            }
            await invokeStopped(request.id, signal)
        }
        invokes[request.id] = (stop, signal)
    }

    private func invokeStopped(_ id: String, _ signal: InvokeSignal) {
        if invokes[id]?.signal === signal { invokes.removeValue(forKey: id) }
    }

    private func finishInvoke(_ request: NodeInvokeRequest, _ result: NodeInvokeResult, generation gen: Int) {
        if !result.ok { log.log(.info, component, "\(request.command) → \(result.error?.message ?? "failed")") }
        // Results go back only on the socket that received the request; a replaced socket's work is dropped.
        guard let params = try? JSONValue(encoding: result) else { return }
        send(.request(RequestFrame(id: UUID().uuidString.lowercased(), method: GatewayMethod.nodeInvokeResult, params: params)),
             generation: gen)
    }

    /// Sends a `node.event` (node role only).
    public func sendNodeEvent(_ event: String, payload: JSONValue) async throws -> JSONValue {
        try await request(GatewayMethod.nodeEvent, params: try JSONValue(encoding: NodeEventParams(event: event, payload: payload)))
    }
}

/// A session runs as a service: `run()` until cancelled.
extension GatewaySession: Service {}
