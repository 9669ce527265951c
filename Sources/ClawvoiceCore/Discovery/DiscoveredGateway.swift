// What a browse found: one gateway (a DNS-SD instance of _openclaw-gw._tcp in one domain, merged
// over interfaces and address families), its TXT hints read as the spec lists them, and the URL
// to dial (from the resolved SRV address and port, never from TXT). Pure values.

import Foundation
import GatewayProtocol

public enum DiscoveryNames {
    public static let serviceType = "_openclaw-gw._tcp"
    public static let localDomain = "local."

    /// "openclaw.internal" → "openclaw.internal."; "local", "local.", "" and nil → nil (local. is always browsed).
    public static func normalizeDomain(_ domain: String?) -> String? {
        guard var d = domain?.trimmingCharacters(in: .whitespaces), !d.isEmpty else { return nil }
        while d.hasPrefix(".") { d.removeFirst() }
        if !d.hasSuffix(".") { d += "." }
        if d == "." || d.lowercased() == localDomain { return nil }
        return d
    }

    /// Decodes DNS-SD `\DDD` (decimal byte) and `\c` escapes, as instance names may carry them
    /// ("Kitchen\032Gateway" → "Kitchen Gateway"). Malformed escapes are kept as written.
    public static func decodeEscapes(_ s: String) -> String {
        guard s.contains("\\") else { return s }
        var out: [UInt8] = []
        let b = Array(s.utf8)
        var i = 0
        while i < b.count {
            if b[i] == UInt8(ascii: "\\"), i + 1 < b.count {
                if i + 3 < b.count, b[(i + 1)...(i + 3)].allSatisfy({ $0 >= 48 && $0 <= 57 }) {
                    let v = b[(i + 1)...(i + 3)].reduce(0) { $0 * 10 + Int($1 - 48) }
                    if v <= 255 { out.append(UInt8(v)); i += 4; continue }
                }
                out.append(b[i + 1]); i += 2; continue
            }
            out.append(b[i]); i += 1
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// The TXT record's keys the gateway advertises (gateway-protocol.md §8). Hints only: unauthenticated.
public struct GatewayTXT: Sendable, Equatable {
    public var entries: [String: String] = [:]

    /// From TXT strings "key=value" (a key without "=" is a boolean attribute, kept with value "").
    /// Keys compare case-insensitively, as DNS-SD says; the first occurrence of a key wins.
    public init(_ strings: [String]) {
        for s in strings {
            let key: String, value: String
            if let eq = s.firstIndex(of: "=") { key = String(s[..<eq]); value = String(s[s.index(after: eq)...]) }
            else { key = s; value = "" }
            guard !key.isEmpty else { continue }
            if entries.keys.contains(where: { $0.lowercased() == key.lowercased() }) { continue }
            entries[key] = value
        }
    }

    public subscript(_ key: String) -> String? {
        entries.first(where: { $0.key.lowercased() == key.lowercased() })?.value
    }

    static func flag(_ v: String?) -> Bool { ["1", "true", "yes"].contains(v?.lowercased() ?? "") }

    public var role: String? { self["role"] }
    public var transport: String? { self["transport"] }
    public var displayName: String? { self["displayName"].map(DiscoveryNames.decodeEscapes) }
    public var lanHost: String? { self["lanHost"] }
    public var gatewayPort: Int? { self["gatewayPort"].flatMap { Int($0) }.flatMap { (1...65535).contains($0) ? $0 : nil } }
    public var tls: Bool { Self.flag(self["gatewayTls"]) }
    /// The advertised certificate fingerprint, 64 lowercase hex; nil when absent or not a SHA-256.
    public var tlsFingerprint: String? { self["gatewayTlsSha256"].flatMap { TLSFingerprint.normalize($0) } }
    public var directReachable: Bool { Self.flag(self["gatewayDirectReachable"]) }
    public var tailnetDns: String? { self["tailnetDns"] }
    public var sshPort: Int? { self["sshPort"].flatMap { Int($0) } }
    public var cliPath: String? { self["cliPath"] }
}

/// One resolved gateway.
public struct DiscoveredGateway: Sendable, Equatable {
    /// The DNS-SD instance name, escapes decoded.
    public var name: String
    /// "local." or the wide-area domain, with its trailing dot.
    public var domain: String
    /// The SRV target host ("gateway-host.local.").
    public var host: String
    /// Resolved addresses, IPv4 first, each once.
    public var addresses: [String]
    /// Interfaces it was seen on ("wlan0"); empty for wide-area results.
    public var interfaces: [String]
    /// The SRV port: the one to dial.
    public var port: Int
    public var txt: GatewayTXT

    public init(name: String, domain: String, host: String, addresses: [String], interfaces: [String], port: Int, txt: GatewayTXT) {
        self.name = name
        self.domain = domain
        self.host = host
        self.addresses = addresses
        self.interfaces = interfaces
        self.port = port
        self.txt = txt
    }

    public var tls: Bool { txt.tls }
    public var tlsFingerprint: String? { txt.tlsFingerprint }
    /// What to show: the TXT displayName, else the instance name.
    public var displayName: String { txt.displayName ?? name }

    /// The address to dial: the first IPv4, else a routable IPv6 (a link-local one needs its interface), else the host name.
    public var dialHost: String {
        if let v4 = addresses.first(where: { !$0.contains(":") }) { return v4 }
        if let v6 = addresses.first(where: { !$0.lowercased().hasPrefix("fe80") }) { return "[\(v6)]" }
        if let ll = addresses.first, let iface = interfaces.first { return "[\(ll)%25\(iface)]" }
        return host.hasSuffix(".") ? String(host.dropLast()) : host
    }

    /// ws:// or wss:// (gatewayTls=1) to the resolved address and SRV port.
    public var url: String { "\(tls ? "wss" : "ws")://\(dialHost):\(port)" }

    /// Whether NAME picks this gateway: its instance name or display name, case-insensitively.
    public func matches(name query: String) -> Bool {
        let q = query.lowercased()
        return name.lowercased() == q || displayName.lowercased() == q
    }
}
