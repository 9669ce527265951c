// One role's session to one gateway: owns its socket, its pending requests and its machine.
// `run()` is one loop over one stream: the socket's events (handed in by the client's service
// thread) and the wake-ups of one timer armed for the next deadline (a request's, or the
// machine's handshake, tick watchdog or retry), so an idle session costs nothing between them.
// Invokes and the Talk target's follow-up run as children of the loop's task group.
// This file: the state, the lifecycle and the loop, the timer, and requests;
// GatewaySession+Connect.swift carries out the machine's actions (socket, connect, status),
// GatewaySession+Inbound.swift takes frames in and runs node invokes.

import ClawvoiceCore
import Dispatch
import Foundation
public import GatewayCrypto
public import GatewayProtocol
public import Store
import WebSocketTransport

/// A session for one role (node or operator). Start it once; it reconnects by itself until stopped.
/// Every socket is a generation: callbacks and invoke results from an older socket are dropped.
public actor GatewaySession {
    public nonisolated let role: SessionRole
    public nonisolated let endpoint: GatewayEndpoint
    let identity: DeviceIdentity
    let instanceId: String
    let store: ClawStore
    let options: SessionOptions
    let commands: NodeCommandRegistry?
    let log: LogSink
    let onStatus: @Sendable (SessionStatus) -> Void
    let onEvent: @Sendable (EventFrame) -> Void
    var credentials: GatewayCredentials

    var machine: ConnectionMachine
    let clock = ContinuousClock()
    let epoch: ContinuousClock.Instant
    var socket: WebSocketClient?
    var generation = 0
    var connectRequestId: String?
    var sentAuth = ConnectAuth()
    var pending: [String: PendingResponse] = [:]
    /// Request deadlines, earliest first; the timer is armed for the first (no task per request).
    var deadlines: [(atMs: Int64, id: String, method: String, ms: Int64)] = []
    /// Running invokes: how to stop one (finishing its stream cancels its handler), and the
    /// signal that tells the handler why it was cancelled.
    var invokes: [String: (stop: AsyncStream<Void>.Continuation, signal: InvokeSignal)] = [:]
    /// The loop's inbox while it runs; nil before start and after stop.
    var inbox: AsyncStream<Input>.Continuation?
    /// Work for the loop's task group, made while it handles an input (invokes, the Talk target).
    var jobs: [@Sendable () async -> Void] = []
    /// The one timer: a wake-up into the inbox at `armedMs`, the earliest deadline.
    var timer: (any DispatchSourceTimer)?
    var armedMs: Int64?
    /// The loop when `start()` began it (callers without a task group); `run()` needs none.
    var runner: Task<Void, Never>?
    var hello: HelloOk?
    var connectedAtMs: Int64?
    var status: SessionStatus
    var connectedWaiters: [CheckedContinuation<Void, Never>] = []
    var lastSeq: Int64?
    /// The operator's default Talk target for this connection; nil until resolved.
    var talkResolution: TalkTargetResolution?
    var targetPending = false
    /// A retried rejection to name in the waiting status that follows (OPERATOR_ACCESS_DENIED).
    var notice: ConnectionProblem?

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

    var nowMs: Int64 {
        let d = clock.now - epoch
        return d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000
    }

    var component: String { "gateway[\(endpoint.name)/\(role.rawValue)]" }

    // MARK: lifecycle

    /// What the loop takes, one at a time.
    enum Input: Sendable {
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

    func begin() -> AsyncStream<Input>? {
        guard inbox == nil else { return nil }
        let (stream, continuation) = AsyncStream.makeStream(of: Input.self)
        inbox = continuation
        setStatus(.connecting, "connecting to \(endpoint.url)")
        perform(machine.handle(.start, nowMs: nowMs))
        rearm()
        return stream
    }

    func end() {
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
    func loop(_ stream: AsyncStream<Input>) async {
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
    func rearm() {
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

    var settled: Bool {
        switch status.state { case .connected, .paused, .stopped: return true; default: return false }
    }

    func waitForSettle() async {
        if settled { return }
        await withCheckedContinuation { connectedWaiters.append($0) }
    }

    func releaseWaiters() {
        for w in connectedWaiters { w.resume() }
        connectedWaiters.removeAll()
    }

    func wake(dueMs due: Int64) {
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
    func send(_ frame: GatewayFrame, generation gen: Int) {
        guard gen == generation, let socket, let text = try? frame.encodedString() else { return }
        socket.send(.text(text))
    }

    /// Sends a `node.event` (node role only).
    public func sendNodeEvent(_ event: String, payload: JSONValue) async throws -> JSONValue {
        try await request(GatewayMethod.nodeEvent, params: try JSONValue(encoding: NodeEventParams(event: event, payload: payload)))
    }
}

/// A session runs as a service: `run()` until cancelled.
extension GatewaySession: Service {}
