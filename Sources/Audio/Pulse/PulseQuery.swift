// Introspection queries on the connection (the device lists and the server's defaults): one
// pa_context_get_* call whose callbacks collect values and resume its caller once, abandoned
// with an error when the context dies before they come.

internal import CPulse
import Foundation

/// A query in flight whose callback may never come (the context died): the connection abandons it.
protocol PulsePendingQuery: AnyObject {
    func abandon(_ error: PulseError)
}

/// One introspection query: collects values from libpulse callbacks and resumes its caller once.
final class PulseQuery<Value: Sendable>: PulsePendingQuery {
    let connection: PulseConnection
    var value: Value
    var operation: OpaquePointer?
    private var continuation: CheckedContinuation<Value, any Error>?

    init(connection: PulseConnection, initial: Value, continuation: CheckedContinuation<Value, any Error>) {
        self.connection = connection
        self.value = initial
        self.continuation = continuation
    }

    /// Lock held. Ends the query with its collected value or an error.
    func finish(_ error: PulseError? = nil) {
        connection.unregister(self)
        if let operation { pa_operation_unref(operation) }
        operation = nil
        if let error { continuation?.resume(throwing: error) } else { continuation?.resume(returning: value) }
        continuation = nil
    }

    func abandon(_ error: PulseError) {
        if let operation { pa_operation_cancel(operation); pa_operation_unref(operation) }
        operation = nil
        continuation?.resume(throwing: error)
        continuation = nil
    }

    var userdata: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    static func from(_ userdata: UnsafeMutableRawPointer?) -> PulseQuery<Value>? {
        guard let userdata else { return nil }
        return Unmanaged<PulseQuery<Value>>.fromOpaque(userdata).takeUnretainedValue()
    }
}

extension PulseConnection {
    /// Starts an introspection query on the ready context and waits for it to finish.
    /// `start` issues the pa_context_get_* call with the query's userdata; `call` names it for errors.
    func runQuery<Value: Sendable>(
        _ call: String, initial: Value, timeout: Duration = .seconds(5),
        start: (OpaquePointer, PulseQuery<Value>) -> OpaquePointer?
    ) async throws -> Value {
        try await waitUntilReady(timeout: timeout)
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
            withLock {
                guard let (ctx, _) = readyContext else {
                    continuation.resume(throwing: PulseError.notConnected(state: stateLocked.description))
                    return
                }
                let query = PulseQuery(connection: self, initial: initial, continuation: continuation)
                register(query)
                guard let operation = start(ctx, query) else {
                    query.finish(.call(call, message: lastError()))
                    return
                }
                query.operation = operation
            }
        }
    }
}
