#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

/// A parsed `ws://` or `wss://` URL: the only inputs a ``WebSocketClient`` connects to.
///
/// Parsing is strict on purpose: no user info, no fragment, an explicit port must be
/// 1...65535, and an IPv6 host must be a literal in brackets. The gateway's usual port
/// (18789) is not assumed: a URL without a port gets the scheme's default (80 or 443).
public struct WebSocketURL: Sendable, Equatable, CustomStringConvertible {
    /// `true` for `wss://` (TLS).
    public var secure: Bool
    /// Host name or IP literal, lowercased, without IPv6 brackets (`::1`, not `[::1]`).
    public var host: String
    /// TCP port, 1...65535.
    public var port: Int
    /// Request target: path plus query, always starting with `/`.
    public var path: String

    public init(secure: Bool, host: String, port: Int, path: String = "/") {
        self.secure = secure
        self.host = host
        self.port = port
        self.path = path
    }

    /// Parses `ws://host[:port][/path][?query]` or the `wss://` equivalent.
    public init(parsing string: String) throws(WebSocketError) {
        let trimmed = string.trimmingASCIIWhitespace()
        guard let schemeEnd = trimmed.firstRange(of: "://") else {
            throw .invalidURL("\"\(string)\" has no scheme (expected ws:// or wss://)")
        }
        switch trimmed[..<schemeEnd.lowerBound].lowercased() {
        case "ws": secure = false
        case "wss": secure = true
        case let other: throw .invalidURL("scheme \"\(other)\" is not ws or wss")
        }
        var rest = trimmed[schemeEnd.upperBound...]
        if rest.contains("#") { throw .invalidURL("\"\(string)\" has a fragment, which WebSocket URLs must not") }

        // Authority ends at the first "/" or "?".
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        rest = rest[authorityEnd...]
        if authority.contains("@") { throw .invalidURL("\"\(string)\" has user info, which is not supported") }
        if authority.isEmpty { throw .invalidURL("\"\(string)\" has no host") }

        var hostPart: Substring
        var portPart: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else {
                throw .invalidURL("\"\(string)\" has an unterminated IPv6 literal")
            }
            hostPart = authority[authority.index(after: authority.startIndex)..<close]
            let afterBracket = authority[authority.index(after: close)...]
            if !afterBracket.isEmpty {
                guard afterBracket.hasPrefix(":") else { throw .invalidURL("\"\(string)\" has junk after the IPv6 literal") }
                portPart = afterBracket.dropFirst()
            }
            guard IPAddress.isIPv6(String(hostPart)) else { throw .invalidURL("\"\(hostPart)\" is not an IPv6 address") }
        } else {
            if let colon = authority.firstIndex(of: ":") {
                hostPart = authority[..<colon]
                portPart = authority[authority.index(after: colon)...]
            } else {
                hostPart = authority
            }
            guard !hostPart.isEmpty else { throw .invalidURL("\"\(string)\" has no host") }
            guard hostPart.allSatisfy(Self.isHostCharacter) else {
                throw .invalidURL("host \"\(hostPart)\" has characters a host name cannot have")
            }
        }
        host = hostPart.lowercased()

        if let portPart {
            guard !portPart.isEmpty, portPart.count <= 5, portPart.allSatisfy({ $0.isASCII && $0.isNumber }),
                  let value = Int(portPart), (1...65535).contains(value) else {
                throw .invalidURL("port \"\(portPart)\" is not in 1...65535")
            }
            port = value
        } else {
            port = secure ? 443 : 80
        }

        if rest.isEmpty {
            path = "/"
        } else if rest.hasPrefix("?") {
            path = "/" + rest
        } else {
            path = String(rest)
        }
        guard path.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
            throw .invalidURL("path \"\(path)\" has spaces, control or non-ASCII characters (percent-encode them)")
        }
    }

    /// `true` for 127.0.0.0/8, `::1` (also as `::ffff:127.x.y.z`) and `localhost`: hosts where
    /// unencrypted `ws://` never leaves the machine.
    public var isLoopback: Bool {
        if host == "localhost" || host == "localhost." { return true }
        return IPAddress.isLoopback(host)
    }

    /// The URL in canonical form; the port is omitted when it is the scheme's default.
    public var description: String {
        let scheme = secure ? "wss" : "ws"
        let hostText = host.contains(":") ? "[\(host)]" : host
        let defaultPort = secure ? 443 : 80
        let portText = port == defaultPort ? "" : ":\(port)"
        return "\(scheme)://\(hostText)\(portText)\(path)"
    }

    /// The `Host` request header: host plus port unless it is the scheme's default.
    var hostHeader: String {
        let hostText = host.contains(":") ? "[\(host)]" : host
        return port == (secure ? 443 : 80) ? hostText : "\(hostText):\(port)"
    }

    private static func isHostCharacter(_ c: Character) -> Bool {
        guard c.isASCII else { return false }
        return c.isLetter || c.isNumber || c == "-" || c == "." || c == "_"
    }
}

/// IP literal checks through `inet_pton`, so "127.1" or "::ffff:7f00:1" mean what the kernel
/// thinks they mean.
enum IPAddress {
    static func isIPv4(_ text: String) -> Bool {
        var address = in_addr()
        return inet_pton(AF_INET, text, &address) == 1
    }

    static func isIPv6(_ text: String) -> Bool {
        var address = in6_addr()
        return inet_pton(AF_INET6, text, &address) == 1
    }

    static func isLoopback(_ text: String) -> Bool {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            // s_addr is in network byte order: the first octet is the lowest byte in memory.
            return withUnsafeBytes(of: &v4) { $0[0] } == 127
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            let bytes = withUnsafeBytes(of: &v6) { Array($0) }
            if bytes[0..<15].allSatisfy({ $0 == 0 }) && bytes[15] == 1 { return true }  // ::1
            // IPv4-mapped ::ffff:a.b.c.d
            if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF { return bytes[12] == 127 }
        }
        return false
    }
}

extension StringProtocol where SubSequence == Substring {
    func trimmingASCIIWhitespace() -> Substring {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }
        let s = self[...]
        guard let first = s.firstIndex(where: { !isSpace($0) }) else { return s[s.endIndex...] }
        let last = s.lastIndex(where: { !isSpace($0) })!
        return s[first...last]
    }
}

extension String {
    /// Decodes a NUL-terminated C buffer as UTF-8 (invalid bytes become U+FFFD).
    init(nulTerminated buffer: [CChar]) {
        self = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
