// The client's HTTP/1.1 Upgrade request and the check of the server's 101 response
// (RFC 6455 §4.1). Values in, values out; the SHA-1 comes from the OpenSSL edge.
internal import Foundation

enum WebSocketHandshake {
    static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
    /// A server that sends more header bytes than this is not one we want to talk to.
    static let maxResponseHeaderBytes = 16 << 10

    /// Headers a caller may not set: the handshake owns them, and Origin must never be sent
    /// (the gateway applies its browser-origin allowlist to any request that has one).
    static let reservedHeaderNames: Set<String> = [
        "host", "upgrade", "connection", "origin", "sec-websocket-key", "sec-websocket-version",
        "sec-websocket-extensions", "sec-websocket-protocol", "content-length", "transfer-encoding",
    ]

    /// A fresh Sec-WebSocket-Key: 16 random bytes, base64.
    static func makeKey<R: RandomNumberGenerator>(using random: inout R) -> String {
        let bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &random) }
        return Data(bytes).base64EncodedString()
    }

    static func expectedAccept(for key: String) -> String {
        Data(Digest.sha1(Array((key + guid).utf8))).base64EncodedString()
    }

    /// Validates extra request headers: RFC 7230 token names, no CR/LF/NUL in values, none of
    /// the reserved names. Returns the offending name.
    static func invalidHeaderName(in headers: [(name: String, value: String)]) -> String? {
        let tokenCharacters = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        for (name, value) in headers {
            if name.isEmpty || !name.allSatisfy(tokenCharacters.contains) { return name }
            if reservedHeaderNames.contains(name.lowercased()) { return name }
            if value.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) { return name }
        }
        return nil
    }

    static func request(url: WebSocketURL, key: String, headers: [(name: String, value: String)]) -> [UInt8] {
        var text = "GET \(url.path) HTTP/1.1\r\n"
        text += "Host: \(url.hostHeader)\r\n"
        text += "Upgrade: websocket\r\n"
        text += "Connection: Upgrade\r\n"
        text += "Sec-WebSocket-Key: \(key)\r\n"
        text += "Sec-WebSocket-Version: 13\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        text += "\r\n"
        return Array(text.utf8)
    }

    enum ResponseOutcome: Equatable {
        /// The header block is not complete yet.
        case incomplete
        /// 101 with the right accept key; `leftover` are the first frame bytes, if any came along.
        case accepted(leftover: [UInt8])
        /// Anything else; the text says what (status line, missing header, wrong key).
        case rejected(String)
    }

    static func parseResponse(_ bytes: [UInt8], key: String) -> ResponseOutcome {
        guard let end = headerEnd(in: bytes) else {
            return bytes.count > maxResponseHeaderBytes ? .rejected("response headers exceed \(maxResponseHeaderBytes) bytes") : .incomplete
        }
        let head = String(decoding: bytes[..<end], as: UTF8.self)
        var lines = head.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst()
        let parts = statusLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: true)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1.") else {
            return .rejected("not an HTTP response: \"\(statusLine.prefix(80))\"")
        }
        guard parts[1] == "101" else {
            return .rejected("server answered \"\(statusLine.dropFirst(parts[0].count + 1).prefix(80))\" instead of 101 Switching Protocols")
        }
        var fields: [String: String] = [:]
        for line in lines where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else { return .rejected("malformed header line \"\(line.prefix(80))\"") }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingASCIIWhitespace()
            fields[name] = fields[name].map { $0 + ", " + value } ?? String(value)
        }
        guard fields["upgrade"]?.lowercased() == "websocket" else { return .rejected("101 response without Upgrade: websocket") }
        let connectionTokens = (fields["connection"] ?? "").lowercased().split(separator: ",").map { $0.trimmingASCIIWhitespace() }
        guard connectionTokens.contains("upgrade") else { return .rejected("101 response without Connection: Upgrade") }
        guard fields["sec-websocket-accept"] == expectedAccept(for: key) else { return .rejected("101 response with a wrong Sec-WebSocket-Accept") }
        if let extensions = fields["sec-websocket-extensions"], !extensions.isEmpty {
            return .rejected("server chose extensions \"\(extensions)\" that were not offered")
        }
        if let subprotocol = fields["sec-websocket-protocol"], !subprotocol.isEmpty {
            return .rejected("server chose subprotocol \"\(subprotocol)\" that was not offered")
        }
        return .accepted(leftover: Array(bytes[(end + 4)...]))
    }

    /// Index of the "\r\n\r\n" that ends the header block.
    private static func headerEnd(in bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 0...(bytes.count - 4) where bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 {
            return i
        }
        return nil
    }
}
