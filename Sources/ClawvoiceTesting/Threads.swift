// Blocking work off the cooperative pool, for the tests' and the bench's helpers.

import Foundation

/// Runs `body` on a thread of its own and returns its result.
/// On the cooperative pool it would hold one of its few threads (two on a 2-core machine) for
/// as long as it blocks, and the in-process loopback gateway, which the child talks to, needs
/// them: with tests running side by side, that stalls the whole process.
public func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { (c: CheckedContinuation<T, Never>) in
        Thread { c.resume(returning: body()) }.start()
    }
}
