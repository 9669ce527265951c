// The WebSocket client's service thread: it creates the lws context and the raw connection, runs
// lws_service until the connection ends, and handles every lws callback (TLS through
// TLSClientSession, RFC 6455 through WebSocketClientConnection, one queued message per
// WRITEABLE callback). Nothing here runs on any other thread.
internal import CWebsockets
internal import Foundation

extension ClientCore {

    func serviceThreadMain() {
        let protocols = ProtocolTable(callback: clientCallback, rxBufferBytes: 64 << 10)
        let strings = CStringArena()
        defer {
            tls = nil
            withExtendedLifetime(protocols) {}
            withExtendedLifetime(strings) {}
            stopped.signal()
        }

        let context: OpaquePointer
        do {
            context = try createContext(protocols: protocols)
        } catch {
            lock.lock(); phase = .finished; lock.unlock()
            emitTerminal(.failed(error))
            return
        }

        lock.lock()
        let closedBeforeConnect = closeRequest
        if closedBeforeConnect == nil { self.context = context }
        lock.unlock()

        if let request = closedBeforeConnect {
            emitTerminal(.closed(code: request.code, reason: request.reason))
        } else {
            var info = lws_client_connect_info()
            info.context = context
            info.address = strings.make(url.host)
            info.port = Int32(url.port)
            info.host = strings.make(url.host)
            info.path = strings.make(url.path)
            info.method = strings.make("RAW")  // a plain socket: framing and TLS are ours
            info.local_protocol_name = protocols.pointer[0].name
            let connecting = lws_client_connect_via_info(&info)
            // lws may already have reported CLIENT_CONNECTION_ERROR from inside that call.
            if !connectionEnded {
                if let connecting {
                    wsi = connecting
                } else {
                    connectionEnded = true
                    perform(connection.transportEnded(reason: "lws_client_connect_via_info failed for \(url)"))
                }
            }
            while !connectionEnded {
                if lws_service(context, 0) < 0 { break }
            }
        }

        lock.lock()
        self.context = nil
        phase = .finished
        lock.unlock()
        LWSRuntime.contextLock.lock()
        lws_context_destroy(context)
        LWSRuntime.contextLock.unlock()
        emitTerminal(.closed(code: nil, reason: ""))  // no-op unless lws ended without telling us
    }

    func createContext(protocols: ProtocolTable) throws(WebSocketError) -> OpaquePointer {
        try LWSRuntime.withContextLock { () throws(WebSocketError) -> OpaquePointer in
            var info = lws_context_creation_info()
            info.options = UInt64(LWS_SERVER_OPTION_EXPLICIT_VHOSTS)
            info.port = CONTEXT_PORT_NO_LISTEN
            info.protocols = UnsafePointer(protocols.pointer)
            info.user = Unmanaged.passUnretained(self).toOpaque()
            // One socket plus lws' wake-up pipe; keeps lws from sizing its fd tables for the
            // whole process limit.
            info.fd_limit_per_thread = 16
            info.connect_timeout_secs = UInt32(Self.handshakeSeconds(options.connectTimeout))
            guard let context = lws_create_context(&info) else { throw .contextCreationFailed }
            guard lws_create_vhost(context, &info) != nil else {
                lws_context_destroy(context)
                throw .contextCreationFailed
            }
            return context
        }
    }

    static func handshakeSeconds(_ duration: Duration) -> Int32 {
        Int32(clamping: max(1, wholeSeconds(duration)))
    }

    static func wholeSeconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        if seconds < 0 || (seconds == 0 && attoseconds <= 0) { return 0 }
        return Int(seconds) + (attoseconds > 0 ? 1 : 0)
    }

    /// Dispatch for every lws callback of this context. Runs on the service thread; returns
    /// non-zero to make lws close the connection. Nothing here may throw or block.
    func handle(_ wsi: OpaquePointer, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
                            _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
        switch reason {
        case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
            serviceRequests()
            return 0

        case LWS_CALLBACK_RAW_CONNECTED:
            self.wsi = wsi
            // TLS and the upgrade share the connect timeout; cleared once open.
            let seconds = Self.handshakeSeconds(options.connectTimeout)
            lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, seconds)
            handshakeDeadline = .now + .seconds(Int(seconds))
            if url.secure {
                do {
                    tls = try TLSClientSession(host: url.host, verifyWithSystemTrust: pin == nil)
                } catch {
                    lastTransportError = "TLS setup failed: \(error)"
                    return -1
                }
                advanceTLSHandshake()
            } else {
                sendUpgradeRequest()
            }
            return finishCallback(wsi)

        case LWS_CALLBACK_RAW_RX:
            guard let input, length > 0 else { return 0 }
            received(UnsafeRawBufferPointer(start: input, count: length))
            return finishCallback(wsi)

        case LWS_CALLBACK_RAW_WRITEABLE:
            writeNext(wsi)
            return finishCallback(wsi)

        case LWS_CALLBACK_TIMER:
            if let frame = connection.pingFrame() {
                queueWire(frame)
                armPingTimer(wsi)
            }
            return finishCallback(wsi)

        case LWS_CALLBACK_RAW_CLOSE:
            var reason = lastTransportError ?? "\(url.hostHeader) closed the connection before the WebSocket opened"
            if lastTransportError == nil, !isOpen, let handshakeDeadline, ContinuousClock.now >= handshakeDeadline {
                reason = "no \(url.secure ? "TLS and " : "")WebSocket handshake from \(url.hostHeader) within \(Self.handshakeSeconds(options.connectTimeout)) s"
            }
            endConnection(reason: reason)
            return 0

        case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
            let message = input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? ""
            endConnection(reason: "TCP connect to \(url.hostHeader) failed: \(message.isEmpty ? "unknown error" : message)")
            return 0

        default:
            return lws_callback_http_dummy(wsi, reason, user, input, length)
        }
    }

    /// Asks for a WRITEABLE callback if bytes wait, and turns an abort into a close.
    func finishCallback(_ wsi: OpaquePointer) -> Int32 {
        if abortRequested { return -1 }
        if !pendingWire.isEmpty || hasQueuedWork() { lws_callback_on_writable(wsi) }
        return 0
    }

    func hasQueuedWork() -> Bool {
        guard isOpen, !closeStarted else { return false }
        lock.lock()
        defer { lock.unlock() }
        return !outbox.isEmpty || closeRequest != nil
    }

    /// After lws_cancel_service: write queued messages, start a close, or abandon a
    /// connection attempt that has not opened yet.
    func serviceRequests() {
        guard let wsi, !connectionEnded else { return }
        lock.lock()
        let request = closeRequest
        lock.unlock()
        if !isOpen, let request, !closeStarted {
            closeStarted = true
            perform(connection.close(code: request.code, reason: request.reason))
        }
        if abortRequested {
            lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
        } else if !pendingWire.isEmpty || hasQueuedWork() {
            lws_callback_on_writable(wsi)
        }
    }

    func received(_ bytes: UnsafeRawBufferPointer) {
        guard let tls else {
            perform(connection.receive(Array(bytes)))
            return
        }
        tls.receive(ciphertext: bytes)
        if !tls.isEstablished {
            advanceTLSHandshake()
            guard tls.isEstablished, !abortRequested else { return }
        }
        switch tls.readPlaintext() {
        case .data(let plaintext):
            if !plaintext.isEmpty { perform(connection.receive(plaintext)) }
        case .ended(let plaintext, let why):
            if !plaintext.isEmpty { perform(connection.receive(plaintext)) }
            lastTransportError = why
            if !connectionEnded { abortRequested = true }
        }
        flushTLS()
    }

    /// Drives the TLS handshake; once complete, checks the pin and sends the upgrade request.
    func advanceTLSHandshake() {
        guard let tls else { return }
        switch tls.continueHandshake() {
        case .inProgress:
            flushTLS()
        case .failed(let why):
            if pin == nil, let reason = tls.verificationFailure {
                // Say which certificate it was, so the user can check it and pin it.
                flushTLS()
                closeStarted = true
                perform([.emit(.failed(.untrustedCertificate(host: url.hostHeader, reason: reason, sha256: tls.peerLeafSHA256)))])
                abortRequested = true
                return
            }
            lastTransportError = "TLS handshake with \(url.hostHeader) failed: \(why)"
            flushTLS()
            abortRequested = true
        case .complete:
            flushTLS()
            if pin == nil, let reason = tls.verificationFailure {
                // Refused before a single application byte, naming the certificate so it can be pinned.
                closeStarted = true
                perform([.emit(.failed(.untrustedCertificate(host: url.hostHeader, reason: reason, sha256: tls.peerLeafSHA256)))])
                abortRequested = true
                return
            }
            if let pin {
                let actual = tls.peerLeafSHA256 ?? "(no certificate)"
                guard actual == pin else {
                    // Refused before a single application byte (the upgrade request) is sent.
                    closeStarted = true
                    perform([.emit(.failed(.tlsPinMismatch(expected: pin, actual: actual)))])
                    abortRequested = true
                    return
                }
            }
            sendUpgradeRequest()
        }
    }

    func sendUpgradeRequest() {
        guard !upgradeSent else { return }
        upgradeSent = true
        queueWire(connection.handshakeRequest(headers: options.headers))
    }

    /// Application bytes for the socket: encrypted first when TLS is in use.
    func queueWire(_ bytes: [UInt8]) {
        guard let tls else {
            pendingWire.append(contentsOf: bytes)
            return
        }
        if let why = tls.write(plaintext: bytes) {
            lastTransportError = why
            abortRequested = true
        }
        flushTLS()
    }

    func flushTLS() {
        guard let tls else { return }
        let ciphertext = tls.takeCiphertext()
        if !ciphertext.isEmpty { pendingWire.append(contentsOf: ciphertext) }
    }

    /// Carries out the state machine's actions.
    func perform(_ actions: [WebSocketClientConnection<SystemRandomNumberGenerator>.Action]) {
        for action in actions {
            switch action {
            case .write(let bytes):
                queueWire(bytes)
            case .emit(let event):
                switch event {
                case .closed, .failed: emitTerminal(event)
                default: deliver(event, false)
                }
            case .opened:
                isOpen = true
                if let wsi {
                    lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0)
                    armPingTimer(wsi)
                }
            case .awaitPeerClose:
                closeStarted = true
                if let wsi { lws_set_timeout(wsi, PENDING_TIMEOUT_CLOSE_ACK, Self.closeAckSeconds) }
            case .closeTransport:
                closeStarted = true
                tls?.shutdown()
                flushTLS()
                if let wsi { lws_set_timeout(wsi, PENDING_TIMEOUT_CLOSE_ACK, Self.tcpCloseAfterHandshakeSeconds) }
            case .abortTransport:
                closeStarted = true
                abortRequested = true
            }
        }
    }

    func armPingTimer(_ wsi: OpaquePointer) {
        let seconds = Self.wholeSeconds(options.pingInterval)
        guard seconds > 0 else { return }
        lws_set_timer_usecs(wsi, lws_usec_t(seconds) * 1_000_000)
    }

    /// One message (or the close frame) per WRITEABLE callback; lws calls back again only
    /// once it has flushed what it buffered, which keeps memory bounded by one message.
    func writeNext(_ wsi: OpaquePointer) {
        if pendingWire.isEmpty && isOpen && !closeStarted {
            lock.lock()
            let next = outbox.isEmpty ? nil : outbox.removeFirst()
            let close = next == nil ? closeRequest : nil
            lock.unlock()
            if let next, let frame = connection.frame(for: next) {
                queueWire(frame)
            } else if let close {
                perform(connection.close(code: close.code, reason: close.reason))
            }
        }
        guard !pendingWire.isEmpty else { return }
        let pre = Int(cv_lws_pre())
        var buffer = [UInt8](repeating: 0, count: pre + pendingWire.count)
        buffer.replaceSubrange(pre..., with: pendingWire)
        let count = pendingWire.count
        pendingWire.removeAll(keepingCapacity: false)
        let written = buffer.withUnsafeMutableBufferPointer { cv_lws_write_raw(wsi, $0.baseAddress! + pre, count) }
        if Int(written) < count {
            lastTransportError = "lws_write failed"
            abortRequested = true
        }
    }

    func endConnection(reason: String) {
        guard !connectionEnded else { return }
        connectionEnded = true
        wsi = nil
        perform(connection.transportEnded(reason: reason))
    }
}


/// The C entry point for the client's lws protocol: finds the ClientCore through the context
/// user pointer and hands over.
private let clientCallback: LWSCallback = { wsi, reason, user, input, length in
    guard let wsi, let context = lws_get_context(wsi), let owner = lws_context_user(context) else {
        return lws_callback_http_dummy(wsi, reason, user, input, length)
    }
    let core = Unmanaged<ClientCore>.fromOpaque(owner).takeUnretainedValue()
    return core.handle(wsi, reason, user, input, length)
}

