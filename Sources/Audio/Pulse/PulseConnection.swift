// PulseConnection: owns the libpulse threaded main loop and its one context: connecting, noticing
// when the sound server dies or restarts (PipeWire's pulse server included), and reconnecting with
// backoff without the owner doing anything. Streams (PulseCapture, PulsePlayback) and the device
// lists ride on it; it never creates streams itself.
//
// Locking: every pa_* call and every mutable field is guarded by the main loop's own lock. The
// fields live in a core object (`ConnectionCore` here, `CaptureCore`, `PlaybackSession`) that only
// `MainloopLocked.withLock` hands out, with the lock held; callbacks from libpulse already run with
// it held, on the main loop thread. So the public classes are plainly Sendable, and the one
// unchecked claim is MainloopLocked's. User-facing callbacks (`onStateChange`) run on a private
// serial queue so a slow observer never stalls audio.

internal import CPulse
import Foundation

/// What a `PulseConnection` is doing.
public enum PulseConnectionState: Sendable, Equatable, CustomStringConvertible {
    /// An attempt to reach the server is in flight.
    case connecting
    /// The context is ready: streams and device queries work.
    case ready
    /// The latest attempt failed (one line: the pa_ call and pa_strerror); the next follows the backoff.
    case failed(String)
    /// An established connection was lost (the server died or restarted), or `close()` was called.
    case disconnected

    public var description: String {
        switch self {
        case .connecting: return "connecting"
        case .ready: return "ready"
        case .failed(let reason): return "failed: \(reason)"
        case .disconnected: return "disconnected"
        }
    }
}

/// Reconnect delays: `initialSeconds` doubling to `maximumSeconds`; reset when a connection is ready.
public struct PulseBackoff: Sendable, Equatable {
    public var initialSeconds: Double
    public var maximumSeconds: Double
    /// Failed attempts since the last ready connection.
    public private(set) var attempts = 0

    public init(initialSeconds: Double = 0.5, maximumSeconds: Double = 10) {
        self.initialSeconds = initialSeconds
        self.maximumSeconds = maximumSeconds
    }

    /// The delay before the next attempt, in seconds; each call doubles the following one.
    public mutating func nextDelaySeconds() -> Double {
        // The exponent is capped so a very long outage cannot overflow to infinity.
        let delay = min(maximumSeconds, initialSeconds * pow(2, Double(min(attempts, 30))))
        attempts += 1
        return delay
    }

    public mutating func reset() { attempts = 0 }
}

/// A connection to a PulseAudio server on its own threaded main loop.
///
/// Create one per process; it starts connecting at once and keeps itself connected until
/// `close()`. `generation` increases each time a new context becomes ready, which is how streams
/// know to re-create themselves after a server restart.
public final class PulseConnection: Sendable {
    /// The server address given at init (`unix:/path`, `tcp:host`), or nil for `PULSE_SERVER` / the default.
    public let server: String?
    public let clientName: String
    /// The main loop and the connection's state behind its lock.
    let locked: MainloopLocked<ConnectionCore>

    /// Starts the main loop thread and the first connection attempt.
    /// - Parameters:
    ///   - server: a PulseAudio server string; nil lets libpulse use `PULSE_SERVER` or its default.
    ///   - backoff: reconnect delays (default 0.5 s doubling to 10 s).
    public init(server: String? = nil, clientName: String = "clawvoice", backoff: PulseBackoff = PulseBackoff()) {
        self.server = server
        self.clientName = clientName
        // Allocation failure here means the process is out of memory; nothing sensible remains.
        guard let loop = pa_threaded_mainloop_new() else { fatalError("pa_threaded_mainloop_new failed") }
        pa_threaded_mainloop_set_name(loop, "clawvoice-pulse")
        locked = MainloopLocked(mainloop: loop, core: ConnectionCore(mainloop: loop, server: server, clientName: clientName, backoff: backoff))
        locked.withLock { core in
            core.owner = self
            core.attemptConnect()
        }
        if pa_threaded_mainloop_start(loop) < 0 {
            locked.withLock { core in
                core.releaseContext()
                core.setState(.failed("pa_threaded_mainloop_start: could not start the PulseAudio thread"))
            }
        }
    }

    deinit {
        let locked = self.locked
        let onLoopThread = pa_threaded_mainloop_in_thread(locked.mainloop) != 0
        locked.withLock { core in
            core.closed = true
            core.releaseContext()
        }
        if onLoopThread {
            // The last reference died inside a libpulse callback; the thread cannot join itself.
            DispatchQueue.global().async { pa_threaded_mainloop_free(locked.mainloop) }
        } else {
            pa_threaded_mainloop_free(locked.mainloop)
        }
    }

    // MARK: - Observing

    /// The current state.
    public var state: PulseConnectionState { locked.withLock { $0.currentState } }

    /// Increases by one each time a context becomes ready; streams from an older generation are dead.
    public var generation: Int { locked.withLock { $0.currentGeneration } }

    /// Called on a private serial queue, in order, for every state change.
    public var onStateChange: (@Sendable (PulseConnectionState) -> Void)? {
        get { locked.withLock { $0.stateHandler } }
        set { locked.withLock { $0.stateHandler = newValue } }
    }

    /// Waits until the connection is ready, or throws `PulseError.notConnected` after `timeout`.
    public func waitUntilReady(timeout: Duration = .seconds(5)) async throws {
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            locked.withLock { core in
                if core.currentState == .ready { continuation.resume(); return }
                if core.closed { continuation.resume(throwing: PulseError.closed); return }
                core.nextWaiterID += 1
                let id = core.nextWaiterID
                core.readyWaiters[id] = continuation
                DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [weak self] in
                    self?.locked.withLock { core in
                        guard let waiter = core.readyWaiters.removeValue(forKey: id) else { return }
                        waiter.resume(throwing: PulseError.notConnected(state: core.currentState.description))
                    }
                }
            }
        }
    }

    /// Stops reconnecting and drops the context. Streams on this connection see `.disconnected`.
    public func close() {
        let onLoopThread = pa_threaded_mainloop_in_thread(locked.mainloop) != 0
        let wasOpen = locked.withLock { core -> Bool in
            guard !core.closed else { return false }
            core.closed = true
            core.retryToken += 1
            // Observers hear about it first, so streams are torn down before their context.
            core.setState(.disconnected)
            core.failPendingQueries(.closed)
            for waiter in core.readyWaiters.values { waiter.resume(throwing: PulseError.closed) }
            core.readyWaiters.removeAll()
            core.releaseContext()
            return true
        }
        if wasOpen && !onLoopThread { pa_threaded_mainloop_stop(locked.mainloop) }
    }

    // MARK: - For streams

    /// Runs `body` with the main loop lock held; safe to call from libpulse callbacks.
    @discardableResult
    func withLock<T>(_ body: () throws -> T) rethrows -> T { try locked.withLock { _ in try body() } }

    /// Registers `observer`, called with the lock held on every state change with the generation.
    func addObserver(_ observer: @escaping (PulseConnectionState, Int) -> Void) -> Int {
        locked.withLock { core in
            core.nextObserverID += 1
            core.observers[core.nextObserverID] = observer
            return core.nextObserverID
        }
    }

    func removeObserver(_ id: Int) {
        locked.withLock { _ = $0.observers.removeValue(forKey: id) }
    }

    /// The ready context and its generation, or nil. Lock held.
    var readyContext: (context: OpaquePointer, generation: Int)? { locked.withLock { $0.readyContext } }
    var isReadyLocked: Bool { locked.withLock { $0.currentState == .ready && $0.context != nil } }
    var stateLocked: PulseConnectionState { locked.withLock { $0.currentState } }
    /// `pa_strerror` of the context's last error. Lock held.
    func lastError() -> String { locked.withLock { $0.lastError() } }
    /// The context's last error code (a `PA_ERR_*`). Lock held.
    func lastErrorCode() -> Int32 { locked.withLock { $0.lastErrorCode() } }
    func register(_ query: any PulsePendingQuery) { locked.withLock { $0.pendingQueries[ObjectIdentifier(query)] = query } }
    func unregister(_ query: any PulsePendingQuery) { locked.withLock { _ = $0.pendingQueries.removeValue(forKey: ObjectIdentifier(query)) } }
}

/// The state a `MainloopLocked` box guards; libpulse callbacks reach it with the lock held.
// @unchecked: the lock is libpulse's threaded main loop lock, which the checker cannot see; only
// `withLock` (lock held) and libpulse's own callbacks (loop thread, lock held) ever touch `core`.
final class MainloopLocked<Core: AnyObject>: @unchecked Sendable {
    let mainloop: OpaquePointer
    private let core: Core

    init(mainloop: OpaquePointer, core: Core) {
        self.mainloop = mainloop
        self.core = core
    }

    /// Runs `body` with the main loop lock held (it is recursive; on the loop thread it is held already).
    func withLock<R>(_ body: (Core) throws -> R) rethrows -> R {
        if pa_threaded_mainloop_in_thread(mainloop) != 0 { return try body(core) }
        pa_threaded_mainloop_lock(mainloop)
        defer { pa_threaded_mainloop_unlock(mainloop) }
        return try body(core)
    }
}

/// PulseConnection's state; every member runs with the main loop lock held.
final class ConnectionCore {
    let server: String?
    let clientName: String
    let mainloop: OpaquePointer
    /// For retries scheduled on a dispatch queue (weak: the connection may be gone by then).
    weak var owner: PulseConnection?
    private(set) var context: OpaquePointer?
    var currentState: PulseConnectionState = .connecting
    var currentGeneration = 0
    private var contextWasReady = false
    private var backoff: PulseBackoff
    var closed = false
    var retryToken = 0
    var observers: [Int: (PulseConnectionState, Int) -> Void] = [:]
    var nextObserverID = 0
    var readyWaiters: [Int: CheckedContinuation<Void, any Error>] = [:]
    var nextWaiterID = 0
    var pendingQueries: [ObjectIdentifier: any PulsePendingQuery] = [:]
    var stateHandler: (@Sendable (PulseConnectionState) -> Void)?
    private let events = DispatchQueue(label: "clawvoice.pulse.events")

    init(mainloop: OpaquePointer, server: String?, clientName: String, backoff: PulseBackoff) {
        self.mainloop = mainloop
        self.server = server
        self.clientName = clientName
        self.backoff = backoff
    }

    /// The ready context and its generation, or nil. Lock held.
    var readyContext: (context: OpaquePointer, generation: Int)? {
        guard currentState == .ready, let context else { return nil }
        return (context, currentGeneration)
    }

    /// `pa_strerror` of the context's last error. Lock held.
    func lastError() -> String {
        guard let context else { return "no context" }
        return String(cString: pa_strerror(pa_context_errno(context)))
    }

    /// The context's last error code (a `PA_ERR_*`). Lock held.
    func lastErrorCode() -> Int32 {
        guard let context else { return 0 }
        return pa_context_errno(context)
    }

    // MARK: - Connecting

    func attemptConnect() {
        guard !closed else { return }
        releaseContext()
        let api = pa_threaded_mainloop_get_api(mainloop)
        guard let ctx = pa_context_new(api, clientName) else {
            setState(.failed("pa_context_new: out of memory"))
            scheduleRetry()
            return
        }
        context = ctx
        contextWasReady = false
        pa_context_set_state_callback(ctx, { ctx, userdata in
            guard let ctx, let userdata else { return }
            Unmanaged<ConnectionCore>.fromOpaque(userdata).takeUnretainedValue().contextStateChanged(ctx)
        }, Unmanaged.passUnretained(self).toOpaque())
        setState(.connecting)
        // NOAUTOSPAWN: a daemon must not start a sound server of its own; it waits for the real one.
        let result: Int32
        if let server {
            result = server.withCString { pa_context_connect(ctx, $0, PA_CONTEXT_NOAUTOSPAWN, nil) }
        } else {
            result = pa_context_connect(ctx, nil, PA_CONTEXT_NOAUTOSPAWN, nil)
        }
        if result < 0 {
            let reason = "pa_context_connect: \(lastError())"
            releaseContext()
            setState(.failed(reason))
            scheduleRetry()
        }
    }

    private func contextStateChanged(_ ctx: OpaquePointer) {
        // A late callback from a context we already dropped must not touch its replacement.
        guard ctx == context else { return }
        let paState = pa_context_get_state(ctx)
        if paState == PA_CONTEXT_READY {
            contextWasReady = true
            backoff.reset()
            currentGeneration += 1
            setState(.ready)
        } else if paState == PA_CONTEXT_FAILED {
            let reason = lastError()
            let wasReady = contextWasReady
            releaseContext()
            failPendingQueries(wasReady ? .connectionLost : .notConnected(state: reason))
            setState(wasReady ? .disconnected : .failed("pa_context_connect: \(reason)"))
            scheduleRetry()
        }
        // TERMINATED only follows our own pa_context_disconnect, after the callback was cleared.
    }

    private func scheduleRetry() {
        guard !closed else { return }
        retryToken += 1
        let token = retryToken
        let delay = backoff.nextDelaySeconds()
        DispatchQueue.global().asyncAfter(deadline: .now() + delay) { [weak owner] in
            owner?.locked.withLock { core in
                // A newer retry or close() supersedes this one.
                guard !core.closed, core.retryToken == token, core.context == nil else { return }
                core.attemptConnect()
            }
        }
    }

    func releaseContext() {
        guard let ctx = context else { return }
        context = nil
        pa_context_set_state_callback(ctx, nil, nil)
        // A no-op for a context that already failed; for a live one it ends its streams.
        pa_context_disconnect(ctx)
        pa_context_unref(ctx)
    }

    func setState(_ newState: PulseConnectionState) {
        guard newState != currentState else { return }
        currentState = newState
        let generation = currentGeneration
        for (_, observer) in observers.sorted(by: { $0.key < $1.key }) { observer(newState, generation) }
        if newState == .ready {
            for waiter in readyWaiters.values { waiter.resume() }
            readyWaiters.removeAll()
        }
        if let handler = stateHandler { events.async { handler(newState) } }
    }

    // MARK: - Queries

    func failPendingQueries(_ error: PulseError) {
        let queries = pendingQueries.values
        pendingQueries.removeAll()
        // libpulse cancels a dead context's operations without calling back, so answer them here.
        for query in queries { query.abandon(error) }
    }
}
