// The SDP offer/answer exchange of a Gateway-controlled call (protocol-drift-2026-12b.md D1):
// POST the offer to the gateway's HTTP origin + offerUrl with the single-use secret, take the
// 2xx answer (starts "v=0", ≤ 256 KiB) within 30 s. Plain HTTP/1.1 over a blocking socket on a
// detached task; the origin is the gateway's WebSocket URL with ws→http, path dropped.

import Foundation
#if canImport(Glibc)
import Glibc
#endif

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

    /// POSTs `offer` to `origin + path`; returns the answer SDP or throws a one-line reason.
    public static func post(origin: String, path: String, secret: String, headers: [String: String] = [:], offer: String,
                            timeout: Duration = .seconds(30)) async throws -> String {
        guard let u = URLComponents(string: origin + path), let host = u.host else { throw WebRTCError("bad offer URL \(origin)\(path)") }
        guard u.scheme == "http" else {
            throw WebRTCError("the offer endpoint \(origin) is HTTPS; this build posts offers over plain HTTP only (loopback gateways)")
        }
        let port = u.port ?? 80
        var request = "POST \(u.percentEncodedPath.isEmpty ? "/" : u.percentEncodedPath)\(u.percentEncodedQuery.map { "?\($0)" } ?? "") HTTP/1.1\r\n"
        request += "Host: \(host):\(port)\r\nContent-Type: application/sdp\r\nAuthorization: Bearer \(secret)\r\n"
        for (k, v) in headers.sorted(by: { $0.key < $1.key }) where !k.contains("\r") && !v.contains("\r") && !k.contains("\n") && !v.contains("\n") {
            request += "\(k): \(v)\r\n"
        }
        let body = Array(offer.utf8)
        request += "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        let bytes = Array(request.utf8) + body
        let seconds = Int(timeout.components.seconds)
        return try await Task.detached {
            let response = try exchange(host: host, port: port, request: bytes, timeoutSeconds: max(1, seconds))
            return try answer(from: response)
        }.value
    }

    /// The answer from a raw HTTP response: a 2xx status and a body that starts "v=0".
    static func answer(from response: [UInt8]) throws -> String {
        let text = String(decoding: response, as: UTF8.self)
        guard let split = text.range(of: "\r\n\r\n") else { throw WebRTCError("the offer endpoint sent no HTTP response") }
        let head = text[..<split.lowerBound]
        let statusLine = head.split(separator: "\r\n", maxSplits: 1).first.map(String.init) ?? ""
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
            throw WebRTCError("the offer endpoint sent a malformed status line: \(statusLine.prefix(80))")
        }
        var body = String(text[split.upperBound...])
        if let cl = head.split(separator: "\r\n").dropFirst().first(where: { $0.lowercased().hasPrefix("content-length:") }),
           let n = Int(cl.split(separator: ":", maxSplits: 1)[1].trimmingCharacters(in: .whitespaces)), n <= body.utf8.count {
            body = String(decoding: Array(body.utf8).prefix(n), as: UTF8.self)
        }
        guard (200..<300).contains(status) else {
            throw WebRTCError("the offer endpoint answered HTTP \(status): \(body.prefix(120).replacingOccurrences(of: "\n", with: " "))")
        }
        guard body.hasPrefix("v=0") else { throw WebRTCError("the offer endpoint's answer is not SDP (does not start with v=0)") }
        return body
    }

    private static func exchange(host: String, port: Int, request: [UInt8], timeoutSeconds: Int) throws -> [UInt8] {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let h = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        guard getaddrinfo(h, String(port), &hints, &list) == 0, let first = list else { throw WebRTCError("cannot resolve \(host)") }
        defer { freeaddrinfo(list) }
        let fd = socket(first.pointee.ai_family, first.pointee.ai_socktype, first.pointee.ai_protocol)
        guard fd >= 0 else { throw WebRTCError("socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var tv = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        guard connect(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0 else {
            throw WebRTCError("cannot reach the offer endpoint \(host):\(port): \(String(cString: strerror(errno)))")
        }
        var sent = 0
        while sent < request.count {
            let n = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw WebRTCError("sending the offer failed: \(String(cString: strerror(errno)))") }
            sent += n
        }
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { break }
            guard n > 0 else {
                throw WebRTCError(errno == EAGAIN ? "the offer endpoint did not answer within \(timeoutSeconds) s" : "reading the answer failed: \(String(cString: strerror(errno)))")
            }
            out += buf[0..<n]
            if out.count > maxAnswerBytes + 16 * 1024 { throw WebRTCError("the offer endpoint's answer is over 256 KiB") }
        }
        return out
    }
}
