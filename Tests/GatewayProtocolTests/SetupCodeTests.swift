import Testing
import GatewayProtocol

private let specCode = "eyJ1cmwiOiJ3czovLzE5Mi4xNjguMS4yMDoxODc4OSIsImJvb3RzdHJhcFRva2VuIjoiYnRfRVhBTVBMRV9PTkxZIiwiZXhwaXJlc0F0TXMiOjE3NjcyMjYyMDAwMDB9"
private let specExpiry: Int64 = 1_767_226_200_000
private let beforeExpiry = specExpiry - 60_000

/// Encodes a JSON text the way `openclaw qr` does.
private func code(_ json: String) -> String { Base64URL.encode(Array(json.utf8)) }

@Suite struct `Setup code` {
    @Test func `the spec example decodes before it expires`() throws {
        let setup = try SetupCode.parse(specCode, nowMs: beforeExpiry)
        #expect(setup == SetupCode(url: "ws://192.168.1.20:18789", bootstrapToken: "bt_EXAMPLE_ONLY", expiresAtMs: specExpiry))
        #expect(setup.routes == ["ws://192.168.1.20:18789"])
    }

    @Test(arguments: ["oc-pair://", "OC-PAIR://", "  oc-pair://", "\n"])
    func `the oc-pair prefix, a trailing slash and surrounding whitespace are tolerated`(prefix: String) throws {
        for suffix in ["", "/", " \n"] {
            let setup = try SetupCode.parse(prefix + specCode + suffix, nowMs: beforeExpiry)
            #expect(setup.bootstrapToken == "bt_EXAMPLE_ONLY")
        }
    }

    /// fuzz/regressions/setup-code/upper-case-scheme: "wsS://" was accepted but kept as written,
    /// so code that tells TLS by `wss://` would have taken it for plain text.
    @Test func `a scheme in any case is accepted and written in lower case`() throws {
        let setup = try SetupCode.parse(code(#"{"url":"WsS://gw.example:443","urls":["WS://10.0.0.2:18789"],"bootstrapToken":"abc"}"#),
                                        nowMs: beforeExpiry)
        #expect(setup.url == "wss://gw.example:443")
        #expect(setup.urls == ["ws://10.0.0.2:18789"])
    }

    @Test func `an expired code names the expiry time and the fix`() {
        for now in [specExpiry, specExpiry + 1] {
            #expect(throws: SetupCodeError.expired(atMs: specExpiry)) { try SetupCode.parse(specCode, nowMs: now) }
        }
        let message = SetupCodeError.expired(atMs: specExpiry).description
        #expect(message == "setup code expired at 2026-01-01T00:10:00Z; ask for a new one with `openclaw qr`")
    }

    @Test func `key order, whitespace and unknown keys do not matter`() throws {
        let json = """
        {
          "createdAt" : 1767225600000,
          "expiresAtMs" : 1767226200000 ,
          "bootstrapToken": "bt_EXAMPLE_ONLY",
          "extra": {"nested": [1, 2, null]},
          "url":"ws://192.168.1.20:18789"
        }
        """
        let setup = try SetupCode.parse(code(json), nowMs: beforeExpiry)
        #expect(setup == SetupCode(url: "ws://192.168.1.20:18789", bootstrapToken: "bt_EXAMPLE_ONLY", expiresAtMs: specExpiry))
    }

    @Test func `a code without expiry never expires`() throws {
        let setup = try SetupCode.parse(code(#"{"url":"wss://gw.example:443","bootstrapToken":"bt"}"#), nowMs: .max)
        #expect(setup.expiresAtMs == nil)
        #expect(setup.tlsFingerprint == nil)
    }

    @Test func `routes put url first and drop repeated urls`() throws {
        let json = #"{"url":"wss://a.example","urls":["ws://10.0.0.2:18789","wss://a.example","ws://10.0.0.2:18789","wss://b.example"],"bootstrapToken":"bt"}"#
        let setup = try SetupCode.parse(code(json), nowMs: 0)
        #expect(setup.urls.count == 4)
        #expect(setup.routes == ["wss://a.example", "ws://10.0.0.2:18789", "wss://b.example"])
    }

    @Test func `a prefixed and colon-separated fingerprint is normalised`() throws {
        let pairs = (0..<32).map { Hex.encode([UInt8($0 * 7)]).uppercased() }
        let json = #"{"url":"wss://gw","bootstrapToken":"bt","tlsFingerprint":"SHA256:\#(pairs.joined(separator: ":"))"}"#
        let setup = try SetupCode.parse(code(json), nowMs: 0)
        #expect(setup.tlsFingerprint == pairs.joined().lowercased())
    }

    @Test func `description hides the bootstrap token`() throws {
        let setup = try SetupCode.parse(specCode, nowMs: beforeExpiry)
        #expect(!setup.description.contains("bt_EXAMPLE_ONLY"))
        #expect(setup.description.contains("ws://192.168.1.20:18789"))
    }

    static let badInputs: [(String, SetupCodeError)] = [
        ("", .empty),
        ("   oc-pair://  ", .empty),
        ("eyJ1cmwiOi+/", .notBase64URL),
        ("eyJ1cmwiOiJ3cyJ9==", .notBase64URL),
        ("https://example.com/pair", .notBase64URL),
        ("a", .notBase64URL),
        (code("not json at all"), .notJSON),
        (code(#"{"url":"ws://gw""#), .notJSON),
        (code(#"["ws://gw","bt"]"#), .notJSONObject),
        (code(#""ws://gw""#), .notJSONObject),
        (code(#"{"bootstrapToken":"bt"}"#), .missingURL),
        (code(#"{"url":null,"bootstrapToken":"bt"}"#), .missingURL),
        (code(#"{"url":42,"bootstrapToken":"bt"}"#), .invalidURL(field: "url")),
        (code(#"{"url":"ws://","bootstrapToken":"bt"}"#), .invalidURL(field: "url")),
        (code(#"{"url":"192.168.1.20:18789","bootstrapToken":"bt"}"#), .invalidURL(field: "url")),
        (code(#"{"url":"https://gw.example","bootstrapToken":"bt"}"#), .unsupportedScheme(field: "url", scheme: "https")),
        (code(#"{"url":"ws://gw","urls":"ws://other","bootstrapToken":"bt"}"#), .invalidURLList("is not an array")),
        (code(#"{"url":"ws://gw","urls":[],"bootstrapToken":"bt"}"#), .invalidURLList("is empty")),
        (code(#"{"url":"ws://gw","urls":[\#(Array(repeating: "\"ws://gw\"", count: 17).joined(separator: ","))],"bootstrapToken":"bt"}"#),
         .invalidURLList("has 17 entries (at most 16)")),
        (code(#"{"url":"ws://gw","urls":["ws://ok",7],"bootstrapToken":"bt"}"#), .invalidURL(field: "urls[1]")),
        (code(#"{"url":"ws://gw","urls":["ftp://x"],"bootstrapToken":"bt"}"#), .unsupportedScheme(field: "urls[0]", scheme: "ftp")),
        (code(#"{"url":"ws://gw"}"#), .missingBootstrapToken),
        (code(#"{"url":"ws://gw","bootstrapToken":""}"#), .missingBootstrapToken),
        (code(#"{"url":"ws://gw","bootstrapToken":"  "}"#), .missingBootstrapToken),
        (code(#"{"url":"ws://gw","bootstrapToken":12345}"#), .missingBootstrapToken),
        (code(#"{"url":"ws://gw","bootstrapToken":"bt","expiresAtMs":"soon"}"#), .invalidExpiry),
        (code(#"{"url":"ws://gw","bootstrapToken":"bt","expiresAtMs":1767226200000.5}"#), .invalidExpiry),
        (code(#"{"url":"ws://gw","bootstrapToken":"bt","expiresAtMs":true}"#), .invalidExpiry),
        (code(#"{"url":"ws://gw","bootstrapToken":"bt","expiresAtMs":5}"#), .expired(atMs: 5)),
        (code(#"{"url":"ws://gw","bootstrapToken":"bt","tlsFingerprint":"abc"}"#), .invalidFingerprint),
        (code(#"{"url":"ws://gw","bootstrapToken":"bt","tlsFingerprint":42}"#), .invalidFingerprint),
    ]

    @Test(arguments: badInputs)
    func `bad input gives its own clear error`(input: String, expected: SetupCodeError) {
        #expect(throws: expected) { try SetupCode.parse(input, nowMs: 1_000) }
    }

    @Test func `every error message is one distinct line without the token`() {
        let messages = Self.badInputs.map(\.1.description) + [SetupCodeError.expired(atMs: 0).description]
        for message in messages {
            #expect(!message.contains("\n"))
            #expect(!message.contains("bt"))
            #expect(message.hasPrefix("setup code"))
        }
        for (_, a) in Self.badInputs {
            for (_, b) in Self.badInputs where a != b {
                #expect(a.description != b.description)
            }
        }
    }
}

@Suite struct `TLS fingerprint` {
    static let hex = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

    static var spellings: [String] {
        let pairs: [String] = stride(from: 0, to: 64, by: 2).map { (i: Int) -> String in
            let start = hex.index(hex.startIndex, offsetBy: i)
            return String(hex[start..<hex.index(start, offsetBy: 2)])
        }
        let spaced: String = "  " + String(hex.prefix(32)) + " " + String(hex.dropFirst(32)) + "\n"
        return [hex, hex.uppercased(), "sha256:" + hex, "SHA-256:" + hex.uppercased(),
                "Sha256:" + pairs.joined(separator: ":"), spaced]
    }

    @Test(arguments: spellings)
    func `accepted spellings normalise to lowercase hex`(input: String) {
        #expect(TLSFingerprint.normalize(input) == Self.hex)
    }

    @Test(arguments: ["", "sha256:", String(hex.dropLast()), hex + "0", "sha1:" + hex, String(hex.dropLast()) + "g", "md5:abc"])
    func `anything that is not a sha256 is rejected`(input: String) {
        #expect(TLSFingerprint.normalize(input) == nil)
    }
}
