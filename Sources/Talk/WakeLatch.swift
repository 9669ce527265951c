// WakeLatch: the outbox loop's wake-up, which a cancellation handler can also reach.

import Synchronization

/// A wake-up for one waiter that cancellation also ends (reachable without the actor, so a
/// cancellation handler can resume it). A signal with nobody waiting is kept for the next wait.
final class WakeLatch: Sendable {
    private let state = Mutex<(pending: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    /// Whether a wake is pending (and takes it).
    func takePending() -> Bool { state.withLock { s in defer { s.pending = false }; return s.pending } }

    func wait() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if s.pending || Task.isCancelled { s.pending = false; return true }
                    s.waiter = c
                    return false
                }
                if now { c.resume() }
            }
        } onCancel: {
            state.withLock { s in defer { s.waiter = nil }; return s.waiter }?.resume()
        }
    }

    func signal() {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            guard let w = s.waiter else { s.pending = true; return nil }
            s.waiter = nil
            return w
        }
        waiter?.resume()
    }
}
