// Reconnect timing as a value: 0.5 s doubling to 30 s, with jitter, reset on success.

/// The delay before the next connect attempt. Pure: randomness comes in as an argument.
public struct ReconnectBackoff: Sendable, Equatable {
    public var baseMs: Int64 = 500
    public var maxMs: Int64 = 30_000
    /// Up to this fraction is added at random, so many nodes do not reconnect in lockstep.
    public var jitterFraction: Double = 0.2
    public private(set) var failures: Int = 0

    public init(baseMs: Int64 = 500, maxMs: Int64 = 30_000, jitterFraction: Double = 0.2) {
        self.baseMs = baseMs
        self.maxMs = maxMs
        self.jitterFraction = jitterFraction
    }

    /// The un-jittered delay the next failure would get.
    public var nominalDelayMs: Int64 {
        let shift = min(failures, 20)
        return min(maxMs, baseMs << Int64(shift))
    }

    /// Records a failure and returns the delay to wait. `unit` is a random number in 0..<1.
    public mutating func nextDelayMs(unit: Double) -> Int64 {
        let nominal = nominalDelayMs
        failures += 1
        let u = unit.isNaN ? 0 : min(max(unit, 0), 1)
        let jitter = Int64(Double(nominal) * jitterFraction * u)
        return min(maxMs, nominal + jitter)
    }

    public mutating func reset() { failures = 0 }
}
