// How a watcher asks whether the talk loop still answers, without hanging on a wedged or ended
// loop and without piling items into its inbox (the systemd watchdog asks every period).

import GatewayProtocol

extension TalkController {
    /// One probe item in the loop's inbox; `answered()` waits for it until the caller is cancelled.
    public final class Probe: Sendable {
        fileprivate let latch = WakeLatch()
        fileprivate let done = Locked(false)
        /// Whether the loop has taken it.
        public var isAnswered: Bool { done.value }
        /// Waits until the loop takes it or the caller is cancelled; true when it was taken.
        public func answered() async -> Bool {
            if done.value { return true }
            await latch.wait()
            return done.value
        }
        /// The loop took it.
        func answer() {
            done.withLock { $0 = true }
            latch.signal()
        }
    }

    /// Posts one probe. Ask again only once the last one is answered: a wedged loop then holds
    /// one probe, not one per period.
    public func probe() -> Probe {
        let p = Probe()
        send(.probe(p))
        return p
    }
}
