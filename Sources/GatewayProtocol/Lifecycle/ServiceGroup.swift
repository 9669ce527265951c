// Services and the group that runs them (the shape of Hummingbird's ServiceLifecycle, written
// here because external packages are not used): each service is one child of one task group;
// a failing service ends the group; a shutdown (a signal, `triggerGracefulShutdown`, or a
// service that ends the group) cancels every service and waits for them, reporting the ones
// still running when the grace period is over. No task outlives `run()`.

import Foundation
import Synchronization

/// A long-lived part of a process: runs until it is done or its task is cancelled.
public protocol Service: Sendable {
    func run() async throws
}

/// A closure as a service.
public struct ServiceFunction: Service {
    private let body: @Sendable () async throws -> Void
    public init(_ body: @escaping @Sendable () async throws -> Void) { self.body = body }
    public func run() async throws { try await body() }
}

public final class ServiceGroup: Sendable {
    public struct Entry: Sendable {
        public let name: String
        public let service: any Service
        /// Whether its normal return ends the group (a loop the process cannot live without);
        /// otherwise a service that returns is simply done (a one-off probe).
        public let endsGroup: Bool
        public init(_ name: String, endsGroup: Bool = false, _ service: any Service) {
            self.name = name
            self.service = service
            self.endsGroup = endsGroup
        }
        public init(_ name: String, endsGroup: Bool = false, _ body: @escaping @Sendable () async throws -> Void) {
            self.init(name, endsGroup: endsGroup, ServiceFunction(body))
        }
    }

    /// The first service that failed; the others were cancelled.
    public struct ServiceFailed: Error, CustomStringConvertible {
        public let name: String
        public let error: any Error
        public var description: String { "service \(name) failed: \(error)" }
    }

    private enum Event: Sendable { case ended(String, (any Error)?), shutdown(String), overdue }

    private let entries: [Entry]
    private let gracePeriod: Duration
    private let signals: AsyncStream<Int32>?
    private let onSignal: @Sendable (Int32) async -> Bool
    private let onShutdown: @Sendable (String) async -> Void
    private let onOverdue: @Sendable ([String]) -> Void
    private let events: AsyncStream<Event>
    private let sink: AsyncStream<Event>.Continuation

    /// - Parameters:
    ///   - gracePeriod: how long a shutdown waits before `onOverdue` names the services still
    ///     running (the group itself keeps waiting for them: nothing is left behind).
    ///   - signals: delivered signal numbers (`SignalStream`); `onSignal` says whether one shuts
    ///     the group down (true) or was handled (false, e.g. SIGHUP's reload).
    ///   - onShutdown: told why a shutdown began; the services are cancelled once it returns
    ///     (it may still ask them to finish something), and the grace period counts from its start.
    public init(_ entries: [Entry], gracePeriod: Duration = .seconds(2), signals: AsyncStream<Int32>? = nil,
                onSignal: @escaping @Sendable (Int32) async -> Bool = { _ in true },
                onShutdown: @escaping @Sendable (String) async -> Void = { _ in },
                onOverdue: @escaping @Sendable ([String]) -> Void = { _ in }) {
        self.entries = entries
        self.gracePeriod = gracePeriod
        self.signals = signals
        self.onSignal = onSignal
        self.onShutdown = onShutdown
        self.onOverdue = onOverdue
        (events, sink) = AsyncStream.makeStream(of: Event.self)
    }

    /// Begins a graceful shutdown (safe from anywhere, any number of times).
    public func triggerGracefulShutdown(reason: String = "shutdown requested") { sink.yield(.shutdown(reason)) }

    /// Runs every service until the group ends; throws `ServiceFailed` for the first failure.
    /// Call it once. Cancelling the caller's task cancels every service at once (no grace).
    public func run() async throws {
        let (stop, stopSink) = AsyncStream.makeStream(of: Void.self)
        var failure: ServiceFailed?
        await withTaskGroup(of: Void.self) { group in
            // The services, in a group of their own so that stopping them leaves the timer running.
            group.addTask { [entries, sink] in
                await withTaskGroup(of: Void.self) { services in
                    for e in entries {
                        services.addTask {
                            do { try await e.service.run(); sink.yield(.ended(e.name, nil)) } catch { sink.yield(.ended(e.name, error)) }
                        }
                    }
                    for await _ in stop { break }
                    services.cancelAll()
                }
            }
            if let signals {
                group.addTask { [onSignal, sink] in
                    for await n in signals { if await onSignal(n) { sink.yield(.shutdown("signal \(n)")) } }
                }
            }
            var running = Set(entries.map(\.name))
            var stopping = false
            func beginStop(_ why: String) {
                guard !stopping else { return }
                stopping = true
                group.addTask { [onShutdown] in
                    await onShutdown(why)
                    stopSink.yield()
                }
                group.addTask { [gracePeriod, sink] in
                    try? await Task.sleep(for: gracePeriod)
                    if !Task.isCancelled { sink.yield(.overdue) }
                }
            }
            if running.isEmpty { beginStop("no services") }
            for await event in events {
                switch event {
                case .ended(let name, let error):
                    running.remove(name)
                    if let error, !(error is CancellationError), failure == nil, !stopping {
                        failure = ServiceFailed(name: name, error: error)
                        beginStop("\(name) failed: \(error)")
                    } else if entries.first(where: { $0.name == name })?.endsGroup == true {
                        beginStop("\(name) ended")
                    }
                case .shutdown(let why): beginStop(why)
                case .overdue: onOverdue(running.sorted())
                }
                if running.isEmpty { break }
            }
            // Also reached when the caller's task is cancelled: then every child is cancelled too.
            stopSink.finish()
            group.cancelAll()
        }
        if let failure { throw failure }
    }
}

/// Signals as a stream: their default action is off while it lives, so SIGTERM no longer kills
/// the process before the services stop. SIGPIPE is ignored for good (a closed peer is an error).
public final class SignalStream: Sendable {
    public let stream: AsyncStream<Int32>
    private let sources: Mutex<[any DispatchSourceSignal]>

    public init(_ numbers: [Int32]) {
        let (stream, sink) = AsyncStream.makeStream(of: Int32.self)
        self.stream = stream
        signal(SIGPIPE, SIG_IGN)
        var made: [any DispatchSourceSignal] = []
        for n in numbers {
            signal(n, SIG_IGN)
            let s = DispatchSource.makeSignalSource(signal: n, queue: .global())
            s.setEventHandler { sink.yield(n) }
            s.resume()
            made.append(s)
        }
        sources = Mutex(made)
    }

    public func cancel() { sources.withLock { for s in $0 { s.cancel() }; $0 = [] } }

    deinit { cancel() }
}
