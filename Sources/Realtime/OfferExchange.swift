// The SDP offer/answer exchange of a Gateway-controlled call (protocol-drift-2026-12b.md D1):
// POST the offer to the gateway's HTTP origin + offerUrl with the single-use secret, take the
// 2xx answer (starts "v=0", ≤ 256 KiB) within 30 s. HTTP/1.1 over plain TCP (http://) or TLS
// (https://) with the WebSocket's trust: the gateway's pin when the offer goes to the gateway's
// own host, else the system CAs and the host name (ByteExchange, WebSocketTransport's TLS
// client). The blocking socket work runs on a thread of its own, off the cooperative pool. The
// origin is the gateway's WebSocket URL with ws→http, wss→https, path dropped.

import Foundation
import WebSocketTransport

public enum OfferExchange {
    public static let maxAnswerBytes = 256 * 1024

    /// The gateway's HTTP origin from its WebSocket URL: ws→http, wss→https, same host:port, no path.
    public static func origin(gatewayURL: String) -> String? {
        guard let u = URLComponents(string: gatewayURL), let host = u.host, !host.isEmpty else { return nil }
        let scheme: String
        switch u.scheme?.lowercased() {
        case "ws", "http": scheme = "http"
        case "wss", "https": scheme = "https"
        default: return nil
        }
        let h = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        return "\(scheme)://\(h)" + (u.port.map { ":\($0)" } ?? "")
    }

    /// The pin the offer's TLS must match: the gateway's (the one its WebSocket is pinned to)
    /// when the offer goes over https to the gateway's own host, any port; nil otherwise, and
    /// then the certificate must verify against the system CAs for the origin's host name.
    public static func tlsPin(origin: String, gatewayURL: String, gatewayPin: String?) -> String? {
        guard let gatewayPin, let o = URLComponents(string: origin), o.scheme?.lowercased() == "https",
              let g = URLComponents(string: gatewayURL), let oh = o.host?.lowercased(), let gh = g.host?.lowercased() else { return nil }
        func bare(_ h: String) -> String { h.hasPrefix("[") ? String(h.dropFirst().dropLast()) : h }
        return bare(oh) == bare(gh) ? gatewayPin : nil
    }

    /// POSTs `offer` to `origin + path`; returns the answer SDP or throws a one-line reason
    /// with its fix. `tlsPin` (https only): the SHA-256 the endpoint's leaf certificate must have.
    public static func post(origin: String, path: String, secret: String, headers: [String: String] = [:], offer: String,
                            tlsPin: String? = nil, timeout: Duration = .seconds(30)) async throws -> String {
        guard let u = URLComponents(string: origin + path), let host = u.host, !host.isEmpty else { throw WebRTCError("bad offer URL \(origin)\(path)") }
        let security: ByteExchange.Security
        switch u.scheme?.lowercased() {
        case "http": security = .plain
        case "https": security = .tls(pinSHA256: tlsPin)
        default: throw WebRTCError("the offer URL \(origin)\(path) is neither http:// nor https://: fix talk.callsHttpOrigin")
        }
        let port = u.port ?? (security == .plain ? 80 : 443)
        let hostHeader = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        var request = "POST \(u.percentEncodedPath.isEmpty ? "/" : u.percentEncodedPath)\(u.percentEncodedQuery.map { "?\($0)" } ?? "") HTTP/1.1\r\n"
        request += "Host: \(hostHeader):\(port)\r\nContent-Type: application/sdp\r\nAuthorization: Bearer \(secret)\r\n"
        for (k, v) in headers.sorted(by: { $0.key < $1.key }) where !k.contains("\r") && !v.contains("\r") && !k.contains("\n") && !v.contains("\n") {
            request += "\(k): \(v)\r\n"
        }
        let body = Array(offer.utf8)
        request += "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        let bytes = Array(request.utf8) + body
        let endpoint = "\(security == .plain ? "http" : "https")://\(hostHeader):\(port)"
        // A thread of its own: the exchange blocks (poll) for up to `timeout`.
        let response: [UInt8] = try await withCheckedThrowingContinuation { c in
            let t = Thread {
                do throws(ByteExchangeError) {
                    c.resume(returning: try ByteExchange.run(host: host, port: port, security: security, request: bytes, timeout: timeout,
                                                             maxResponseBytes: maxAnswerBytes + 16 * 1024, isComplete: isComplete))
                } catch {
                    c.resume(throwing: explain(error, endpoint: endpoint))
                }
            }
            t.name = "offer-post"
            t.start()
        }
        return try answer(from: response)
    }

    /// One line: what failed with the offer endpoint, and what fixes it.
    static func explain(_ error: ByteExchangeError, endpoint: String) -> WebRTCError {
        switch error {
        case .tlsPinMismatch(let expected, let actual):
            WebRTCError("the offer endpoint \(endpoint) failed the gateway's TLS pin (pin mismatch: expected sha256 \(expected), it presented \(actual)): "
                        + "it is not the gateway this node paired with, or the gateway's certificate changed; check it, then pair again or set gateway.tlsFingerprint")
        case .untrustedCertificate(_, let reason, let sha256):
            WebRTCError("the offer endpoint \(endpoint)'s TLS certificate is not trusted (\(reason))" + (sha256.map { "; its sha256 is \($0)" } ?? "")
                        + ": pin the gateway's certificate (gateway.tlsFingerprint, or pair with it) or give the gateway a certificate from a trusted CA")
        case .tlsFailed(let why):
            WebRTCError("TLS failure with the offer endpoint \(endpoint): \(why): check that it serves HTTPS there (the gateway's port, or talk.callsHttpOrigin)")
        case .invalidPin(let pin):
            WebRTCError("the gateway's TLS pin \"\(pin)\" is not 64 hex digits: fix gateway.tlsFingerprint")
        case .timedOut(let step, let seconds):
            WebRTCError("the offer endpoint \(endpoint) did not answer within \(seconds) s (\(step)): check the gateway, or talk.callsHttpOrigin")
        case .unresolved, .unreachable:
            WebRTCError("cannot reach the offer endpoint \(endpoint): \(error): check the gateway, or talk.callsHttpOrigin")
        case .responseTooLarge:
            WebRTCError("the offer endpoint's answer is over 256 KiB")
        case .ioFailed(let why):
            WebRTCError("the offer exchange with \(endpoint) failed: \(why)")
        }
    }

    /// A whole HTTP response: its head, and as many body bytes as its Content-Length says.
    static func isComplete(_ response: [UInt8]) -> Bool {
        guard let split = response.firstRange(of: Array("\r\n\r\n".utf8)) else { return false }
        guard let length = contentLength(String(decoding: response[..<split.lowerBound], as: UTF8.self)) else { return false }
        return response.count - split.upperBound >= length
    }

    private static func contentLength(_ head: some StringProtocol) -> Int? {
        guard let line = head.split(separator: "\r\n").dropFirst().first(where: { $0.lowercased().hasPrefix("content-length:") }) else { return nil }
        return Int(line.split(separator: ":", maxSplits: 1)[1].trimmingCharacters(in: .whitespaces))
    }

    /// The answer from a raw HTTP response: a 2xx status and a body that starts "v=0".
    static func answer(from response: [UInt8]) throws -> String {
        guard let split = response.firstRange(of: Array("\r\n\r\n".utf8)) else { throw WebRTCError("the offer endpoint sent no HTTP response") }
        let head = String(decoding: response[..<split.lowerBound], as: UTF8.self)
        let statusLine = head.split(separator: "\r\n", maxSplits: 1).first.map(String.init) ?? ""
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
            throw WebRTCError("the offer endpoint sent a malformed status line: \(statusLine.prefix(80))")
        }
        var bodyBytes = response[split.upperBound...]
        if let n = contentLength(head) {
            guard n <= bodyBytes.count else {
                throw WebRTCError("the offer endpoint's answer was cut short (\(bodyBytes.count) of \(n) bytes)")
            }
            bodyBytes = bodyBytes.prefix(n)
        }
        let body = String(decoding: bodyBytes, as: UTF8.self)
        guard (200..<300).contains(status) else {
            throw WebRTCError("the offer endpoint answered HTTP \(status): \(body.prefix(120).replacingOccurrences(of: "\n", with: " "))")
        }
        guard bodyBytes.count <= maxAnswerBytes else { throw WebRTCError("the offer endpoint's answer is over 256 KiB") }
        guard body.hasPrefix("v=0") else { throw WebRTCError("the offer endpoint's answer is not SDP (does not start with v=0)") }
        return body
    }
}
