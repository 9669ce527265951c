// Which chat session `history`, `listen` and `send` mean when none is named (the daemon's
// status and listen ask the same).

import ClawvoiceCore
import GatewayCrypto
package import Store

/// Which chat session `history` and `listen` mean when none is named: the config's
/// talk.sessionKey, else the main session the gateway named in hello-ok, else "main" (which the
/// gateway canonicalises), the same choice the talk turn makes.
package enum HistorySession {
    /// The one current session: named here, else the one `session use` chose for this gateway
    /// (kept in the store across restarts), else the config's, else the gateway's main session.
    package static func key(explicit: String?, config: ClawConfig, store: ClawStore, gateway: String) -> String {
        if let k = explicit, !k.isEmpty { return k }
        if let k = try? store.currentSession(gateway: gateway), !k.isEmpty { return k }
        if let k = config.talk.sessionKey, !k.isEmpty { return k }
        if let k = (try? store.gateway(named: gateway))??.mainSessionKey, !k.isEmpty { return k }
        return "main"
    }
}
