// Setup codes (spec 4.5): `oc-pair://` + base64url of a JSON object naming the gateway
// and a short-lived bootstrap token. Parsing is pure; the caller passes the current time.
// The bootstrap token is a credential: no error message or description ever contains it.

import Foundation

/// A decoded setup code.
public struct SetupCode: Sendable, Equatable, CustomStringConvertible {
    /// Primary gateway URL (`ws://` or `wss://`).
    public var url: String
    /// Extra URLs the gateway advertised, in the producer's order (may repeat `url`).
    public var urls: [String]
    /// Single-use pairing credential; forget it once a device token is stored.
    public var bootstrapToken: String
    /// Expiry in Unix milliseconds, when the producer set one.
    public var expiresAtMs: Int64?
    /// Pinned certificate SHA-256, 64 lowercase hex characters.
    public var tlsFingerprint: String?

    public init(url: String, urls: [String] = [], bootstrapToken: String, expiresAtMs: Int64? = nil, tlsFingerprint: String? = nil) {
        self.url = url
        self.urls = urls
        self.bootstrapToken = bootstrapToken
        self.expiresAtMs = expiresAtMs
        self.tlsFingerprint = tlsFingerprint
    }

    /// URLs to try, in order: `url` first, then `urls` without repeats.
    public var routes: [String] {
        var seen: Set<String> = []
        return ([url] + urls).filter { seen.insert($0).inserted }
    }

    public var description: String {
        var parts = ["url: \(url)"]
        if !urls.isEmpty { parts.append("urls: \(urls)") }
        parts.append("bootstrapToken: <redacted>")
        if let expiresAtMs { parts.append("expiresAtMs: \(expiresAtMs)") }
        if let tlsFingerprint { parts.append("tlsFingerprint: \(tlsFingerprint)") }
        return "SetupCode(\(parts.joined(separator: ", ")))"
    }

    /// Upper bound on `urls`, so a hostile code cannot make us dial forever.
    public static let maxURLs = 16

    /// Decodes a setup code as pasted by a user (surrounding whitespace and the
    /// `oc-pair://` prefix allowed). `nowMs` is the current Unix time in milliseconds.
    public static func parse(_ text: String, nowMs: Int64) throws(SetupCodeError) -> SetupCode {
        var body = Substring(text.trimmingCharacters(in: .whitespacesAndNewlines))
        let scheme = "oc-pair://"
        if body.lowercased().hasPrefix(scheme) {
            body = body.dropFirst(scheme.count)
        }
        // Some QR scanners and shells hand back the URL with a trailing slash.
        while body.hasSuffix("/") { body = body.dropLast() }
        guard !body.isEmpty else { throw .empty }
        let allowed = body.utf8.allSatisfy { c in
            (c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z")) || (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z"))
                || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || c == UInt8(ascii: "-") || c == UInt8(ascii: "_")
        }
        guard allowed, let bytes = Base64URL.decode(String(body)) else { throw .notBase64URL }

        let json: JSONValue
        do {
            json = try JSONCoding.decode(JSONValue.self, from: Data(bytes))
        } catch {
            throw .notJSON
        }
        guard let object = json.objectValue else { throw .notJSONObject }

        guard let urlValue = object["url"], urlValue != .null else { throw .missingURL }
        guard let given = urlValue.stringValue else { throw .invalidURL(field: "url") }
        let url = try checkGatewayURL(given, field: "url")

        var urls: [String] = []
        if let urlsValue = object["urls"], urlsValue != .null {
            guard let array = urlsValue.arrayValue else { throw .invalidURLList("is not an array") }
            guard !array.isEmpty else { throw .invalidURLList("is empty") }
            guard array.count <= maxURLs else { throw .invalidURLList("has \(array.count) entries (at most \(maxURLs))") }
            for (i, item) in array.enumerated() {
                guard let s = item.stringValue else { throw .invalidURL(field: "urls[\(i)]") }
                urls.append(try checkGatewayURL(s, field: "urls[\(i)]"))
            }
        }

        guard let tokenValue = object["bootstrapToken"], tokenValue != .null,
              let token = tokenValue.stringValue,
              !token.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty
        else { throw .missingBootstrapToken }

        var expiresAtMs: Int64?
        if let expiryValue = object["expiresAtMs"], expiryValue != .null {
            guard let ms = expiryValue.intValue else { throw .invalidExpiry }
            guard ms > nowMs else { throw .expired(atMs: ms) }
            expiresAtMs = ms
        }

        var fingerprint: String?
        if let fpValue = object["tlsFingerprint"], fpValue != .null {
            guard let raw = fpValue.stringValue, let normalized = TLSFingerprint.normalize(raw) else {
                throw .invalidFingerprint
            }
            fingerprint = normalized
        }

        return SetupCode(url: url, urls: urls, bootstrapToken: token, expiresAtMs: expiresAtMs, tlsFingerprint: fingerprint)
    }

    /// The URL with its scheme lowercased (schemes are case-insensitive, and everything after
    /// this tells TLS from plain by `wss://`), or the reason it is not a gateway URL.
    private static func checkGatewayURL(_ s: String, field: String) throws(SetupCodeError) -> String {
        guard let components = URLComponents(string: s), let scheme = components.scheme else {
            throw .invalidURL(field: field)
        }
        guard ["ws", "wss"].contains(scheme.lowercased()) else {
            throw .unsupportedScheme(field: field, scheme: scheme)
        }
        guard let host = components.host, !host.isEmpty else { throw .invalidURL(field: field) }
        return scheme.lowercased() + s.dropFirst(scheme.count)
    }
}

/// A certificate SHA-256 fingerprint as people paste it.
public enum TLSFingerprint {
    /// Accepts `sha256:` / `SHA-256:` prefixes, colons and whitespace; returns 64 lowercase
    /// hex characters, or nil when what remains is not a SHA-256.
    public static func normalize(_ s: String) -> String? {
        var rest = Substring(s.trimmingCharacters(in: .whitespacesAndNewlines))
        for prefix in ["sha256:", "sha-256:"] where rest.lowercased().hasPrefix(prefix) {
            rest = rest.dropFirst(prefix.count)
            break
        }
        let hex = rest.unicodeScalars.filter { $0 != ":" && !$0.properties.isWhitespace }
        guard hex.count == 64, hex.allSatisfy({ $0.isASCII && $0.properties.isASCIIHexDigit }) else { return nil }
        return String(String.UnicodeScalarView(hex)).lowercased()
    }
}

/// Why a setup code was rejected. Each message is one line and never contains the token.
public enum SetupCodeError: Error, Sendable, CustomStringConvertible, Equatable {
    /// Nothing left after trimming and removing `oc-pair://`.
    case empty
    /// Characters outside `[A-Za-z0-9_-]`, or an impossible base64url length.
    case notBase64URL
    /// The decoded bytes are not JSON.
    case notJSON
    /// Valid JSON, but not an object.
    case notJSONObject
    /// No `url` key.
    case missingURL
    /// `url` (or an entry of `urls`) is not a URL with a host.
    case invalidURL(field: String)
    /// A URL whose scheme is not `ws` or `wss`.
    case unsupportedScheme(field: String, scheme: String)
    /// `urls` is present but not a non-empty, bounded array.
    case invalidURLList(String)
    /// No `bootstrapToken`, or it is empty.
    case missingBootstrapToken
    /// `expiresAtMs` is not an integer.
    case invalidExpiry
    /// `expiresAtMs` is not after now.
    case expired(atMs: Int64)
    /// `tlsFingerprint` is not a SHA-256 fingerprint.
    case invalidFingerprint

    public var description: String {
        switch self {
        case .empty:
            return "setup code is empty; paste the code printed by `openclaw qr`"
        case .notBase64URL:
            return "setup code is not base64url (only A-Z, a-z, 0-9, '-' and '_' are allowed); check it was copied whole"
        case .notJSON:
            return "setup code does not decode to JSON; check it was copied whole"
        case .notJSONObject:
            return "setup code decodes to JSON that is not an object"
        case .missingURL:
            return "setup code has no gateway url"
        case .invalidURL(let field):
            return "setup code \(field) is not a ws:// or wss:// URL with a host"
        case .unsupportedScheme(let field, let scheme):
            return "setup code \(field) uses scheme '\(scheme)'; only ws:// and wss:// are supported"
        case .invalidURLList(let why):
            return "setup code urls \(why)"
        case .missingBootstrapToken:
            return "setup code has no bootstrapToken"
        case .invalidExpiry:
            return "setup code expiresAtMs is not an integer number of milliseconds"
        case .expired(let ms):
            let date = Date(timeIntervalSince1970: Double(ms) / 1000).formatted(.iso8601)
            return "setup code expired at \(date); ask for a new one with `openclaw qr`"
        case .invalidFingerprint:
            return "setup code tlsFingerprint is not a SHA-256 fingerprint (64 hex digits)"
        }
    }
}
