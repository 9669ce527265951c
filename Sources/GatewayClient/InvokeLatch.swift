// How one node.invoke ends: the handler's result, or "node invoke timed out" the moment its
// timeoutMs passes (an explicit latch, as OpenClawKit's invokeWithTimeout: the answer never
// waits for a handler that is slow to stop), and why a running handler was cancelled
// (`InvokeSignal`), so a handler can turn its cancellation into an input of its own.

public import ClawvoiceCore
import Synchronization
import GatewayProtocol

/// The reason a running handler was cancelled, readable from inside the handler (and from its
/// cancellation handler) as `InvokeSignal.current`.
public final class InvokeSignal: Sendable {
    @TaskLocal public static var current: InvokeSignal?
    private let state = Mutex<InvokeEnd?>(nil)
    public init() {}

    /// Nil while the gateway still waits.
    public var reason: InvokeEnd? { state.withLock { $0 } }

    /// Records why the invoke ended; the first reason stays.
    public func end(_ reason: InvokeEnd) {
        state.withLock { if $0 == nil { $0 = reason } }
    }
}

enum InvokeLatch {
    /// Runs the handler and hands `answer` exactly one result: the handler's, or the timeout's
    /// when `timeoutMs` (> 0) passes first. The timeout then cancels the handler with the reason
    /// set, and this returns once the handler has stopped; the answer has left already.
    /// Cancelling the calling task (node.invoke.cancel) cancels the handler and answers what it
    /// returns: only the handler knows what it really did.
    static func run(_ request: NodeInvokeRequest, nodeId: String, timeoutMs: Int64, signal: InvokeSignal,
                    handler: @escaping @Sendable () async -> NodeInvokeResult,
                    answer: @escaping @Sendable (NodeInvokeResult) async -> Void) async {
        let answered = Locked(false)
        let claim: @Sendable () -> Bool = { answered.withLock { done in defer { done = true }; return !done } }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                let result = await InvokeSignal.$current.withValue(signal) { await handler() }
                if claim() { await answer(result) }
            }
            if timeoutMs > 0 {
                group.addTask {
                    try? await Task.sleep(for: .milliseconds(min(timeoutMs, Int64(Int32.max))))
                    guard !Task.isCancelled else { return }
                    signal.end(.timedOut)  // before the handler is cancelled: it reads why
                    if claim() {
                        await answer(.failure(id: request.id, nodeId: nodeId,
                                              error: NodeInvokeError(code: .unavailable, message: "node invoke timed out")))
                    }
                }
            }
            await group.next()
            // The handler is told (InvokeSignal says why); the group still waits for it to stop.
            group.cancelAll()
        }
    }
}
