// WebSocketTransport owns clawvoice's WebSocket connections: a client and a server over
// libwebsockets (one lws context and one service thread each), TLS for both, and pinning of
// the server's leaf certificate by its SHA-256 fingerprint. It moves whole text and binary
// messages and close codes, nothing more. It must not parse JSON, know any gateway frame,
// method or close-code meaning, or retry: those belong to GatewayProtocol and GatewayClient.
// libwebsockets and OpenSSL are imported `internal`; no C type appears in the public API.
//
// The server is lws' own WebSocket server. The client uses lws for the socket (DNS,
// connect, poll, timers) but does RFC 6455 itself (WebSocketClientConnection) and TLS with
// OpenSSL memory BIOs (TLSClientSession): lws 4.1.6's ws client turns received close codes
// 1012-2999 into 1002, and its raw client cannot do TLS.
//
// ByteExchange reuses that TLS client for one-shot requests (the call's SDP offer POST) with the
// same trust, and TLSServerContext serves TLS on a plain blocking socket (the loopback's offer route).

/// One complete WebSocket message (all fragments joined).
public enum WebSocketMessage: Sendable, Equatable {
    /// A text message; its payload is UTF-8 on the wire.
    case text(String)
    /// A binary message.
    case binary([UInt8])

    /// The payload as it travels on the wire, in bytes.
    public var payloadByteCount: Int {
        switch self {
        case .text(let string): string.utf8.count
        case .binary(let bytes): bytes.count
        }
    }
}

/// What a ``WebSocketClient`` reports, in order: `.opened` at most once, then messages, then
/// exactly one terminal event (`.closed` or `.failed`), after which the stream finishes.
public enum WebSocketEvent: Sendable, Equatable {
    /// The opening handshake completed (and, for a pinned `wss://` URL, the pin matched).
    case opened
    /// A complete message arrived.
    case message(WebSocketMessage)
    /// The connection ended. `code` is the close code carried by the close frame (the peer's
    /// if the peer closed first, ours if we did); `nil` means the TCP connection ended
    /// without any close frame, which RFC 6455 calls 1006 (abnormal closure).
    case closed(code: Int?, reason: String)
    /// The connection could not be opened, or was torn down for a transport-level reason.
    case failed(WebSocketError)
}

/// Failures of this module. Descriptions are one line and name the C call where there is one.
public enum WebSocketError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The string is not a usable `ws://` or `wss://` URL; the payload says why.
    case invalidURL(String)
    /// `ws://` (no TLS) to a host that is not loopback, without `allowInsecureRemote`.
    case insecureTransportRefused(host: String)
    /// A TLS pin is not 64 hex digits (after dropping a `sha256:` prefix and colons).
    case invalidPin(String)
    /// The server's leaf certificate does not have the pinned SHA-256 fingerprint. Both are
    /// 64 lowercase hex digits.
    case tlsPinMismatch(expected: String, actual: String)
    /// No pin was given and the server's certificate did not verify against the system CAs
    /// (`reason` is OpenSSL's, e.g. "self-signed certificate"). `sha256` is the leaf's
    /// fingerprint (64 lowercase hex digits), so the user can check it and pin it.
    case untrustedCertificate(host: String, reason: String, sha256: String?)
    /// The connection could not be established (TCP, TLS or the HTTP upgrade); the payload
    /// says which step failed and why.
    case connectFailed(String)
    /// The peer broke RFC 6455 (bad framing, invalid UTF-8 text, bad close payload); we
    /// closed with 1002 or 1007.
    case protocolViolation(String)
    /// An extra request header has an invalid name or value, or is one the handshake owns
    /// (Host, Upgrade, Connection, Origin, Sec-WebSocket-*).
    case invalidHeader(String)
    /// A received message was larger than the configured limit (bytes, at least).
    case messageTooLarge(Int)
    /// The connection was already closed.
    case closed
    /// `lws_create_context` or `lws_create_vhost` failed (memory, TLS setup).
    case contextCreationFailed
    /// The server could not listen (`lws_create_vhost` failed: address in use, bad
    /// interface, or an unreadable TLS certificate or key); the payload says which.
    case listenFailed(String)

    public var description: String {
        switch self {
        case .invalidURL(let why):
            "invalid WebSocket URL: \(why)"
        case .insecureTransportRefused(let host):
            "refusing unencrypted ws:// to non-loopback host \(host): use wss:// or allow insecure remote explicitly"
        case .invalidPin(let pin):
            "invalid TLS pin \"\(pin)\": expected 64 hex digits (SHA-256 of the leaf certificate)"
        case .tlsPinMismatch(let expected, let actual):
            "TLS certificate pin mismatch: expected sha256 \(expected), server presented \(actual)"
        case .untrustedCertificate(let host, let reason, let sha256):
            "TLS certificate of \(host) is not trusted (\(reason))" + (sha256.map { "; its SHA-256 fingerprint is \($0)" } ?? "")
        case .connectFailed(let why):
            "WebSocket connect failed: \(why)"
        case .protocolViolation(let what):
            "WebSocket peer violated the protocol: \(what)"
        case .invalidHeader(let name):
            "invalid or reserved WebSocket request header \"\(name)\""
        case .messageTooLarge(let bytes):
            "WebSocket message too large: at least \(bytes) bytes"
        case .closed:
            "WebSocket connection is closed"
        case .contextCreationFailed:
            "lws_create_context/lws_create_vhost failed"
        case .listenFailed(let why):
            "WebSocket server could not listen: \(why)"
        }
    }
}
