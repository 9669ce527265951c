// RFC 6455 framing for the client side, as values: an encoder and an incremental decoder.
// No I/O, no clocks, no C. The client uses these instead of the lws ws client because lws
// 4.1.6 rewrites received close codes 1012...2999 to 1002 (so a gateway's 1012 "service
// restart" would read as "protocol error"); see WebSocketClientConnection.

/// Frame opcodes (RFC 6455 §5.2).
enum WebSocketOpcode: UInt8, Sendable {
    case continuation = 0x0
    case text = 0x1
    case binary = 0x2
    case close = 0x8
    case ping = 0x9
    case pong = 0xA

    var isControl: Bool { rawValue & 0x8 != 0 }
}

/// One decoded frame; the payload is unmasked.
struct WebSocketFrame: Equatable, Sendable {
    var fin: Bool
    var opcode: WebSocketOpcode
    var payload: [UInt8]
}

/// Ways a peer can break RFC 6455; each maps to the close code we answer with.
enum WebSocketProtocolViolation: Error, Equatable, Sendable {
    /// RSV bits set although no extension was negotiated.
    case reservedBitsSet
    /// Opcode 3-7 or B-F.
    case unknownOpcode(UInt8)
    /// A server frame with the mask bit set (servers must not mask).
    case maskedServerFrame
    /// A control frame that is fragmented or longer than 125 bytes.
    case invalidControlFrame
    /// A 64-bit length with the most significant bit set.
    case invalidLength
    /// A continuation without a message in progress, or a new message inside one.
    case unexpectedContinuation
    case expectedContinuation
    /// A close frame with a 1-byte payload or a code that may not be sent.
    case invalidClosePayload
    /// A text message or close reason that is not UTF-8 (answered with 1007).
    case invalidUTF8
    /// A frame (or the message it belongs to) larger than the limit; the payload is its size.
    case tooLarge(Int)

    /// The close code to send in reply (RFC 6455 §7.4.1).
    var closeCode: Int {
        switch self {
        case .invalidUTF8: 1007
        case .tooLarge: 1009
        default: 1002
        }
    }

    var description: String {
        switch self {
        case .reservedBitsSet: "frame with reserved bits set"
        case .unknownOpcode(let op): "frame with unknown opcode \(op)"
        case .maskedServerFrame: "masked frame from the server"
        case .invalidControlFrame: "fragmented or oversized control frame"
        case .invalidLength: "invalid 64-bit payload length"
        case .unexpectedContinuation: "continuation frame without a message in progress"
        case .expectedContinuation: "new data frame while a fragmented message is in progress"
        case .invalidClosePayload: "invalid close frame payload"
        case .invalidUTF8: "text that is not valid UTF-8"
        case .tooLarge(let bytes): "message of at least \(bytes) bytes"
        }
    }
}

enum WebSocketFrameEncoder {
    /// Encodes one frame. A client passes a `maskKey` (RFC 6455 requires client frames to be
    /// masked with a fresh random key); a server passes nil.
    static func encode(opcode: WebSocketOpcode, payload: [UInt8], fin: Bool = true, maskKey: UInt32?) -> [UInt8] {
        var frame: [UInt8] = []
        frame.reserveCapacity(payload.count + 14)
        frame.append((fin ? 0x80 : 0) | opcode.rawValue)
        let maskBit: UInt8 = maskKey == nil ? 0 : 0x80
        switch payload.count {
        case 0..<126:
            frame.append(maskBit | UInt8(payload.count))
        case 126...0xFFFF:
            frame.append(maskBit | 126)
            frame.append(UInt8(payload.count >> 8))
            frame.append(UInt8(payload.count & 0xFF))
        default:
            frame.append(maskBit | 127)
            for shift in stride(from: 56, through: 0, by: -8) { frame.append(UInt8(truncatingIfNeeded: UInt64(payload.count) >> UInt64(shift))) }
        }
        guard let maskKey else {
            frame.append(contentsOf: payload)
            return frame
        }
        let key: [UInt8] = [UInt8(maskKey >> 24), UInt8((maskKey >> 16) & 0xFF), UInt8((maskKey >> 8) & 0xFF), UInt8(maskKey & 0xFF)]
        frame.append(contentsOf: key)
        let start = frame.count
        frame.append(contentsOf: payload)
        frame.withUnsafeMutableBufferPointer { buffer in
            applyMask(key, to: UnsafeMutableBufferPointer(rebasing: buffer[start...]))
        }
        return frame
    }

    /// XORs `bytes` with the 4-byte key, repeating; masking and unmasking are the same
    /// operation. Works a machine word at a time because payloads reach megabytes.
    static func applyMask(_ key: [UInt8], to bytes: UnsafeMutableBufferPointer<UInt8>) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        var word: UInt64 = 0
        withUnsafeMutableBytes(of: &word) { w in for i in 0..<8 { w[i] = key[i & 3] } }
        let raw = UnsafeMutableRawPointer(base)
        let words = bytes.count / 8
        for i in 0..<words {
            let value = raw.loadUnaligned(fromByteOffset: i * 8, as: UInt64.self)
            raw.storeBytes(of: value ^ word, toByteOffset: i * 8, as: UInt64.self)
        }
        for i in (words * 8)..<bytes.count { base[i] ^= key[i & 3] }
    }
}

/// Reassembles frames from a byte stream that arrives in arbitrary pieces.
///
/// The limit is checked as soon as a frame header is complete, so an oversized frame is
/// refused before its payload is buffered.
struct WebSocketFrameDecoder {
    /// Largest payload accepted for one frame, in bytes.
    var maxPayloadBytes: Int
    private var buffer: [UInt8] = []
    private var cursor = 0
    /// Bytes of a refused (oversized) frame still to be thrown away as they arrive, so the
    /// frames after it (the peer's close) can still be read.
    private var skipBytes = 0

    init(maxPayloadBytes: Int) { self.maxPayloadBytes = maxPayloadBytes }

    /// Buffer storage kept between messages; more than this is released once it is empty.
    static let keptCapacity = 256 << 10

    /// The buffer's current storage, for the test that it is given back.
    var bufferCapacity: Int { buffer.capacity }

    mutating func append<C: Collection<UInt8>>(_ bytes: C) {
        // Drop what has been consumed before growing, so the buffer stays one message long.
        if cursor > 0 && cursor == buffer.count {
            releaseConsumed()
        } else if cursor >= 1 << 16 {
            buffer.removeFirst(cursor)
            cursor = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// Everything buffered was returned: after a large message give its storage back instead of
    /// keeping a multi-megabyte buffer per connection for good.
    private mutating func releaseConsumed() {
        if buffer.capacity > Self.keptCapacity { buffer = [] } else { buffer.removeAll(keepingCapacity: true) }
        cursor = 0
    }

    /// Bytes buffered but not yet returned as frames.
    var bufferedByteCount: Int { buffer.count - cursor }

    /// The next complete frame, nil if more bytes are needed.
    mutating func nextFrame() throws(WebSocketProtocolViolation) -> WebSocketFrame? {
        if skipBytes > 0 {
            let drop = min(skipBytes, buffer.count - cursor)
            cursor += drop
            skipBytes -= drop
            if skipBytes > 0 { return nil }
        }
        let available = buffer.count - cursor
        guard available >= 2 else { return nil }
        let b0 = buffer[cursor], b1 = buffer[cursor + 1]
        guard b0 & 0x70 == 0 else { throw .reservedBitsSet }
        guard let opcode = WebSocketOpcode(rawValue: b0 & 0x0F) else { throw .unknownOpcode(b0 & 0x0F) }
        let fin = b0 & 0x80 != 0
        let masked = b1 & 0x80 != 0
        if masked { throw .maskedServerFrame }
        var headerLength = 2
        var length = UInt64(b1 & 0x7F)
        if length == 126 {
            guard available >= 4 else { return nil }
            length = UInt64(buffer[cursor + 2]) << 8 | UInt64(buffer[cursor + 3])
            headerLength = 4
        } else if length == 127 {
            guard available >= 10 else { return nil }
            length = 0
            for i in 0..<8 { length = length << 8 | UInt64(buffer[cursor + 2 + i]) }
            guard length & (1 << 63) == 0 else { throw .invalidLength }
            headerLength = 10
        }
        if opcode.isControl && (!fin || length > 125) { throw .invalidControlFrame }
        guard length <= UInt64(maxPayloadBytes) else {
            cursor += headerLength
            skipBytes = Int(clamping: length)
            throw .tooLarge(Int(clamping: length))
        }
        let total = headerLength + Int(length)
        guard available >= total else { return nil }
        let payload = Array(buffer[(cursor + headerLength)..<(cursor + total)])
        cursor += total
        if cursor == buffer.count { releaseConsumed() }
        return WebSocketFrame(fin: fin, opcode: opcode, payload: payload)
    }
}
