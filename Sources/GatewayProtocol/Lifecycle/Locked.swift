// Locked: a shared, lock-protected value for state that escaping closures and several owners
// reach by reference. The standard library's `Synchronization.Mutex` is ~Copyable, so it can
// be a stored property but cannot be captured by an escaping closure; this class holds one.
// It is `Sendable` only because its value is (the checker stays on): a type that owns its
// state stores a `Mutex` directly instead. (It lives here until the core module exists:
// GatewayProtocol is the lowest module every user of it already depends on.)

import Synchronization

public final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>

    public init(_ value: Value) { mutex = Mutex(value) }

    /// Runs `body` with the value held; keep it short and never suspend or block inside.
    public func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        try mutex.withLock { value in try body(&value) }
    }

    /// A copy of the value now.
    public var value: Value { mutex.withLock { $0 } }
}
