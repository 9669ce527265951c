// Which gateway a run uses: the config's gateway.url (matched to a paired gateway by address)
// or the active paired one, and the names gateways get. Reads the store; never rewrites it.

import ClawvoiceCore
import Foundation
import GatewayCrypto
import GatewayProtocol
public import Store
import WebSocketTransport

/// The gateway for this run: with the config's `gateway.url`, the paired gateway at that URL
/// (keeping its tokens) or, when none is, one made for this run; else the active paired one.
/// The config's token, password and pin apply to this run only: the stored gateways are never
/// rewritten or re-activated. `remember` stores a gateway made from the config (without the
/// config's secrets; active only if no gateway is) so a daemon's device tokens and queued turns
/// have a home.
public func resolveActiveGateway(config: ClawConfig, store: ClawStore, remember: Bool = false) throws -> GatewayRecord? {
    guard let url = config.gateway.url else { return try store.activeGateway() }
    let parsed: WebSocketURL
    do { parsed = try WebSocketURL(parsing: url) } catch {
        throw ConfigError("gateway.url \"\(url)\" is not a gateway address (\(error)); write it as ws://HOST:18789 or wss://HOST:18789 "
                          + "in the config (or CLAWVOICE_GATEWAY_URL), or remove it to use the paired gateway")
    }
    let stored = try store.gateways()
    let same = stored.filter { GatewayNaming.sameAddress($0.url, url) }
    var record: GatewayRecord
    if let paired = same.first(where: \.isActive) ?? same.first {
        record = paired
    } else {
        var name = GatewayNaming.name(for: url)
        if stored.contains(where: { $0.name == name }) { name += " (config)" }
        record = GatewayRecord(name: name, url: url, addedAtMs: nowMs())
        if remember {
            // Active only when none is: the first gateway of this store, never in another's place.
            record.isActive = try store.activeGateway() == nil
            try store.upsertGateway(record)
        }
    }
    if !parsed.secure && !parsed.isLoopback && !(config.gateway.allowInsecure || record.allowInsecure) {
        throw ConfigError("gateway.url \(url) is unencrypted ws:// to \(parsed.host): use wss:// (with gateway.tlsFingerprint) or set gateway.allowInsecure")
    }
    record.sharedToken = config.gateway.token ?? record.sharedToken
    record.password = config.gateway.password ?? record.password
    record.tlsFingerprint = config.gateway.tlsFingerprint ?? record.tlsFingerprint
    record.allowInsecure = config.gateway.allowInsecure || record.allowInsecure
    return record
}

package func nowMs() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

public enum GatewayNaming {
    /// `host` for the default port, else `host:port`.
    public static func name(for url: String) -> String {
        guard let c = URLComponents(string: url), let host = c.host, !host.isEmpty else { return "gateway" }
        if let p = c.port, p != 18789 { return "\(host):\(p)" }
        return host
    }

    /// The same gateway: scheme, host and port (default 18789) alike; case and a trailing slash aside.
    public static func sameAddress(_ a: String, _ b: String) -> Bool {
        func key(_ s: String) -> String? {
            guard let c = URLComponents(string: s), let scheme = c.scheme?.lowercased(), let host = c.host?.lowercased() else { return nil }
            let path = c.path.hasSuffix("/") ? String(c.path.dropLast()) : c.path
            return "\(scheme)://\(host):\(c.port ?? 18789)\(path)"
        }
        guard let ka = key(a), let kb = key(b) else { return a == b }
        return ka == kb
    }
}
