// The WebSocket client: per WebSocketClient one libwebsockets context, one raw TCP connection
// and one service thread. lws moves bytes (DNS, connect, poll, timers); TLSClientSession does
// TLS and WebSocketClientConnection does RFC 6455. All lws calls except lws_cancel_service
// happen on the service thread.
internal import CWebsockets
internal import Foundation

/// How a ``WebSocketClient`` connects. Every field has a default that suits the gateway.
public struct WebSocketClientOptions: Sendable {
    /// SHA-256 of the server's leaf certificate DER, 64 hex digits (a `sha256:` prefix and
    /// colons are accepted). When set on a `wss://` URL the certificate may be self-signed,
    /// expired or for another host name, but the leaf must match or the connection fails
    /// with ``WebSocketError/tlsPinMismatch(expected:actual:)`` before any request header or
    /// message is exchanged. When nil, normal verification against the system CAs and the
    /// URL's host name applies. Ignored for `ws://`.
    public var tlsPinSHA256: String?
    /// Permits `ws://` (no TLS) to hosts that are not loopback.
    public var allowInsecureRemote: Bool = false
    /// The largest message accepted, in bytes; a bigger one closes the connection with 1009
    /// and ends the stream with ``WebSocketError/messageTooLarge(_:)``. Default 16 MiB.
    public var maxMessageBytes: Int = 16 << 20
    /// Time between WebSocket pings while open (NAT keepalive), rounded up to whole seconds;
    /// zero disables them. Pongs are not awaited and a missing one never closes the
    /// connection: deciding that a peer is dead is the protocol layer's job (tick timeout).
    public var pingInterval: Duration = .seconds(15)
    /// Limit for the TCP connect, and again for the TLS and WebSocket handshakes after it;
    /// rounded up to whole seconds.
    public var connectTimeout: Duration = .seconds(10)
    /// Extra request headers for the opening handshake (never `Origin`: the gateway applies
    /// its browser-origin allowlist to any request that carries one).
    public var headers: [(name: String, value: String)] = []

    public init(
        tlsPinSHA256: String? = nil,
        allowInsecureRemote: Bool = false,
        maxMessageBytes: Int = 16 << 20,
        pingInterval: Duration = .seconds(15),
        connectTimeout: Duration = .seconds(10),
        headers: [(name: String, value: String)] = []
    ) {
        self.tlsPinSHA256 = tlsPinSHA256
        self.allowInsecureRemote = allowInsecureRemote
        self.maxMessageBytes = maxMessageBytes
        self.pingInterval = pingInterval
        self.connectTimeout = connectTimeout
        self.headers = headers
    }
}

/// One WebSocket connection to a server.
///
/// Create it, start iterating ``events``, call ``connect()``; ``send(_:)`` and ``close(code:reason:)``
/// may be called from any thread at any time (sends before `.opened` are queued, sends after
/// close are dropped). A client connects once; make a new one to reconnect. Releasing the
/// client closes the connection with 1001 if it is still open.
public final class WebSocketClient: Sendable {
    public let url: WebSocketURL
    public let options: WebSocketClientOptions
    /// `.opened` at most once, then messages, then one `.closed` or `.failed`; then it finishes.
    public let events: AsyncStream<WebSocketEvent>
    let core: ClientCore  // internal for the leak test

    /// Validates the options against the URL; no I/O happens until ``connect()``.
    public convenience init(url: WebSocketURL, options: WebSocketClientOptions = WebSocketClientOptions()) throws(WebSocketError) {
        let (stream, continuation) = AsyncStream.makeStream(of: WebSocketEvent.self, bufferingPolicy: .unbounded)
        try self.init(url: url, options: options, events: stream) { event, last in
            continuation.yield(event)
            if last { continuation.finish() }
        }
    }

    /// The same, with each event handed to `deliver` on the service thread instead of ``events``
    /// (which then stays empty): for an owner that merges them into a stream of its own, so no
    /// task is needed to carry them over. `last` is true for the one `.closed` or `.failed`.
    public convenience init(url: WebSocketURL, options: WebSocketClientOptions = WebSocketClientOptions(),
                            deliver: @escaping @Sendable (_ event: WebSocketEvent, _ last: Bool) -> Void) throws(WebSocketError) {
        try self.init(url: url, options: options, events: AsyncStream { $0.finish() }, deliver: deliver)
    }

    private init(url: WebSocketURL, options: WebSocketClientOptions, events: AsyncStream<WebSocketEvent>,
                 deliver: @escaping @Sendable (WebSocketEvent, Bool) -> Void) throws(WebSocketError) {
        if !url.secure && !url.isLoopback && !options.allowInsecureRemote {
            throw .insecureTransportRefused(host: url.host)
        }
        if let name = WebSocketHandshake.invalidHeaderName(in: options.headers) { throw .invalidHeader(name) }
        var pin: String?
        if url.secure, let raw = options.tlsPinSHA256 {
            guard let normalized = TLSCertificateFingerprint.normalize(raw) else { throw .invalidPin(raw) }
            pin = normalized
        }
        self.url = url
        self.options = options
        // Gateway frames can be megabytes; their buffers must not stay resident (issue 11).
        ProcessMemory.returnLargeBuffersToTheSystem()
        self.events = events
        core = ClientCore(url: url, options: options, pin: pin, deliver: deliver)
    }

    deinit { core.close(code: 1001, reason: "") }

    /// Starts the service thread, which creates the lws context and connects. Returns at once;
    /// the outcome arrives on ``events``. Only the first call has an effect.
    public func connect() { core.start() }

    /// Queues a message; it is written from the service thread, in order, once open.
    public func send(_ message: WebSocketMessage) { core.enqueue(message) }

    /// Sends queued messages, then a close frame with `code` and `reason` (at most 123 bytes
    /// of UTF-8), waits up to 5 s for the peer's close frame, and ends the stream with
    /// `.closed`. While still connecting it abandons the attempt; before ``connect()`` it just
    /// ends the stream.
    public func close(code: Int = 1000, reason: String = "") { core.close(code: code, reason: reason) }

    /// Blocks until the service thread has destroyed its context and exited, or `timeout`
    /// passes; true if it has. For tests and orderly process shutdown.
    @discardableResult
    public func waitUntilStopped(timeout: Duration) -> Bool { core.waitUntilStopped(timeout: timeout) }
}

/// The state the service thread and the public methods share. The thread keeps it alive (its
/// closure holds a strong reference) until the context is destroyed, so the context's user
/// pointer is passed unretained and there is no Unmanaged retain to balance.
final class ClientCore: @unchecked Sendable {  // @unchecked: the lws service thread owns its state; callers post under `lock`
    private enum Phase { case idle, running, finished }

    /// Seconds to wait for the peer's close frame after sending ours, and for the server to
    /// end TCP after the close handshake (RFC 6455 §7.1.1 lets the server close first).
    static let closeAckSeconds: Int32 = 5
    static let tcpCloseAfterHandshakeSeconds: Int32 = 2

    let url: WebSocketURL
    let options: WebSocketClientOptions
    let pin: String?
    private let deliver: @Sendable (WebSocketEvent, Bool) -> Void
    private let stopped = CompletionSignal()

    // Guarded by `lock`: touched by public methods on any thread and by the service thread.
    private let lock = NSLock()
    private var phase = Phase.idle
    private var outbox: [WebSocketMessage] = []
    private var closeRequest: (code: Int, reason: String)?
    private var context: OpaquePointer?     // non-nil only while lws_cancel_service is safe
    private var terminalSent = false

    // Service thread only.
    private var wsi: OpaquePointer?
    private var connection: WebSocketClientConnection<SystemRandomNumberGenerator>
    private var tls: TLSClientSession?
    private var upgradeSent = false
    private var isOpen = false
    private var closeStarted = false
    private var connectionEnded = false
    private var pendingWire: [UInt8] = []    // bytes for the socket, already encrypted if TLS
    private var abortRequested = false
    private var lastTransportError: String?
    private var handshakeDeadline: ContinuousClock.Instant?

    init(url: WebSocketURL, options: WebSocketClientOptions, pin: String?, deliver: @escaping @Sendable (WebSocketEvent, Bool) -> Void) {
        self.url = url
        self.options = options
        self.pin = pin
        self.deliver = deliver
        connection = WebSocketClientConnection(url: url, maxMessageBytes: options.maxMessageBytes, random: SystemRandomNumberGenerator())
    }

    // MARK: Any thread

    func start() {
        lock.lock()
        guard phase == .idle else { lock.unlock(); return }
        phase = .running
        lock.unlock()
        let thread = Thread { self.serviceThreadMain() }
        thread.name = "cv-ws-client"
        thread.start()
    }

    func enqueue(_ message: WebSocketMessage) {
        lock.lock()
        defer { lock.unlock() }
        guard phase != .finished, closeRequest == nil, !terminalSent else { return }
        outbox.append(message)
        if let context { lws_cancel_service(context) }
    }

    func close(code: Int, reason: String) {
        lock.lock()
        switch phase {
        case .idle:
            phase = .finished
            lock.unlock()
            emitTerminal(.closed(code: code, reason: reason))
            stopped.signal()
        case .running:
            if closeRequest == nil { closeRequest = (code, reason) }
            if let context { lws_cancel_service(context) }
            lock.unlock()
        case .finished:
            lock.unlock()
        }
    }

    func waitUntilStopped(timeout: Duration) -> Bool { stopped.wait(timeout: timeout) }

    private func emitTerminal(_ event: WebSocketEvent) {
        lock.lock()
        let first = !terminalSent
        terminalSent = true
        outbox.removeAll()
        lock.unlock()
        guard first else { return }
        deliver(event, true)
    }

    // MARK: Service thread

    private func serviceThreadMain() {
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

    private func createContext(protocols: ProtocolTable) throws(WebSocketError) -> OpaquePointer {
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

    private static func handshakeSeconds(_ duration: Duration) -> Int32 {
        Int32(clamping: max(1, wholeSeconds(duration)))
    }

    private static func wholeSeconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        if seconds < 0 || (seconds == 0 && attoseconds <= 0) { return 0 }
        return Int(seconds) + (attoseconds > 0 ? 1 : 0)
    }

    /// Dispatch for every lws callback of this context. Runs on the service thread; returns
    /// non-zero to make lws close the connection. Nothing here may throw or block.
    fileprivate func handle(_ wsi: OpaquePointer, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
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
    private func finishCallback(_ wsi: OpaquePointer) -> Int32 {
        if abortRequested { return -1 }
        if !pendingWire.isEmpty || hasQueuedWork() { lws_callback_on_writable(wsi) }
        return 0
    }

    private func hasQueuedWork() -> Bool {
        guard isOpen, !closeStarted else { return false }
        lock.lock()
        defer { lock.unlock() }
        return !outbox.isEmpty || closeRequest != nil
    }

    /// After lws_cancel_service: write queued messages, start a close, or abandon a
    /// connection attempt that has not opened yet.
    private func serviceRequests() {
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

    private func received(_ bytes: UnsafeRawBufferPointer) {
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
    private func advanceTLSHandshake() {
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

    private func sendUpgradeRequest() {
        guard !upgradeSent else { return }
        upgradeSent = true
        queueWire(connection.handshakeRequest(headers: options.headers))
    }

    /// Application bytes for the socket: encrypted first when TLS is in use.
    private func queueWire(_ bytes: [UInt8]) {
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

    private func flushTLS() {
        guard let tls else { return }
        let ciphertext = tls.takeCiphertext()
        if !ciphertext.isEmpty { pendingWire.append(contentsOf: ciphertext) }
    }

    /// Carries out the state machine's actions.
    private func perform(_ actions: [WebSocketClientConnection<SystemRandomNumberGenerator>.Action]) {
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

    private func armPingTimer(_ wsi: OpaquePointer) {
        let seconds = Self.wholeSeconds(options.pingInterval)
        guard seconds > 0 else { return }
        lws_set_timer_usecs(wsi, lws_usec_t(seconds) * 1_000_000)
    }

    /// One message (or the close frame) per WRITEABLE callback; lws calls back again only
    /// once it has flushed what it buffered, which keeps memory bounded by one message.
    private func writeNext(_ wsi: OpaquePointer) {
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

    private func endConnection(reason: String) {
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
