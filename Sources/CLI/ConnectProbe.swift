// ConnectProbe: one short look at a gateway connection (pair's reachability check, the TLS
// trust probe): the first thing the client's events decide, or nothing within a time limit.

import ClawvoiceCore
import Daemon
import GatewayCrypto
import NodeRuntime
import WebSocketTransport

enum ConnectProbe {
    /// The first value `decide` returns for `client`'s events (nil: keep listening), `ended`
    /// when the events end first, nil when nothing was decided within `timeout`.
    static func first<T: Sendable>(_ client: WebSocketClient, within timeout: Duration, ended: T,
                                   _ decide: @escaping @Sendable (WebSocketEvent) -> T?) async -> T? {
        await withTaskGroup(of: T?.self) { group in
            group.addTask {
                for await e in client.events {
                    if let d = decide(e) { return d }
                }
                return ended
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }
}
