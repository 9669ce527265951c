import Testing
@testable import WebSocketTransport

/// SplitMix64: deterministic masks and keys, so frames can be compared byte for byte.
struct SeededRandom: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

typealias Machine = WebSocketClientConnection<SeededRandom>

/// Decodes one frame written by the client (masked), for assertions.
func clientFrame(_ bytes: [UInt8]) -> (opcode: UInt8, fin: Bool, payload: [UInt8])? {
    guard bytes.count >= 2, bytes[1] & 0x80 != 0 else { return nil }
    var length = Int(bytes[1] & 0x7F)
    var offset = 2
    if length == 126 { length = Int(bytes[2]) << 8 | Int(bytes[3]); offset = 4 }
    else if length == 127 { length = (0..<8).reduce(0) { $0 << 8 | Int(bytes[2 + $1]) }; offset = 10 }
    let key = Array(bytes[offset..<(offset + 4)])
    guard bytes.count == offset + 4 + length else { return nil }
    let payload = bytes[(offset + 4)...].enumerated().map { $0.element ^ key[$0.offset % 4] }
    return (bytes[0] & 0x0F, bytes[0] & 0x80 != 0, payload)
}

extension Array where Element == Machine.Action {
    var writes: [[UInt8]] { compactMap { if case .write(let b) = $0 { b } else { nil } } }
    var events: [WebSocketEvent] { compactMap { if case .emit(let e) = $0 { e } else { nil } } }
}

struct WebSocketClientConnectionTests {
    static let url = try! WebSocketURL(parsing: "ws://127.0.0.1:18789/")

    /// A machine that has completed the opening handshake.
    static func openMachine(maxMessageBytes: Int = 1 << 20) -> Machine {
        var machine = Machine(url: url, maxMessageBytes: maxMessageBytes, random: SeededRandom(state: 7))
        let accept = WebSocketHandshake.expectedAccept(for: machine.key)
        let response = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: \(accept)\r\n\r\n"
        let actions = machine.receive(Array(response.utf8))
        #expect(actions == [.opened, .emit(.opened)])
        #expect(machine.state == .open)
        return machine
    }

    static func serverFrame(_ opcode: WebSocketOpcode, _ payload: [UInt8], fin: Bool = true) -> [UInt8] {
        WebSocketFrameEncoder.encode(opcode: opcode, payload: payload, fin: fin, maskKey: nil)
    }

    static func closePayload(_ code: Int, _ reason: String) -> [UInt8] {
        [UInt8(code >> 8), UInt8(code & 0xFF)] + Array(reason.utf8)
    }

    @Test func `nothing is sent before the upgrade completes and a refused upgrade fails the connect`() {
        var machine = Machine(url: Self.url, maxMessageBytes: 100, random: SeededRandom(state: 1))
        #expect(machine.frame(for: .text("early")) == nil)
        #expect(machine.pingFrame() == nil)
        let actions = machine.receive(Array("HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n".utf8))
        guard case .emit(.failed(.connectFailed(let why)))? = actions.first else {
            Issue.record("expected connectFailed, got \(actions)")
            return
        }
        #expect(why.contains("401 Unauthorized"))
        #expect(actions.last == .abortTransport)
        #expect(machine.state == .closed)
    }

    @Test(arguments: [1000, 1001, 1008, 1011, 1012, 1013, 3000, 4000, 4001, 4999])
    func `a server close reports its own code and reason and is echoed`(_ code: Int) throws {
        var machine = Self.openMachine()
        let actions = machine.receive(Self.serverFrame(.close, Self.closePayload(code, "service restart")))
        #expect(actions.events == [.closed(code: code, reason: "service restart")])
        let echo = try #require(actions.writes.first.flatMap(clientFrame))
        #expect(echo.opcode == 0x8)
        #expect(echo.payload == [UInt8(code >> 8), UInt8(code & 0xFF)])
        #expect(actions.last == .closeTransport)
        #expect(machine.receive(Self.serverFrame(.text, Array("late".utf8))).isEmpty)
    }

    @Test func `a close without payload reports no code`() {
        var machine = Self.openMachine()
        let actions = machine.receive(Self.serverFrame(.close, []))
        #expect(actions.events == [.closed(code: nil, reason: "")])
        #expect(actions.writes.first.flatMap(clientFrame)?.payload == [])
    }

    @Test(arguments: [0, 999, 1004, 1005, 1006, 1015, 1016, 2999, 5000, 65535])
    func `a close code that may not be sent is a protocol violation answered with 1002`(_ code: Int) throws {
        var machine = Self.openMachine()
        let actions = machine.receive(Self.serverFrame(.close, Self.closePayload(code, "")))
        guard case .failed(.protocolViolation)? = actions.events.first else {
            Issue.record("expected protocolViolation, got \(actions)")
            return
        }
        #expect(try #require(actions.writes.first.flatMap(clientFrame)).payload.prefix(2) == [0x03, 0xEA])
    }

    @Test func `fragments are joined, pings in between are answered, and text must be UTF-8`() throws {
        var machine = Self.openMachine()
        var actions = machine.receive(Self.serverFrame(.text, Array("hé".utf8).dropLast().map { $0 }, fin: false))
        actions += machine.receive(Self.serverFrame(.ping, [9, 9]))
        actions += machine.receive(Self.serverFrame(.continuation, [Array("hé".utf8).last!] + Array("llo".utf8)))
        #expect(actions.events == [.message(.text("héllo"))])
        let pong = try #require(actions.writes.first.flatMap(clientFrame))
        #expect(pong.opcode == 0xA && pong.payload == [9, 9])

        let bad = machine.receive(Self.serverFrame(.text, [0xC3, 0x28]))
        guard case .failed(.protocolViolation)? = bad.events.first else {
            Issue.record("expected a violation for invalid UTF-8, got \(bad)")
            return
        }
        #expect(try #require(bad.writes.first.flatMap(clientFrame)).payload.prefix(2) == [0x03, 0xEF])  // 1007
    }

    @Test func `binary messages keep their bytes and continuation rules are enforced`() {
        var machine = Self.openMachine()
        let bytes: [UInt8] = [0, 255, 10, 13]
        #expect(machine.receive(Self.serverFrame(.binary, bytes)).events == [.message(.binary(bytes))])
        var orphan = Self.openMachine()
        guard case .failed(.protocolViolation)? = orphan.receive(Self.serverFrame(.continuation, [1])).events.first else {
            Issue.record("a continuation without a message must fail")
            return
        }
        var interleaved = Self.openMachine()
        _ = interleaved.receive(Self.serverFrame(.text, [0x61], fin: false))
        guard case .failed(.protocolViolation)? = interleaved.receive(Self.serverFrame(.binary, [1])).events.first else {
            Issue.record("a new message inside a fragmented one must fail")
            return
        }
    }

    @Test func `an oversized message fails with its size before the payload arrives and closes with 1009`() throws {
        var machine = Self.openMachine(maxMessageBytes: 64 << 10)
        let header = Array(Self.serverFrame(.binary, patternBytes(count: 100 << 10)).prefix(10))
        let actions = machine.receive(header)
        #expect(actions.events == [.failed(.messageTooLarge(100 << 10))])
        #expect(try #require(actions.writes.first.flatMap(clientFrame)).payload.prefix(2) == [0x03, 0xF1])
        #expect(actions.last == .awaitPeerClose)

        // The rest of the refused message is skipped; the server's close still completes it.
        let rest = Array(Self.serverFrame(.binary, patternBytes(count: 100 << 10)).dropFirst(10))
        let after = machine.receive(rest + Self.serverFrame(.text, Array("dropped".utf8)) + Self.serverFrame(.close, [0x03, 0xF1]))
        #expect(after == [.closeTransport])

        var fragmented = Self.openMachine(maxMessageBytes: 100)
        _ = fragmented.receive(Self.serverFrame(.binary, patternBytes(count: 60), fin: false))
        #expect(fragmented.receive(Self.serverFrame(.continuation, patternBytes(count: 60))).events == [.failed(.messageTooLarge(120))])
    }

    @Test func `a local close sends our code and reports it when the server acknowledges`() throws {
        var machine = Self.openMachine()
        let start = machine.close(code: 4000, reason: "tick timeout")
        let frame = try #require(start.writes.first.flatMap(clientFrame))
        #expect(frame.opcode == 0x8 && frame.payload == Self.closePayload(4000, "tick timeout"))
        #expect(start.last == .awaitPeerClose)
        #expect(machine.frame(for: .text("after close")) == nil)
        #expect(machine.close(code: 1000, reason: "again").isEmpty)

        // Messages the server sent before seeing our close are still delivered.
        #expect(machine.receive(Self.serverFrame(.text, Array("in flight".utf8))).events == [.message(.text("in flight"))])
        let ack = machine.receive(Self.serverFrame(.close, Self.closePayload(4000, "")))
        #expect(ack.events == [.closed(code: 4000, reason: "tick timeout")])
        #expect(ack.writes.isEmpty)
        #expect(ack.last == .closeTransport)
    }

    @Test func `a long close reason is cut at 123 bytes on a character boundary`() {
        let payload = Machine.closePayload(code: 1000, reason: String(repeating: "é", count: 100))
        #expect(payload.count == 2 + 122)
        #expect(String(validating: payload[2...], as: UTF8.self) != nil)
    }

    @Test func `the transport ending reports the right terminal event once`() {
        var handshaking = Machine(url: Self.url, maxMessageBytes: 10, random: SeededRandom(state: 2))
        #expect(handshaking.transportEnded(reason: "TCP connect failed").events == [.failed(.connectFailed("TCP connect failed"))])
        #expect(handshaking.transportEnded(reason: "again").isEmpty)

        var open = Self.openMachine()
        #expect(open.transportEnded(reason: "reset").events == [.closed(code: nil, reason: "")])

        var closing = Self.openMachine()
        _ = closing.close(code: 1001, reason: "bye")
        #expect(closing.transportEnded(reason: "timeout").events == [.closed(code: 1001, reason: "bye")])

        var aborted = Machine(url: Self.url, maxMessageBytes: 10, random: SeededRandom(state: 3))
        #expect(aborted.close(code: 1000, reason: "stop") == [.emit(.closed(code: 1000, reason: "stop")), .abortTransport])
        #expect(aborted.transportEnded(reason: "killed").isEmpty)
    }

    @Test func `outgoing frames are masked with fresh keys`() throws {
        var machine = Self.openMachine()
        let firstFrame = machine.frame(for: .text("same"))
        let secondFrame = machine.frame(for: .text("same"))
        let ping = machine.pingFrame()
        let first = try #require(firstFrame)
        let second = try #require(secondFrame)
        #expect(first != second)
        #expect(clientFrame(first)?.payload == Array("same".utf8))
        #expect(clientFrame(second)?.payload == Array("same".utf8))
        #expect(clientFrame(try #require(ping))?.opcode == 0x9)
    }
}
