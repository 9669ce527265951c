// One request out, one response back, over TCP or TLS, within one deadline: the blocking edge
// for short HTTP exchanges (the realtime call's SDP offer POST). TLS is TLSClientSession, the
// WebSocket client's own, so the trust is the same: with a pin, the leaf's SHA-256 must match;
// without one, the system CAs and the host name. Nothing is written before that check passes.
// A non-blocking socket and poll(2) keep every step (connect, handshake, write, read) inside the
// one deadline. The caller runs it on a thread of its own (it blocks).

#if canImport(Glibc)
internal import Glibc
#endif

/// Why a ``ByteExchange`` failed. Descriptions are one line; the caller adds the fix.
public enum ByteExchangeError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The pin is not 64 hex digits (after dropping a `sha256:` prefix and colons).
    case invalidPin(String)
    case unresolved(host: String, detail: String)
    case unreachable(host: String, port: Int, detail: String)
    /// The deadline passed during `step` ("connecting", "the TLS handshake", "sending", "the response").
    case timedOut(step: String, seconds: Int)
    /// The TLS handshake failed (OpenSSL's words).
    case tlsFailed(String)
    /// No pin, and the chain or host name did not verify; `sha256` is the leaf's fingerprint.
    case untrustedCertificate(host: String, reason: String, sha256: String?)
    case tlsPinMismatch(expected: String, actual: String)
    /// A socket or TLS read/write failed, or the connection ended before the response was complete.
    case ioFailed(String)
    case responseTooLarge(limit: Int)

    public var description: String {
        switch self {
        case .invalidPin(let pin): "invalid TLS pin \"\(pin)\": expected 64 hex digits (SHA-256 of the leaf certificate)"
        case .unresolved(let host, let detail): "cannot resolve \(host): \(detail)"
        case .unreachable(let host, let port, let detail): "cannot reach \(host):\(port): \(detail)"
        case .timedOut(let step, let seconds): "no progress within \(seconds) s (\(step))"
        case .tlsFailed(let why): "TLS handshake failed: \(why)"
        case .untrustedCertificate(let host, let reason, let sha256):
            "TLS certificate of \(host) is not trusted (\(reason))" + (sha256.map { "; its SHA-256 fingerprint is \($0)" } ?? "")
        case .tlsPinMismatch(let expected, let actual): "TLS certificate pin mismatch: expected sha256 \(expected), server presented \(actual)"
        case .ioFailed(let why): why
        case .responseTooLarge(let limit): "the response is over \(limit) bytes"
        }
    }
}

public enum ByteExchange {
    /// How the connection is secured: plain TCP, or TLS trusted by the system CAs + host name,
    /// or TLS trusted by the leaf certificate's SHA-256 fingerprint alone.
    public enum Security: Sendable, Equatable {
        case plain
        case tls(pinSHA256: String?)
    }

    /// Connects, sends `request`, and reads until the server closes or `isComplete` says the
    /// response is whole. Blocks the calling thread for at most about `timeout` (DNS aside).
    public static func run(host: String, port: Int, security: Security, request: [UInt8], timeout: Duration,
                           maxResponseBytes: Int, isComplete: ([UInt8]) -> Bool = { _ in false }) throws(ByteExchangeError) -> [UInt8] {
        var pin: String?
        if case .tls(let raw?) = security {
            guard let normalized = TLSCertificateFingerprint.normalize(raw) else { throw .invalidPin(raw) }
            pin = normalized
        }
        let seconds = max(1, Int(timeout.components.seconds))
        let socket = try Socket.connect(host: host, port: port, deadline: .now + timeout, seconds: seconds)
        defer { socket.close() }
        guard case .tls = security else {
            try socket.sendAll(request)
            var out: [UInt8] = []
            while true {
                let chunk = try socket.receive(step: "the response")
                if chunk.isEmpty { return out }
                out += chunk
                if out.count > maxResponseBytes { throw .responseTooLarge(limit: maxResponseBytes) }
                if isComplete(out) { return out }
            }
        }

        let bare = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        let tls: TLSClientSession
        do { tls = try TLSClientSession(host: bare, verifyWithSystemTrust: pin == nil) } catch { throw .tlsFailed(error.description) }
        handshake: while true {
            switch tls.continueHandshake() {
            case .complete: try socket.sendAll(tls.takeCiphertext()); break handshake
            case .failed(let why): throw .tlsFailed(why)
            case .inProgress:
                try socket.sendAll(tls.takeCiphertext())
                let chunk = try socket.receive(step: "the TLS handshake")
                if chunk.isEmpty { throw .tlsFailed("the server closed the connection during the handshake") }
                chunk.withUnsafeBytes { tls.receive(ciphertext: $0) }
            }
        }
        // The same check as the WebSocket client's, before a single application byte.
        if let pin {
            let actual = tls.peerLeafSHA256 ?? "(no certificate)"
            guard actual == pin else { throw .tlsPinMismatch(expected: pin, actual: actual) }
        } else if let reason = tls.verificationFailure {
            throw .untrustedCertificate(host: host, reason: reason, sha256: tls.peerLeafSHA256)
        }
        if let why = tls.write(plaintext: request) { throw .ioFailed(why) }
        try socket.sendAll(tls.takeCiphertext())
        var out: [UInt8] = []
        while true {
            let chunk = try socket.receive(step: "the response")
            if chunk.isEmpty {
                // No close_notify: whole only if the response says so (Content-Length).
                if isComplete(out) { return out }
                throw .ioFailed("the connection ended before the response was complete")
            }
            chunk.withUnsafeBytes { tls.receive(ciphertext: $0) }
            let ended: String?
            switch tls.readPlaintext() {
            case .data(let bytes): out += bytes; ended = nil
            case .ended(let bytes, let why): out += bytes; ended = why
            }
            if out.count > maxResponseBytes { throw .responseTooLarge(limit: maxResponseBytes) }
            if isComplete(out) { return out }
            if let ended {
                if ended == TLSClientSession.closeNotify { return out }  // a clean end: the response is what came
                throw .ioFailed(ended)
            }
            try socket.sendAll(tls.takeCiphertext())  // a key update's answer, if any
        }
    }
}

/// A non-blocking TCP socket whose every wait is bounded by one deadline.
private struct Socket {
    let fd: Int32
    let deadline: ContinuousClock.Instant
    let seconds: Int

    static func connect(host: String, port: Int, deadline: ContinuousClock.Instant, seconds: Int) throws(ByteExchangeError) -> Socket {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let bare = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        let rc = getaddrinfo(bare, String(port), &hints, &list)
        guard rc == 0, list != nil else { throw .unresolved(host: host, detail: String(cString: gai_strerror(rc))) }
        defer { freeaddrinfo(list) }
        var lastError = "no address"
        var entry = list
        while let a = entry {  // each address in turn, as a browser would
            entry = a.pointee.ai_next
            let fd = Glibc.socket(a.pointee.ai_family, a.pointee.ai_socktype | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue),
                                  a.pointee.ai_protocol)
            guard fd >= 0 else { lastError = String(cString: strerror(errno)); continue }
            let s = Socket(fd: fd, deadline: deadline, seconds: seconds)
            if Glibc.connect(fd, a.pointee.ai_addr, a.pointee.ai_addrlen) == 0 { return s }
            guard errno == EINPROGRESS else { lastError = String(cString: strerror(errno)); s.close(); continue }
            do { try s.wait(for: Int16(POLLOUT), step: "connecting") } catch { s.close(); throw error }
            var err: Int32 = 0
            var len = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len)
            if err == 0 { return s }
            lastError = String(cString: strerror(err))
            s.close()
        }
        throw .unreachable(host: host, port: port, detail: lastError)
    }

    func close() { _ = Glibc.close(fd) }

    /// Waits until the socket is ready for `events` or the deadline passes.
    func wait(for events: Int16, step: String) throws(ByteExchangeError) {
        while true {
            let left = deadline - .now
            let ms = left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000
            guard ms > 0 else { throw .timedOut(step: step, seconds: seconds) }
            var p = pollfd(fd: fd, events: events, revents: 0)
            let n = poll(&p, 1, Int32(clamping: ms))
            if n > 0 { return }
            if n < 0 && errno != EINTR { throw .ioFailed("poll: \(String(cString: strerror(errno)))") }
        }
    }

    func sendAll(_ bytes: [UInt8]) throws(ByteExchangeError) {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n > 0 { sent += n; continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
                try wait(for: Int16(POLLOUT), step: "sending")
                continue
            }
            throw .ioFailed("sending failed: \(String(cString: strerror(errno)))")
        }
    }

    /// The next bytes that arrive; empty when the peer closed.
    func receive(step: String) throws(ByteExchangeError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n >= 0 { return Array(buffer[..<n]) }
            if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR {
                try wait(for: Int16(POLLIN), step: step)
                continue
            }
            throw .ioFailed("reading failed: \(String(cString: strerror(errno)))")
        }
    }
}
