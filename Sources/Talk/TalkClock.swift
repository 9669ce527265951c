// The talk loop's time: milliseconds since the loop's origin, and a sleep until such a time.
// Production runs on the continuous clock; the loop tests drive a manual one, so timers that
// span seconds (the parts wait, a reply's timeout, the follow-up window) pass in microseconds.

/// Now and sleep for the talk loop (TalkMachine takes time as a number: this is where it comes from).
public protocol TalkClock: Sendable {
    /// Milliseconds since the clock's origin.
    func nowMs() -> Int64
    /// Returns once `nowMs()` has reached `ms`; throws when the task is cancelled first.
    func sleep(untilMs ms: Int64) async throws
}

/// The real clock: the continuous clock from the moment it was made.
public struct SystemTalkClock: TalkClock {
    private let origin = ContinuousClock.now
    public init() {}

    public func nowMs() -> Int64 {
        let d = ContinuousClock.now - origin
        return d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000
    }

    public func sleep(untilMs ms: Int64) async throws {
        try await Task.sleep(until: origin + .milliseconds(ms), clock: .continuous)
    }
}
