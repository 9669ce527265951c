import Testing
@testable import WebSocketTransport

struct WebSocketURLTests {
    struct Good: Sendable, CustomTestStringConvertible {
        let text: String
        let secure: Bool
        let host: String
        let port: Int
        let path: String
        let canonical: String
        var testDescription: String { text }
    }

    static let good: [Good] = [
        Good(text: "ws://127.0.0.1:18789", secure: false, host: "127.0.0.1", port: 18789, path: "/", canonical: "ws://127.0.0.1:18789/"),
        Good(text: "wss://gateway.example.com", secure: true, host: "gateway.example.com", port: 443, path: "/", canonical: "wss://gateway.example.com/"),
        Good(text: "ws://gateway.local", secure: false, host: "gateway.local", port: 80, path: "/", canonical: "ws://gateway.local/"),
        Good(text: "WSS://GW.Example.COM:8443/openclaw-gw", secure: true, host: "gw.example.com", port: 8443, path: "/openclaw-gw", canonical: "wss://gw.example.com:8443/openclaw-gw"),
        Good(text: "ws://[::1]:18789/a/b?x=1&y=2", secure: false, host: "::1", port: 18789, path: "/a/b?x=1&y=2", canonical: "ws://[::1]:18789/a/b?x=1&y=2"),
        Good(text: "wss://[fe80::1]", secure: true, host: "fe80::1", port: 443, path: "/", canonical: "wss://[fe80::1]/"),
        Good(text: "ws://localhost:1?token=a", secure: false, host: "localhost", port: 1, path: "/?token=a", canonical: "ws://localhost:1/?token=a"),
        Good(text: "  ws://10.0.0.2:65535/  ", secure: false, host: "10.0.0.2", port: 65535, path: "/", canonical: "ws://10.0.0.2:65535/"),
        Good(text: "wss://my_host.tailnet-1.ts.net:443/", secure: true, host: "my_host.tailnet-1.ts.net", port: 443, path: "/", canonical: "wss://my_host.tailnet-1.ts.net/"),
    ]

    @Test(arguments: good)
    func `well-formed ws and wss URLs parse into their parts`(_ expected: Good) throws {
        let url = try WebSocketURL(parsing: expected.text)
        #expect(url.secure == expected.secure)
        #expect(url.host == expected.host)
        #expect(url.port == expected.port)
        #expect(url.path == expected.path)
        #expect(url.description == expected.canonical)
        #expect(try WebSocketURL(parsing: url.description) == url)
    }

    static let bad: [String] = [
        "", "example.com:18789", "http://127.0.0.1:18789", "https://gateway.example.com", "ftp://x",
        "ws://", "ws:///path", "ws://:18789", "ws://host:", "ws://host:0", "ws://host:65536", "ws://host:99999999",
        "ws://host:12a", "ws://host:-1", "ws://user:pass@host", "ws://host/#fragment", "ws://[::1", "ws://[nothex]:1",
        "ws://[::1]junk", "ws://ho st:1", "ws://host/pa th", "ws://hôst/", "ws://host/\u{7}",
    ]

    @Test(arguments: bad)
    func `malformed or non-WebSocket URLs are rejected as invalidURL`(_ text: String) {
        #expect {
            try WebSocketURL(parsing: text)
        } throws: { error in
            guard case .invalidURL = error as? WebSocketError else { return false }
            return true
        }
    }

    @Test(arguments: [
        ("ws://127.0.0.1:1", true), ("ws://127.255.0.9", true), ("ws://[::1]", true),
        ("ws://[0:0:0:0:0:0:0:1]", true), ("ws://[::ffff:127.0.0.1]", true), ("ws://localhost", true),
        ("ws://LOCALHOST:9", true), ("ws://128.0.0.1", false), ("ws://10.0.0.1", false), ("ws://[::2]", false),
        ("ws://[::ffff:10.0.0.1]", false), ("ws://localhost.example.com", false), ("ws://example.com", false),
        ("ws://127.0.0.1.nip.io", false), ("ws://0.0.0.0", false),
    ])
    func `isLoopback covers 127 slash 8, ::1 and localhost only`(_ text: String, _ loopback: Bool) throws {
        #expect(try WebSocketURL(parsing: text).isLoopback == loopback)
    }

    @Test func `ws to a remote host is refused unless insecure remote is allowed`() throws {
        let remote = try WebSocketURL(parsing: "ws://example.com:18789")
        #expect(throws: WebSocketError.insecureTransportRefused(host: "example.com")) {
            try WebSocketClient(url: remote, options: WebSocketClientOptions())
        }
        _ = try WebSocketClient(url: remote, options: WebSocketClientOptions(allowInsecureRemote: true))
        _ = try WebSocketClient(url: WebSocketURL(parsing: "ws://127.0.0.1:18789"), options: WebSocketClientOptions())
        _ = try WebSocketClient(url: WebSocketURL(parsing: "ws://localhost:18789"), options: WebSocketClientOptions())
        _ = try WebSocketClient(url: WebSocketURL(parsing: "wss://example.com:18789"), options: WebSocketClientOptions())
        let description = WebSocketError.insecureTransportRefused(host: "example.com").description
        #expect(description.contains("example.com") && description.contains("ws://"))
    }

    @Test func `a pin is normalised from prefixed colon-separated uppercase hex and junk is rejected`() throws {
        let hex = String(repeating: "ab", count: 32)
        let colons = stride(from: 0, to: 64, by: 2).map { i -> String in
            let start = hex.index(hex.startIndex, offsetBy: i)
            return String(hex[start..<hex.index(start, offsetBy: 2)]).uppercased()
        }.joined(separator: ":")
        #expect(TLSCertificateFingerprint.normalize(hex) == hex)
        #expect(TLSCertificateFingerprint.normalize("sha256:" + hex.uppercased()) == hex)
        #expect(TLSCertificateFingerprint.normalize("SHA-256:" + colons) == hex)
        #expect(TLSCertificateFingerprint.normalize(String(hex.dropLast())) == nil)
        #expect(TLSCertificateFingerprint.normalize(String(hex.dropLast()) + "g") == nil)

        let url = try WebSocketURL(parsing: "wss://127.0.0.1:1")
        #expect(throws: WebSocketError.invalidPin("nope")) {
            try WebSocketClient(url: url, options: WebSocketClientOptions(tlsPinSHA256: "nope"))
        }
        #expect(try WebSocketClient(url: url, options: WebSocketClientOptions(tlsPinSHA256: "sha256:" + colons)).core.pin == hex)
    }
}
