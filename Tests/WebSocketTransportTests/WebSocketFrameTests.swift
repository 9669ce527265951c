import Testing
@testable import WebSocketTransport

struct WebSocketFrameTests {
    @Test func `the encoder reproduces the RFC 6455 single-frame examples`() {
        let hello = Array("Hello".utf8)
        #expect(WebSocketFrameEncoder.encode(opcode: .text, payload: hello, maskKey: nil) == [0x81, 0x05, 0x48, 0x65, 0x6C, 0x6C, 0x6F])
        #expect(WebSocketFrameEncoder.encode(opcode: .text, payload: hello, maskKey: 0x37FA_213D)
            == [0x81, 0x85, 0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D, 0x51, 0x58])
        #expect(WebSocketFrameEncoder.encode(opcode: .ping, payload: hello, maskKey: nil) == [0x89, 0x05] + hello)
    }

    @Test(arguments: [0, 1, 125, 126, 127, 65535, 65536, 200_001])
    func `payload lengths use the 7, 16 and 64 bit forms and round-trip`(_ count: Int) throws {
        let payload = patternBytes(count: count)
        let frame = WebSocketFrameEncoder.encode(opcode: .binary, payload: payload, maskKey: nil)
        let headerLength = count < 126 ? 2 : (count <= 0xFFFF ? 4 : 10)
        #expect(frame.count == headerLength + count)
        var decoder = WebSocketFrameDecoder(maxPayloadBytes: 1 << 20)
        decoder.append(frame)
        #expect(try decoder.nextFrame() == WebSocketFrame(fin: true, opcode: .binary, payload: payload))
        #expect(try decoder.nextFrame() == nil)
    }

    @Test func `masking is undone by masking again, at every alignment`() {
        let key: [UInt8] = [0xA1, 0x02, 0xF3, 0x44]
        for count in 0..<40 {
            let original = patternBytes(count: count, seed: UInt32(count))
            var bytes = original
            bytes.withUnsafeMutableBufferPointer { WebSocketFrameEncoder.applyMask(key, to: $0) }
            for (i, byte) in bytes.enumerated() { #expect(byte == original[i] ^ key[i % 4]) }
            bytes.withUnsafeMutableBufferPointer { WebSocketFrameEncoder.applyMask(key, to: $0) }
            #expect(bytes == original)
        }
    }

    @Test func `frames fed one byte at a time decode the same as fed at once`() throws {
        let stream = WebSocketFrameEncoder.encode(opcode: .text, payload: Array("part one ".utf8), fin: false, maskKey: nil)
            + WebSocketFrameEncoder.encode(opcode: .ping, payload: [1, 2, 3], maskKey: nil)
            + WebSocketFrameEncoder.encode(opcode: .continuation, payload: patternBytes(count: 300), maskKey: nil)
        var whole = WebSocketFrameDecoder(maxPayloadBytes: 1000)
        whole.append(stream)
        var expected: [WebSocketFrame] = []
        while let frame = try whole.nextFrame() { expected.append(frame) }
        #expect(expected.map(\.opcode) == [.text, .ping, .continuation])

        var trickle = WebSocketFrameDecoder(maxPayloadBytes: 1000)
        var frames: [WebSocketFrame] = []
        for byte in stream {
            trickle.append([byte])
            while let frame = try trickle.nextFrame() { frames.append(frame) }
        }
        #expect(frames == expected)
        #expect(trickle.bufferedByteCount == 0)
    }

    @Test func `after refusing an oversized frame the decoder skips its payload and reads on`() throws {
        var decoder = WebSocketFrameDecoder(maxPayloadBytes: 100)
        let big = WebSocketFrameEncoder.encode(opcode: .binary, payload: patternBytes(count: 1000), maskKey: nil)
        let close = WebSocketFrameEncoder.encode(opcode: .close, payload: [0x03, 0xF1], maskKey: nil)
        decoder.append(big.prefix(10))
        #expect(throws: WebSocketProtocolViolation.tooLarge(1000)) { try decoder.nextFrame() }
        decoder.append(big.dropFirst(10))
        decoder.append(close)
        #expect(try decoder.nextFrame() == WebSocketFrame(fin: true, opcode: .close, payload: [0x03, 0xF1]))
    }

    static let violations: [(String, [UInt8], WebSocketProtocolViolation)] = [
        ("RSV1 set", [0xC1, 0x00], .reservedBitsSet),
        ("opcode 3", [0x83, 0x00], .unknownOpcode(3)),
        ("opcode 0xB", [0x8B, 0x00], .unknownOpcode(0xB)),
        ("masked server frame", [0x81, 0x80, 1, 2, 3, 4], .maskedServerFrame),
        ("fragmented ping", [0x09, 0x00], .invalidControlFrame),
        ("126-byte close", [0x88, 0x7E, 0x00, 0x7E], .invalidControlFrame),
        ("64-bit length with MSB", [0x82, 0x7F, 0x80, 0, 0, 0, 0, 0, 0, 0], .invalidLength),
        ("oversized frame, header only", [0x82, 0x7F, 0, 0, 0, 0, 0, 0x10, 0, 0], .tooLarge(1 << 20)),
    ]

    @Test(arguments: violations)
    func `protocol violations are reported as soon as the header shows them`(_ name: String, _ bytes: [UInt8], _ violation: WebSocketProtocolViolation) {
        var decoder = WebSocketFrameDecoder(maxPayloadBytes: 1000)
        decoder.append(bytes)
        #expect(throws: violation) { try decoder.nextFrame() }
    }
}

struct WebSocketHandshakeTests {
    @Test func `the accept key matches the RFC 6455 example`() {
        #expect(WebSocketHandshake.expectedAccept(for: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }

    @Test func `the request carries host with port, the key, version 13, extra headers and no origin`() throws {
        let url = try WebSocketURL(parsing: "ws://127.0.0.1:18789/gw?x=1")
        let text = String(decoding: WebSocketHandshake.request(url: url, key: "k==", headers: [("CF-Access-Client-Id", "abc")]), as: UTF8.self)
        #expect(text.hasPrefix("GET /gw?x=1 HTTP/1.1\r\nHost: 127.0.0.1:18789\r\n"))
        #expect(text.contains("\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"))
        #expect(text.contains("\r\nSec-WebSocket-Key: k==\r\nSec-WebSocket-Version: 13\r\n"))
        #expect(text.contains("\r\nCF-Access-Client-Id: abc\r\n"))
        #expect(text.hasSuffix("\r\n\r\n"))
        #expect(!text.lowercased().contains("origin"))
        let v6 = try WebSocketURL(parsing: "wss://[::1]/")
        #expect(String(decoding: WebSocketHandshake.request(url: v6, key: "k", headers: []), as: UTF8.self).contains("Host: [::1]\r\n"))
    }

    @Test func `reserved, malformed and injected request headers are refused`() throws {
        for bad in [("Origin", "x"), ("host", "x"), ("Sec-WebSocket-Protocol", "x"), ("Bad Name", "x"), ("", "x"), ("X-Ok", "a\r\nInjected: 1")] {
            #expect(WebSocketHandshake.invalidHeaderName(in: [bad]) == bad.0)
        }
        #expect(WebSocketHandshake.invalidHeaderName(in: [("X-Ok", "value; with=stuff"), ("Authorization", "Bearer t")]) == nil)
        let url = try WebSocketURL(parsing: "ws://127.0.0.1:1/")
        #expect(throws: WebSocketError.invalidHeader("Origin")) {
            try WebSocketClient(url: url, options: WebSocketClientOptions(headers: [("Origin", "http://evil")]))
        }
    }

    static func response(_ headers: [String], status: String = "101 Switching Protocols") -> [UInt8] {
        Array(("HTTP/1.1 \(status)\r\n" + headers.map { $0 + "\r\n" }.joined() + "\r\n").utf8)
    }

    @Test func `a correct 101 response is accepted and bytes after it are handed on`() {
        let key = "dGhlIHNhbXBsZSBub25jZQ=="
        let good = Self.response(["Upgrade: WebSocket", "Connection: keep-alive, Upgrade", "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="])
        #expect(WebSocketHandshake.parseResponse(good, key: key) == .accepted(leftover: []))
        #expect(WebSocketHandshake.parseResponse(good + [0x81, 0x00], key: key) == .accepted(leftover: [0x81, 0x00]))
        #expect(WebSocketHandshake.parseResponse(Array(good.dropLast()), key: key) == .incomplete)
    }

    @Test(arguments: [
        ("403 Forbidden", ["Content-Length: 0"], "403 Forbidden"),
        ("101 Switching Protocols", ["Connection: Upgrade", "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="], "Upgrade"),
        ("101 Switching Protocols", ["Upgrade: websocket", "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="], "Connection"),
        ("101 Switching Protocols", ["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Accept: AAAA"], "Sec-WebSocket-Accept"),
        ("101 Switching Protocols", ["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", "Sec-WebSocket-Extensions: permessage-deflate"], "extensions"),
    ])
    func `a refused or malformed upgrade response is rejected with what was wrong`(_ status: String, _ headers: [String], _ mention: String) {
        let outcome = WebSocketHandshake.parseResponse(Self.response(headers, status: status), key: "dGhlIHNhbXBsZSBub25jZQ==")
        guard case .rejected(let why) = outcome else {
            Issue.record("expected rejection, got \(outcome)")
            return
        }
        #expect(why.contains(mention))
    }
}

// Issue 11, item 7: a 12 MB frame left a 12 MB buffer in each connection's decoder for good.
struct WebSocketFrameDecoderMemoryTests {
    @Test func `the decoder gives back a large buffer once its frames are taken`() throws {
        var decoder = WebSocketFrameDecoder(maxPayloadBytes: 16 << 20)
        let big = WebSocketFrameEncoder.encode(opcode: .binary, payload: [UInt8](repeating: 7, count: 4 << 20), maskKey: nil)
        // In pieces, as the socket delivers it.
        var offset = 0
        var frame: WebSocketFrame?
        while offset < big.count {
            decoder.append(big[offset..<min(offset + 65_536, big.count)])
            offset += 65_536
            if let f = try decoder.nextFrame() { frame = f }
        }
        #expect(frame?.payload.count == 4 << 20)
        #expect(decoder.bufferCapacity <= WebSocketFrameDecoder.keptCapacity, "kept \(decoder.bufferCapacity) bytes")
        // Small frames keep reusing a small buffer.
        decoder.append(WebSocketFrameEncoder.encode(opcode: .text, payload: Array("hi".utf8), maskKey: nil))
        #expect(try decoder.nextFrame()?.payload == Array("hi".utf8))
    }
}
