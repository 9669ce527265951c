// The loopback gateway's HTTP offer route (protocol-drift-2026-12b.md D1): `POST <offerUrl>` with
// `Content-Type: application/sdp` and `Authorization: Bearer <clientSecret>`, the secret single-use;
// the SDP answer comes back with 201. It listens on a second 127.0.0.1 port: the WebSocket server
// (libwebsockets) serves no plain HTTP, so a node reaches this route through an HTTP-origin
// override (the room node has one, CONFIG_OPENCLAW_ROOM_GATEWAY_HTTP_BASE_URL). A gateway with
// TLS serves this route over TLS with the same certificate (an https origin). Blocking sockets
// on threads of its own: a test fake with one or two calls at a time.

import Foundation
import GatewayProtocol
import Synchronization
import WebSocketTransport
#if canImport(Glibc)
import Glibc
#endif

final class LoopbackOfferBroker: Sendable {
    /// (path, bearer secret, offer SDP) → (status, body). Runs on the gateway actor.
    typealias Handler = @Sendable (String, String?, String?, String) async -> (Int, String)
    /// Runs a job as a child of the gateway's runner; false when the gateway is stopped.
    typealias Spawn = @Sendable (@escaping @Sendable () async -> Void) -> Bool

    let port: Int
    /// Set when the route speaks TLS (the gateway's own certificate).
    let tls: TLSServerContext?
    private let fd: Int32
    private let handler: Handler
    private let spawn: Spawn
    private let stopped = Mutex(false)

    init(tls: TLSServerContext? = nil, spawn: @escaping Spawn, handler: @escaping Handler) throws {
        self.handler = handler
        self.spawn = spawn
        self.tls = tls
        let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard s >= 0 else { throw LoopbackBrokerError("socket: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = 0
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(s, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0, listen(s, 16) == 0 else {
            close(s)
            throw LoopbackBrokerError("the offer route could not listen on 127.0.0.1: \(String(cString: strerror(errno)))")
        }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(s, $0, &len) } }
        port = Int(UInt16(bigEndian: addr.sin_port))
        fd = s
        let t = Thread { [self] in acceptLoop() }
        t.name = "loopback-offer-broker"
        t.start()
    }

    func stop() {
        stopped.withLock { stopped in
            guard !stopped else { return }
            stopped = true
            shutdown(fd, Int32(SHUT_RDWR))
            close(fd)
        }
    }

    private var isStopped: Bool { stopped.withLock { $0 } }

    private func acceptLoop() {
        while !isStopped {
            let c = accept(fd, nil, nil)
            if c < 0 { if errno == EINTR { continue }; return }
            let t = Thread { [self] in serve(c) }
            t.start()
        }
    }

    /// One request: read head and body, ask the handler (it may take the media end's whole
    /// answer time), write the response, close.
    private func serve(_ c: Int32) {
        defer { close(c) }
        var tv = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        let conn: Wire
        if let tls {
            guard let t = try? tls.accept(socket: c) else { return }  // a failed handshake: the client reports it
            conn = Wire(read: { t.read(into: $0) }, write: { t.write($0) }, finish: { t.shutdown() })
        } else {
            conn = Wire(read: { recv(c, $0.baseAddress, $0.count, 0) },
                        write: { out in
                            var sent = 0
                            while sent < out.count {
                                let n = out[sent...].withUnsafeBytes { send(c, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                                if n <= 0 { return false }
                                sent += n
                            }
                            return true
                        }, finish: {})
        }
        defer { conn.finish() }
        var data: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 16 * 1024)
        var headEnd: Int?
        var contentLength = 0
        while true {
            if let h = headEnd, data.count >= h + contentLength { break }
            let n = buf.withUnsafeMutableBytes { conn.read($0) }
            guard n > 0 else { return }
            data += buf[0..<n]
            if data.count > 512 * 1024 { respond(conn, 413, "offer too large"); return }
            if headEnd == nil, let r = data.firstRange(of: Array("\r\n\r\n".utf8)) {
                headEnd = r.upperBound
                let head = String(decoding: data[..<r.lowerBound], as: UTF8.self)
                for line in head.split(separator: "\r\n").dropFirst() where line.lowercased().hasPrefix("content-length:") {
                    contentLength = Int(line.split(separator: ":", maxSplits: 1)[1].trimmingCharacters(in: .whitespaces)) ?? 0
                }
            }
        }
        guard let h = headEnd else { return }
        let head = String(decoding: data[..<(h - 4)], as: UTF8.self).split(separator: "\r\n")
        let requestLine = head.first?.split(separator: " ") ?? []
        guard requestLine.count >= 2, requestLine[0] == "POST" else { respond(conn, 405, "only POST"); return }
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            let kv = line.split(separator: ":", maxSplits: 1)
            if kv.count == 2 { headers[kv[0].lowercased()] = kv[1].trimmingCharacters(in: .whitespaces) }
        }
        let body = String(decoding: data[h..<min(data.count, h + contentLength)], as: UTF8.self)
        let bearer = headers["authorization"].flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }
        let box = Locked<(Int, String)>((502, "no answer"))
        let done = DispatchSemaphore(value: 0)
        let path = String(requestLine[1]), ctype = headers["content-type"], handler = self.handler
        // This thread blocks (it is not on the cooperative pool) while a child of the gateway's
        // runner asks the handler; a stopped gateway answers 502 at once or when it gives up.
        let asked = spawn {
            let answer = await handler(path, bearer, ctype, body)
            box.withLock { $0 = answer }
            done.signal()
        }
        if asked { _ = done.wait(timeout: .now() + 30) }
        let (status, reply) = box.value
        respond(conn, status, reply)
    }

    private func respond(_ c: Wire, _ status: Int, _ body: String) {
        let reason = [201: "Created", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
                      413: "Payload Too Large", 415: "Unsupported Media Type", 502: "Bad Gateway"][status] ?? "Status"
        let type = body.hasPrefix("v=0") ? "application/sdp" : "text/plain"
        let bytes = Array(body.utf8)
        let out = Array("HTTP/1.1 \(status) \(reason)\r\nContent-Type: \(type)\r\nContent-Length: \(bytes.count)\r\nConnection: close\r\n\r\n".utf8) + bytes
        _ = c.write(out)
    }
}

/// One served connection, plain or TLS: read (count, 0 at the end, < 0 on error), write all, finish.
private struct Wire {
    let read: (UnsafeMutableRawBufferPointer) -> Int
    let write: ([UInt8]) -> Bool
    let finish: () -> Void
}

struct LoopbackBrokerError: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}
