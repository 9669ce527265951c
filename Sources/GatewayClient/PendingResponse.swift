// PendingResponse: one request's answer, resolved once by the session and awaited by its sender.

public import GatewayProtocol
import Synchronization

/// A response on its way: resolved once by the session, awaited by whoever sent the request.
/// A waiter whose task is cancelled stops waiting at once (CancellationError); the request itself
/// stays the session's, which still settles it.
public final class PendingResponse: Sendable {
    private typealias Waiter = CheckedContinuation<JSONValue, any Error>
    private let state = Mutex<(result: Result<JSONValue, any Error>?, waiters: [Int: Waiter], next: Int)>((nil, [:], 0))
    public init() {}

    /// Settles the response (only the first call counts) and wakes whoever waits.
    public func resolve(_ result: Result<JSONValue, any Error>) {
        let waiters = state.withLock { s -> [Waiter] in
            guard s.result == nil else { return [] }
            s.result = result
            defer { s.waiters = [:] }
            return Array(s.waiters.values)
        }
        for w in waiters { w.resume(with: result) }
    }

    public func value() async throws -> JSONValue {
        let id = state.withLock { s in defer { s.next += 1 }; return s.next }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: Waiter) in
                let done = state.withLock { s -> Result<JSONValue, any Error>? in
                    if let r = s.result { return r }
                    if Task.isCancelled { return .failure(CancellationError()) }
                    s.waiters[id] = c
                    return nil
                }
                if let done { c.resume(with: done) }
            }
        } onCancel: {
            state.withLock { s in s.waiters.removeValue(forKey: id) }?.resume(throwing: CancellationError())
        }
    }
}
