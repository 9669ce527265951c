// Carries out OutboxMachine's decisions for one gateway: writes turns to the durable outbox,
// sends the oldest with chat.send (the same idempotency key on every try), deletes it once
// chat.history shows it, backs off, holds, expires, and gives a cancelled talk turn back
// unsent when it can (`withdraw`). It owns no state worth keeping: the rows in SQLite are the
// queue, and other processes (`clawvoice send`, `outbox retry|drop`) change them too, so the
// loop re-reads them on every pass. It sleeps until something can have changed: a write to the
// database by any process (`DatabaseWriteWatch`), a nudge, or the machine's next deadline (a
// retry's backoff, a history check, an expiry). Only while turns wait for the operator session
// does it look again every `recheckMs`; an idle daemon's sender never wakes (issue 25).

public import ClawvoiceCore
public import Foundation
public import GatewayClient
public import GatewayProtocol
public import Store

/// Time for the outbox: wall-clock milliseconds (expiry must survive restarts and sleep) and
/// a way to wait. Tests pass a manual clock.
public struct OutboxClock: Sendable {
    public var nowMs: @Sendable () -> Int64
    public var sleep: @Sendable (_ milliseconds: Int64) async -> Void

    public init(nowMs: @escaping @Sendable () -> Int64, sleep: @escaping @Sendable (_ milliseconds: Int64) async -> Void) {
        self.nowMs = nowMs
        self.sleep = sleep
    }

    public static let system = OutboxClock(
        nowMs: { Int64((Date().timeIntervalSince1970 * 1000).rounded()) },
        sleep: { ms in try? await Task.sleep(for: .milliseconds(max(ms, 0))) })
}

/// Something that happened to a queued turn, for whoever waits on replies (TalkController) or counts (the bench).
public enum OutboxEvent: Sendable, Equatable {
    /// chat.send acknowledged the turn; replies arrive as `chat` events for `runId`.
    case sent(OutboxItem, runId: String)
    /// chat.history shows it; it has left the queue.
    case confirmed(OutboxItem)
    /// It waited longer than the expiry and was deleted unsent (or unconfirmed).
    case expired(OutboxItem)
    /// It waits for `clawvoice outbox retry N`.
    case held(OutboxItem, reason: String)
}

/// The durable outbox for one gateway. See the file comment.
public actor OutboxSender {
    public nonisolated let gateway: String
    /// Its SQLite calls can wait seconds on another process's write lock: off the cooperative pool.
    private nonisolated let executor = BlockingExecutor(label: "clawvoice.outbox")
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    let store: ClawStore
    let channel: any OperatorChannel
    let log: LogSink
    let machine: OutboxMachine
    let clock: OutboxClock
    private let random: @Sendable () -> Double
    private var observers: [@Sendable (OutboxEvent) -> Void] = []

    private enum State {
        case idle
        /// The loop runs in `run()`'s task (nil) or in the task `start()` made.
        case running(Task<Void, Never>?)
        case stopped
    }
    private var state: State = .idle
    /// Wakes the loop's wait; a wake while the loop is busy makes the next wait return at once.
    private let wakes = WakeLatch()
    /// The turn whose chat.send is on the wire, if any.
    public private(set) var inFlight: Int64?
    private var lastReadError: String?
    /// Talk turns taken back before they were written (`enqueueTurn` refuses them), and the last
    /// ones written (a withdrawal of one that is gone again was sent, not cancelled).
    private var withdrawnEarly: [String] = []
    private var writtenTurns: [String] = []

    public var policy: OutboxPolicy { machine.policy }

    /// - Parameters:
    ///   - gateway: the gateway record's name; the queue is this gateway's rows.
    ///   - channel: the operator session; chat.send and chat.history go over it.
    ///   - clock: wall-clock ms and sleep; tests inject a manual one.
    ///   - random: a unit random for the backoff jitter.
    ///   - onSent, onConfirmed, onExpired: called from the sender's loop; keep them short.
    public init(store: ClawStore, gateway: String, channel: any OperatorChannel, log: LogSink,
                policy: OutboxPolicy = OutboxPolicy(), clock: OutboxClock = .system,
                random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
                onSent: @escaping @Sendable (OutboxItem, String) -> Void = { _, _ in },
                onConfirmed: @escaping @Sendable (OutboxItem) -> Void = { _ in },
                onExpired: @escaping @Sendable (OutboxItem) -> Void = { _ in }) {
        self.store = store
        self.gateway = gateway
        self.channel = channel
        self.log = log
        self.machine = OutboxMachine(policy: policy)
        self.clock = clock
        self.random = random
        self.observers = [{ event in
            switch event {
            case .sent(let item, let runId): onSent(item, runId)
            case .confirmed(let item): onConfirmed(item)
            case .expired(let item): onExpired(item)
            case .held: break
            }
        }]
    }

    /// Adds a listener for every later event.
    public func observe(_ body: @escaping @Sendable (OutboxEvent) -> Void) {
        observers.append(body)
    }

    // MARK: the queue

    /// Writes the turn at the end of the queue and returns once the row is committed: a turn
    /// answered `queued` survives a crash. Throws `.outboxFull` past the limit (the message says
    /// how to make room), or any store failure (answer `not_queued`, keep the transcript).
    @discardableResult
    public func enqueue(sessionKey: String, message: String, attachmentsJSON: String? = nil, thinking: String? = nil,
                        idempotencyKey: String = UUID().uuidString.lowercased()) throws(StoreError) -> OutboxItem {
        let item = try store.enqueueOutbox(gateway: gateway, sessionKey: sessionKey, message: message,
                                           attachmentsJSON: attachmentsJSON, thinking: thinking,
                                           idempotencyKey: idempotencyKey, nowMs: clock.nowMs(), limit: machine.policy.limit)
        log.log(.info, "outbox", "queued turn \(item.seq) (\"\(item.preview)\") for \(gateway)")
        wake()
        return item
    }

    /// A talk turn: as `enqueue`, unless `withdraw` took it back before it was written (nil).
    public func enqueueTurn(sessionKey: String, message: String, attachmentsJSON: String? = nil, thinking: String? = nil,
                            idempotencyKey: String) throws(StoreError) -> OutboxItem? {
        if let i = withdrawnEarly.firstIndex(of: idempotencyKey) {
            withdrawnEarly.remove(at: i)
            log.log(.info, "outbox", "turn \(idempotencyKey) not queued: it was cancelled first")
            return nil
        }
        let item = try enqueue(sessionKey: sessionKey, message: message, attachmentsJSON: attachmentsJSON,
                               thinking: thinking, idempotencyKey: idempotencyKey)
        writtenTurns = Array((writtenTurns + [idempotencyKey]).suffix(16))
        return item
    }

    /// Takes a talk turn back unless it is on its way. True when it will not be sent: it was
    /// waiting (deleted now) or not written yet (`enqueueTurn` will refuse it). False when
    /// chat.send has it on the wire or acknowledged it, or when that cannot be told. Every
    /// step here is synchronous on the actor, and `send` looks at the row again just before
    /// it goes out, so a turn is either withdrawn or sent, never both.
    public func withdraw(idempotencyKey key: String) -> Bool {
        let item: OutboxItem?
        do { item = try store.outbox(gateway: gateway).first { $0.idempotencyKey == key } } catch {
            log.log(.error, "outbox", "cannot look for turn \(key) to withdraw it: \(error)")
            return false
        }
        guard let item else {
            if writtenTurns.contains(key) { return false }  // written and gone: sent and confirmed
            withdrawnEarly = Array((withdrawnEarly + [key]).suffix(16))
            return true
        }
        guard item.state != .sent, inFlight != item.seq else { return false }
        do {
            _ = try store.deleteOutbox(seq: item.seq)
        } catch {
            log.log(.error, "outbox", "cannot withdraw turn \(item.seq): \(error)")
            return false
        }
        log.log(.info, "outbox", "turn \(item.seq) (\"\(item.preview)\") withdrawn unsent: its capture was cancelled")
        return true
    }

    /// The queued turns, oldest first (empty if the database cannot be read).
    public func snapshot() -> [OutboxItem] {
        (try? store.outbox(gateway: gateway)) ?? []
    }

    /// Sends a held (or waiting) turn again now, with a fresh count of attempts.
    public func retry(seq: Int64) throws(StoreError) {
        guard let item = try store.outboxItem(seq: seq), item.gateway == gateway, try store.markOutboxPending(seq: seq) else {
            throw .unknownOutboxItem(seq: seq, gateway: gateway)
        }
        log.log(.info, "outbox", "turn \(seq) (\"\(item.preview)\") will be sent again")
        wake()
    }

    /// Removes a turn unsent.
    public func drop(seq: Int64) throws(StoreError) {
        guard let item = try store.outboxItem(seq: seq), item.gateway == gateway, try store.deleteOutbox(seq: seq) else {
            throw .unknownOutboxItem(seq: seq, gateway: gateway)
        }
        log.log(.info, "outbox", "turn \(seq) (\"\(item.preview)\") dropped")
        wake()
    }

    // MARK: lifecycle

    /// Runs the send loop in the caller's task until it is cancelled or `stop()`ped: the
    /// `Service` shape, a child of the daemon's gateway scope (once; a stopped sender stays stopped).
    public func run() async {
        guard case .idle = state else { return }
        state = .running(nil)
        await loop()
        state = .stopped
    }

    /// Starts the send loop in a task of its own, for the tests and the bench that drive a
    /// sender by hand (the daemon runs `run()` as a child instead).
    public func start() {
        guard case .idle = state else { return }
        // Unstructured on purpose: the caller keeps no task group; `stop()` ends and awaits it.
        state = .running(Task { await self.loop() })
    }

    /// Ends the loop. A chat.send on the wire is not waited for beyond a second: its turn is
    /// still in the database and goes again, with the same key, on the next start.
    public func stop() async {
        guard case .running(let started) = state, let task = started else {
            state = .stopped
            wake()
            return
        }
        state = .stopped
        task.cancel()
        wake()
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await task.value }
            group.addTask { try? await Task.sleep(for: .seconds(1)) }
            await group.next()
            group.cancelAll()
        }
    }

    /// Look at the queue now (the operator session connected, or something else changed).
    public func nudge() {
        wake()
    }

    private var isRunning: Bool {
        if case .running = state { return true }
        return false
    }

    // MARK: the loop

    private enum Next {
        case again
        /// Until `untilMs` (nil: until woken); `recheck`: look again after `recheckMs` anyway
        /// (turns wait for the operator session, or the store failed).
        case wait(untilMs: Int64?, recheck: Bool = false)
    }

    private func loop() async {
        // Writes by any process wake the loop; without inotify it re-reads every `recheckMs`.
        let writes = DatabaseWriteWatch(store: store) { [wakes] in wakes.signal() }
        defer { writes?.cancel() }
        if writes == nil { log.log(.warning, "outbox", "cannot watch the database for writes; looking at the queue every \(machine.policy.recheckMs) ms") }
        // A commit under way while the watch started may have written before it: let it finish
        // before the first look, so the look sees it.
        store.waitForOtherWriters()
        while isRunning && !Task.isCancelled {
            let next = await pass()
            guard isRunning else { return }
            guard case .wait(let until, let recheck) = next else { continue }
            let policy = machine.policy
            let now = clock.nowMs()
            let limits = [until.map { max($0 - now, 0) }, policy.pollIntervalMs,
                          recheck || writes == nil ? policy.recheckMs : nil].compactMap { $0 }
            let ms = limits.min()
            if ms.map({ $0 > 0 }) ?? true { await waitForWake(ms: ms) }
        }
    }

    /// One look at the queue: does what the machine says, returns whether to look again at once.
    private func pass() async -> Next {
        let items: [OutboxItem]
        do {
            items = try store.outbox(gateway: gateway)
            lastReadError = nil
        } catch {
            // Say it once per distinct failure, not twice a second.
            if lastReadError != error.description {
                log.log(.error, "outbox", "cannot read the outbox: \(error)")
                lastReadError = error.description
            }
            return .wait(untilMs: nil, recheck: true)
        }
        let connected = await channel.connected()
        // The queue may have changed while we asked; acting on the older read is still safe:
        // every write below names one row and does nothing if that row is gone.
        guard isRunning else { return .wait(untilMs: nil) }
        var progressed = true
        for action in machine.next(items: items, nowMs: clock.nowMs(), connected: connected) {
            guard isRunning else { return .wait(untilMs: nil) }
            switch action {
            case .expire:
                progressed = expire() && progressed
            case .confirm(let sent):
                progressed = await confirm(sent) && progressed
            case .send(let item):
                progressed = await send(item) && progressed
            case .hold(let item, let reason):
                progressed = apply(.hold(reason: reason), to: item, error: reason, countsAsAttempt: false) && progressed
            case .sleep(let until):
                // Nothing tells the sender that the operator session came back but its own look.
                return .wait(untilMs: until, recheck: !connected && items.contains { $0.state != .held })
            }
        }
        // A store write failed: do not spin on it.
        return progressed ? .again : .wait(untilMs: nil, recheck: true)
    }

    private func send(_ item: OutboxItem) async -> Bool {
        let attachments: [JSONValue]?
        if let json = item.attachmentsJSON {
            guard let decoded = try? JSONCoding.decode([JSONValue].self, from: Data(json.utf8)) else {
                return apply(.hold(reason: "its stored attachments are not a JSON array"), to: item, error: nil)
            }
            attachments = decoded
        } else {
            attachments = nil
        }
        let params = ChatSendParams(sessionKey: item.sessionKey, message: item.message, idempotencyKey: item.idempotencyKey,
                                    thinking: item.thinking, attachments: attachments)
        // The queue was read before an await: a turn withdrawn or dropped since then stays unsent.
        // No await between this look and `inFlight` (see withdraw).
        do { guard try store.outboxItem(seq: item.seq) != nil else { return true } } catch {
            log.log(.error, "outbox", "cannot read turn \(item.seq) before sending it: \(error)")
            return false
        }
        inFlight = item.seq
        defer { inFlight = nil }
        let ack: JSONValue
        do {
            ack = try await channel.request(GatewayMethod.chatSend, params: try JSONValue(encoding: params),
                                            timeoutMs: machine.policy.requestTimeoutMs)
        } catch {
            let failure = OutboxFailure.classify(error)
            let outcome = machine.sendFailed(item, failure, nowMs: clock.nowMs(), unit: random())
            return apply(outcome, to: item, error: failure.message)
        }
        // Recorded even if stop() ran meanwhile: the gateway has the turn, and saying so saves a resend.
        let runId = ack["runId"]?.stringValue ?? item.idempotencyKey
        do {
            guard try store.markOutboxSent(seq: item.seq, runId: runId, nowMs: clock.nowMs()) else { return true }
        } catch {
            log.log(.error, "outbox", "turn \(item.seq) was sent but cannot be marked so: \(error)")
            return false
        }
        log.log(.debug, "outbox", "turn \(item.seq) acknowledged (run \(runId)), attempt \(item.attempts + 1)")
        emit(.sent(item, runId: runId))
        return true
    }

    /// Writes an outcome back to the row. False if the write failed.
    @discardableResult
    func apply(_ outcome: OutboxMachine.Outcome, to item: OutboxItem, error: String?,
                       countsAsAttempt: Bool = true) -> Bool {
        do {
            switch outcome {
            case .retry(let at, let counts):
                guard try store.markOutboxAttempt(seq: item.seq, error: error ?? "", nextAttemptAtMs: at, hold: false,
                                                  countAttempt: counts) else { return true }
                let wait = Self.duration(max(at - clock.nowMs(), 0))
                if counts {
                    log.log(.info, "outbox", "turn \(item.seq): \(error ?? "failed"); "
                            + "try \(item.attempts + 2) of \(machine.policy.maxAttempts) in \(wait)")
                } else {
                    log.log(.debug, "outbox", "turn \(item.seq): \(error ?? "failed"); waiting for the gateway")
                }
            case .hold(let reason):
                guard try store.markOutboxAttempt(seq: item.seq, error: reason, nextAttemptAtMs: 0, hold: true,
                                                  countAttempt: countsAsAttempt) else { return true }
                log.log(.warning, "outbox", "turn \(item.seq) (\"\(item.preview)\") is held: \(reason); "
                        + "`clawvoice outbox retry \(item.seq)` sends it again, `clawvoice outbox drop \(item.seq)` discards it")
                emit(.held(item, reason: reason))
            case .recheck(let at):
                try store.deferOutbox(seq: item.seq, untilMs: at)
            }
            return true
        } catch {
            log.log(.error, "outbox", "cannot update turn \(item.seq): \(error)")
            return false
        }
    }

    func emit(_ event: OutboxEvent) {
        for o in observers { o(event) }
    }

    /// "48 h", "90 s", "1.5 s", "250 ms".
    static func duration(_ ms: Int64) -> String {
        if ms >= 3_600_000 && ms % 3_600_000 == 0 { return "\(ms / 3_600_000) h" }
        if ms >= 60_000 && ms % 60_000 == 0 { return "\(ms / 60_000) min" }
        if ms >= 1_000 { return ms % 1_000 == 0 ? "\(ms / 1_000) s" : String(format: "%.1f s", Double(ms) / 1000) }
        return "\(ms) ms"
    }

    // MARK: waking

    /// Until `ms` pass (nil: no limit), a wake, or cancellation: two children, so nothing
    /// outlives the wait.
    private func waitForWake(ms: Int64?) async {
        if wakes.takePending() { return }
        let (clock, wakes) = (self.clock, self.wakes)
        guard let ms else { return await wakes.wait() }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await clock.sleep(ms) }
            group.addTask { await wakes.wait() }
            await group.next()
            group.cancelAll()
        }
    }

    private func wake() {
        wakes.signal()
    }
}

/// The sender runs as a service: a child of the daemon's gateway scope.
extension OutboxSender: Service {}
