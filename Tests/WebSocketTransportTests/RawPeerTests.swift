import Foundation
import Testing
@testable import WebSocketTransport

/// A hand-driven WebSocket server on 127.0.0.1 built from plain sockets, for what the lws
/// server cannot show: the exact request bytes, pings on the wire, a server that stalls.
/// Every blocking call polls with a deadline and runs on its own thread.
final class RawPeer: @unchecked Sendable {
    let port: Int
    private let listener: Int32
    private var connection: Int32 = -1
    private var inbox: [UInt8] = []

    init() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(listener, 4) == 0 else {
            Glibc.close(listener)
            throw RawPeerError.setup(errno)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit {
        if connection >= 0 { Glibc.close(connection) }
        Glibc.close(listener)
    }

    enum RawPeerError: Error { case setup(Int32), timeout(String), closed }

    /// Runs blocking socket work off the cooperative pool.
    func run<T: Sendable>(_ body: @escaping @Sendable (RawPeer) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread { continuation.resume(with: Result { try body(self) }) }
            thread.start()
        }
    }

    private func waitReadable(_ fd: Int32, until deadline: ContinuousClock.Instant, what: String) throws {
        while true {
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else { throw RawPeerError.timeout(what) }
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let millis = Int32(max(1, remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000))
            if poll(&descriptor, 1, millis) > 0 { return }
        }
    }

    func accept(timeout: Duration = .seconds(5)) throws {
        try waitReadable(listener, until: .now + timeout, what: "accept")
        connection = Glibc.accept(listener, nil, nil)
        guard connection >= 0 else { throw RawPeerError.setup(errno) }
    }

    private func fill(until deadline: ContinuousClock.Instant, what: String) throws {
        try waitReadable(connection, until: deadline, what: what)
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = recv(connection, &chunk, chunk.count, 0)
        guard n > 0 else { throw RawPeerError.closed }
        inbox.append(contentsOf: chunk[..<n])
    }

    /// Reads the HTTP request head.
    func readRequest(timeout: Duration = .seconds(5)) throws -> String {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let end = String(decoding: inbox, as: UTF8.self).range(of: "\r\n\r\n") {
                let text = String(decoding: inbox, as: UTF8.self)
                let head = String(text[..<end.lowerBound])
                inbox.removeFirst(text[..<end.upperBound].utf8.count)
                return head
            }
            try fill(until: deadline, what: "request")
        }
    }

    func acceptUpgrade(request: String) {
        let key = request.components(separatedBy: "\r\n")
            .first { $0.lowercased().hasPrefix("sec-websocket-key:") }?
            .split(separator: ":", maxSplits: 1).last?.trimmingCharacters(in: .whitespaces) ?? ""
        let accept = WebSocketHandshake.expectedAccept(for: key)
        write(Array("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: \(accept)\r\n\r\n".utf8))
    }

    /// Reads one client frame (masked) and returns its opcode and unmasked payload.
    func readFrame(timeout: Duration = .seconds(5)) throws -> (opcode: UInt8, payload: [UInt8]) {
        let deadline = ContinuousClock.now + timeout
        while true {
            if inbox.count >= 2 {
                var length = Int(inbox[1] & 0x7F)
                var offset = 2
                if length == 126, inbox.count >= 4 { length = Int(inbox[2]) << 8 | Int(inbox[3]); offset = 4 }
                if length < 126 || offset == 4, inbox.count >= offset + 4 + length {
                    let frame = Array(inbox[..<(offset + 4 + length)])
                    inbox.removeFirst(frame.count)
                    guard let decoded = clientFrame(frame) else { throw RawPeerError.closed }
                    return (decoded.opcode, decoded.payload)
                }
            }
            try fill(until: deadline, what: "frame")
        }
    }

    func write(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            offset += n
        }
    }

    func sendFrame(_ opcode: WebSocketOpcode, _ payload: [UInt8]) {
        write(WebSocketFrameEncoder.encode(opcode: opcode, payload: payload, maskKey: nil))
    }
}

struct RawPeerTests {
    @Test func `the opening request is a plain HTTP upgrade without an origin header`() async throws {
        let peer = try RawPeer()
        let client = try WebSocketClient(
            url: WebSocketURL(parsing: "ws://127.0.0.1:\(peer.port)/openclaw-gw"),
            options: WebSocketClientOptions(headers: [("User-Agent", "clawvoice-test")]))
        let events = EventRecorder(client.events)
        client.connect()
        let request = try await peer.run { peer -> String in
            try peer.accept()
            let request = try peer.readRequest()
            peer.acceptUpgrade(request: request)
            return request
        }
        let lines = request.components(separatedBy: "\r\n")
        #expect(lines.first == "GET /openclaw-gw HTTP/1.1")
        #expect(lines.contains("Host: 127.0.0.1:\(peer.port)"))
        #expect(lines.contains("Sec-WebSocket-Version: 13"))
        #expect(lines.contains("User-Agent: clawvoice-test"))
        #expect(!lines.contains { $0.lowercased().hasPrefix("origin:") })
        #expect(!lines.contains { $0.lowercased().hasPrefix("sec-websocket-extensions:") })
        _ = await events.wait(for: "opened") { $0.contains(where: \.isOpened) ? true : nil }
        client.close()
    }

    @Test func `an idle client pings at its interval, and pongs keep it open`() async throws {
        let peer = try RawPeer()
        var options = WebSocketClientOptions()
        options.pingInterval = .seconds(1)
        let client = try WebSocketClient(url: WebSocketURL(parsing: "ws://127.0.0.1:\(peer.port)/"), options: options)
        let events = EventRecorder(client.events)
        client.connect()
        let start = ContinuousClock.now
        let opcodes = try await peer.run { peer -> [UInt8] in
            try peer.accept()
            peer.acceptUpgrade(request: try peer.readRequest())
            var seen: [UInt8] = []
            for _ in 0..<2 {
                let frame = try peer.readFrame(timeout: .seconds(3))
                seen.append(frame.opcode)
                if frame.opcode == 0x9 { peer.sendFrame(.pong, frame.payload) }
            }
            peer.sendFrame(.text, Array("still here".utf8))
            return seen
        }
        #expect(opcodes == [0x9, 0x9])
        #expect(ContinuousClock.now - start >= .milliseconds(1900))
        let message = await events.wait(for: "message after two pings") { $0.lazy.compactMap(\.message).first }
        #expect(message == .text("still here"))
        #expect(!events.events.contains { $0.isTerminal })
        client.close()
    }

    @Test func `a server that never answers the upgrade fails the connect after the timeout`() async throws {
        let peer = try RawPeer()
        var options = WebSocketClientOptions()
        options.connectTimeout = .seconds(1)
        let client = try WebSocketClient(url: WebSocketURL(parsing: "ws://127.0.0.1:\(peer.port)/"), options: options)
        let events = EventRecorder(client.events)
        let start = ContinuousClock.now
        client.connect()
        try await peer.run { peer in
            try peer.accept()
            _ = try peer.readRequest()
        }
        // Bounded generously: under make test's round-1 load the process can stall for seconds, and
        // the reason ("within 1 s") is what shows it was the timeout, not how soon it came.
        #expect(await events.waitForEnd(timeout: .seconds(10)))
        #expect(ContinuousClock.now - start >= .milliseconds(900))
        guard case .failed(.connectFailed(let why))? = events.events.last, events.events.count == 1 else {
            Issue.record("expected a single connectFailed, got \(events.events)")
            return
        }
        #expect(why.contains("within 1 s"))
    }

    @Test func `close codes lws would rewrite arrive unchanged`() async throws {
        for code in [1012, 1013, 1014] {
            let peer = try RawPeer()
            let client = try WebSocketClient(url: WebSocketURL(parsing: "ws://127.0.0.1:\(peer.port)/"))
            let events = EventRecorder(client.events)
            client.connect()
            let echo = try await peer.run { peer -> (opcode: UInt8, payload: [UInt8]) in
                try peer.accept()
                peer.acceptUpgrade(request: try peer.readRequest())
                peer.sendFrame(.close, [UInt8(code >> 8), UInt8(code & 0xFF)] + Array("try again later".utf8))
                return try peer.readFrame()
            }
            #expect(echo.opcode == 0x8 && echo.payload == [UInt8(code >> 8), UInt8(code & 0xFF)])
            #expect(await events.waitForEnd())
            #expect(events.events.last == .closed(code: code, reason: "try again later"))
        }
    }
}
