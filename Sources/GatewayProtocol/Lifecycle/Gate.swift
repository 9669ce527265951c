// Gate: a wait that only `open()` ends, never cancellation or a clock. The tests use it to stand
// in for work that ignores cancellation (a service, an invoke handler) and ends when the test
// says; package access keeps it out of the public API. It lives beside Locked, which it uses.

package final class Gate: Sendable {
    private let state = Locked<(open: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    package init() {}

    /// Returns once the gate is open (at once if it already is); cancellation does not end it.
    package func wait() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { s -> Bool in
                if s.open { return true }
                s.waiter = c
                return false
            }
            if resumeNow { c.resume() }
        }
    }

    package func open() {
        state.withLock { s in s.open = true; let w = s.waiter; s.waiter = nil; return w }?.resume()
    }
}
