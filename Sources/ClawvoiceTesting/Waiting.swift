// Named conditions with a deadline, never bare sleeps: the tests' and rigs' one polling wait,
// and the one-line failure a test helper throws.

/// Polls `condition` every `every` until it holds or `timeout` passes; whether it held.
public func eventually(_ timeout: Duration, every: Duration = .milliseconds(50),
                       _ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while true {
        if try await condition() { return true }
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: every)
    }
}

/// A test helper's failure, as one line.
public struct TestFailure: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
