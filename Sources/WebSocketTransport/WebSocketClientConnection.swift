// The client side of RFC 6455 as a state machine: bytes and commands in, actions out (bytes
// to write, events to report, when to end the transport). No I/O, no clocks, no C: the
// owner (ClientCore) carries the actions out on its service thread, and tests drive it
// with byte fixtures.
//
// Why not the lws ws client: libwebsockets 4.1.6 replaces any received close code below
// 1000, 1004...1006 or 1012...2999 by 1002 before the user callback sees it, so the
// gateway's 1012 "service restart" and 1013 "try again later" would both arrive as 1002,
// "protocol error", the code the gateway uses for a protocol mismatch.

struct WebSocketClientConnection<Random: RandomNumberGenerator> {
    /// What the owner must do, in order.
    enum Action: Equatable {
        /// Write these bytes to the transport (after any earlier writes).
        case write([UInt8])
        /// Report this event (`.closed`/`.failed` appear at most once, last).
        case emit(WebSocketEvent)
        /// The opening handshake is done: stop the handshake timeout, start pinging.
        case opened
        /// We sent a close frame: end the transport if the peer has not closed it in time.
        case awaitPeerClose
        /// The close handshake is complete: end the transport once writes are flushed
        /// (RFC 6455 lets the server close TCP first; the owner waits briefly for that).
        case closeTransport
        /// Something is wrong: end the transport now.
        case abortTransport
    }

    enum State: Equatable {
        /// Request sent (or about to be); collecting the response header.
        case handshaking
        case open
        /// We sent a close frame with this code and reason; waiting for the peer's.
        case closing(code: Int, reason: String)
        /// Nothing more will be sent or delivered.
        case closed
    }

    let url: WebSocketURL
    let maxMessageBytes: Int
    let key: String
    private(set) var state = State.handshaking
    private var random: Random
    private var responseBuffer: [UInt8] = []
    private var decoder: WebSocketFrameDecoder
    private var message: (opcode: WebSocketOpcode, bytes: [UInt8])?
    private var terminalEmitted = false
    /// After refusing an oversized message: later data frames are dropped unread, control
    /// frames (the peer's close) still count.
    private var discardingData = false
    /// After any other violation the byte stream can no longer be trusted: input is ignored
    /// until the transport ends.
    private var poisoned = false

    init(url: WebSocketURL, maxMessageBytes: Int, random: Random) {
        self.url = url
        self.maxMessageBytes = max(0, maxMessageBytes)
        self.random = random
        key = WebSocketHandshake.makeKey(using: &self.random)
        decoder = WebSocketFrameDecoder(maxPayloadBytes: self.maxMessageBytes)
    }

    /// The Upgrade request to send once the transport (and TLS) is up.
    func handshakeRequest(headers: [(name: String, value: String)]) -> [UInt8] {
        WebSocketHandshake.request(url: url, key: key, headers: headers)
    }

    // MARK: Input from the transport

    mutating func receive(_ bytes: [UInt8]) -> [Action] {
        switch state {
        case .closed:
            return []
        case .handshaking:
            responseBuffer.append(contentsOf: bytes)
            switch WebSocketHandshake.parseResponse(responseBuffer, key: key) {
            case .incomplete:
                return []
            case .rejected(let why):
                state = .closed
                return terminal(.failed(.connectFailed("WebSocket upgrade to \(url) refused: \(why)"))) + [.abortTransport]
            case .accepted(let leftover):
                responseBuffer = []
                state = .open
                var actions: [Action] = [.opened, .emit(.opened)]
                if !leftover.isEmpty { actions += receiveFrames(leftover) }
                return actions
            }
        case .open, .closing:
            return receiveFrames(bytes)
        }
    }

    /// The transport ended (TCP closed, TLS failed, or a timeout we asked for fired).
    mutating func transportEnded(reason: String) -> [Action] {
        let previous = state
        state = .closed
        switch previous {
        case .handshaking:
            return terminal(.failed(.connectFailed(reason)))
        case .open:
            return terminal(.closed(code: nil, reason: ""))  // no close frame: 1006
        case .closing(let code, let reason):
            return terminal(.closed(code: code, reason: reason))
        case .closed:
            return terminal(.closed(code: nil, reason: ""))  // no-op if already reported
        }
    }

    // MARK: Commands from the owner

    /// The frame for one outgoing message, or nil if the connection is not open.
    mutating func frame(for outgoing: WebSocketMessage) -> [UInt8]? {
        guard state == .open else { return nil }
        switch outgoing {
        case .text(let text): return encode(.text, Array(text.utf8))
        case .binary(let bytes): return encode(.binary, bytes)
        }
    }

    /// A ping frame, or nil if not open.
    mutating func pingFrame() -> [UInt8]? {
        guard state == .open else { return nil }
        return encode(.ping, [])
    }

    /// Starts the closing handshake (or, while still handshaking, gives up the attempt).
    mutating func close(code: Int, reason: String) -> [Action] {
        switch state {
        case .handshaking:
            state = .closed
            return terminal(.closed(code: code, reason: reason)) + [.abortTransport]
        case .open:
            let payload = Self.closePayload(code: code, reason: reason)
            state = .closing(code: code, reason: String(decoding: payload.dropFirst(2), as: UTF8.self))
            return [.write(encode(.close, payload)), .awaitPeerClose]
        case .closing, .closed:
            return []
        }
    }

    // MARK: Frames

    private mutating func receiveFrames(_ bytes: [UInt8]) -> [Action] {
        guard !poisoned else { return [] }
        decoder.append(bytes)
        var actions: [Action] = []
        while state != .closed {
            let frame: WebSocketFrame?
            do {
                frame = try decoder.nextFrame()
            } catch {
                let violation: WebSocketProtocolViolation
                if case .tooLarge(let frameBytes) = error {
                    violation = .tooLarge(frameBytes + (message?.bytes.count ?? 0))
                } else {
                    violation = error
                }
                return actions + fail(violation)
            }
            guard let frame else { break }
            actions += handle(frame)
            if poisoned { break }
        }
        return actions
    }

    private mutating func handle(_ frame: WebSocketFrame) -> [Action] {
        if discardingData && !frame.opcode.isControl { return [] }
        switch frame.opcode {
        case .ping:
            // Answer while open; after our close frame nothing more may be sent but its ack.
            guard state == .open else { return [] }
            return [.write(encode(.pong, frame.payload))]
        case .pong:
            return []
        case .close:
            return peerClosed(frame.payload)
        case .text, .binary:
            guard message == nil else { return fail(.expectedContinuation) }
            message = (frame.opcode, [])
            return appendFragment(frame)
        case .continuation:
            guard message != nil else { return fail(.unexpectedContinuation) }
            return appendFragment(frame)
        }
    }

    private mutating func appendFragment(_ frame: WebSocketFrame) -> [Action] {
        guard var current = message else { return [] }
        let total = current.bytes.count + frame.payload.count
        if total > maxMessageBytes { return fail(.tooLarge(total)) }
        current.bytes.append(contentsOf: frame.payload)
        guard frame.fin else {
            message = current
            return []
        }
        message = nil
        // Messages that arrive after we sent our close frame are still the peer's to deliver.
        if current.opcode == .binary { return [.emit(.message(.binary(current.bytes)))] }
        guard let text = String(validating: current.bytes, as: UTF8.self) else { return fail(.invalidUTF8) }
        return [.emit(.message(.text(text)))]
    }

    private mutating func peerClosed(_ payload: [UInt8]) -> [Action] {
        var code: Int?
        var reason = ""
        if payload.count == 1 { return fail(.invalidClosePayload) }
        if payload.count >= 2 {
            let value = Int(payload[0]) << 8 | Int(payload[1])
            guard Self.isValidReceivedCloseCode(value) else { return fail(.invalidClosePayload) }
            guard let text = String(validating: payload[2...], as: UTF8.self) else { return fail(.invalidUTF8) }
            code = value
            reason = text
        }
        switch state {
        case .open:
            // Echo the code (RFC 6455 §5.5.1), report the peer's, then let the server close TCP.
            state = .closed
            let echo = code.map { Self.closePayload(code: $0, reason: "") } ?? []
            return [.write(encode(.close, echo))] + terminal(.closed(code: code, reason: reason)) + [.closeTransport]
        case .closing(let sentCode, let sentReason):
            state = .closed
            return terminal(.closed(code: sentCode, reason: sentReason)) + [.closeTransport]
        case .handshaking, .closed:
            return []
        }
    }

    /// Closes with the violation's code and reports it as the terminal event.
    private mutating func fail(_ violation: WebSocketProtocolViolation) -> [Action] {
        let error: WebSocketError
        if case .tooLarge(let bytes) = violation {
            error = .messageTooLarge(bytes)
        } else {
            error = .protocolViolation(violation.description)
        }
        message = nil
        if case .tooLarge = violation { discardingData = true } else { poisoned = true }
        switch state {
        case .open:
            let reason = violation.closeCode == 1009 ? "message too large" : "protocol error"
            let payload = Self.closePayload(code: violation.closeCode, reason: reason)
            state = .closing(code: violation.closeCode, reason: reason)
            return [.write(encode(.close, payload))] + terminal(.failed(error)) + [.awaitPeerClose]
        case .closing:
            // Our close frame is already out; keep waiting for the peer's (or the timeout).
            return terminal(.failed(error))
        case .handshaking, .closed:
            state = .closed
            return terminal(.failed(error)) + [.abortTransport]
        }
    }

    private mutating func terminal(_ event: WebSocketEvent) -> [Action] {
        guard !terminalEmitted else { return [] }
        terminalEmitted = true
        return [.emit(event)]
    }

    private mutating func encode(_ opcode: WebSocketOpcode, _ payload: [UInt8]) -> [UInt8] {
        WebSocketFrameEncoder.encode(opcode: opcode, payload: payload, maskKey: random.next() as UInt32)
    }

    /// Code (big-endian) plus reason cut to 123 bytes on a character boundary (a control
    /// frame carries at most 125 bytes).
    static func closePayload(code: Int, reason: String) -> [UInt8] {
        var bytes = Array(reason.utf8)
        if bytes.count > 123 {
            var cut = 123
            while cut > 0 && (bytes[cut] & 0xC0) == 0x80 { cut -= 1 }
            bytes = Array(bytes[..<cut])
        }
        let clamped = UInt16(clamping: code)
        return [UInt8(clamped >> 8), UInt8(clamped & 0xFF)] + bytes
    }

    /// Codes a peer may put on the wire (RFC 6455 §7.4, IANA registry): 1000-1003,
    /// 1007-1014 registered, 1015 excluded (TLS failure, never sent), 3000-4999 for
    /// libraries and applications.
    static func isValidReceivedCloseCode(_ code: Int) -> Bool {
        switch code {
        case 1000...1003, 1007...1014, 3000...4999: true
        default: false
        }
    }
}
