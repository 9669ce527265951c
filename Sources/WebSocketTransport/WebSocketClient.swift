// The WebSocket client: per WebSocketClient one libwebsockets context, one raw TCP connection
// and one service thread. lws moves bytes (DNS, connect, poll, timers); TLSClientSession does
// TLS and WebSocketClientConnection does RFC 6455. All lws calls except lws_cancel_service
// happen on the service thread. This file: the public client and the state its methods share with
// the service thread; WebSocketClientService.swift: the service thread itself.
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
    enum Phase { case idle, running, finished }

    /// Seconds to wait for the peer's close frame after sending ours, and for the server to
    /// end TCP after the close handshake (RFC 6455 §7.1.1 lets the server close first).
    static let closeAckSeconds: Int32 = 5
    static let tcpCloseAfterHandshakeSeconds: Int32 = 2

    let url: WebSocketURL
    let options: WebSocketClientOptions
    let pin: String?
    let deliver: @Sendable (WebSocketEvent, Bool) -> Void
    let stopped = CompletionSignal()

    // Guarded by `lock`: touched by public methods on any thread and by the service thread.
    let lock = NSLock()
    var phase = Phase.idle
    var outbox: [WebSocketMessage] = []
    var closeRequest: (code: Int, reason: String)?
    var context: OpaquePointer?     // non-nil only while lws_cancel_service is safe
    var terminalSent = false

    // Service thread only.
    var wsi: OpaquePointer?
    var connection: WebSocketClientConnection<SystemRandomNumberGenerator>
    var tls: TLSClientSession?
    var upgradeSent = false
    var isOpen = false
    var closeStarted = false
    var connectionEnded = false
    var pendingWire: [UInt8] = []    // bytes for the socket, already encrypted if TLS
    var abortRequested = false
    var lastTransportError: String?
    var handshakeDeadline: ContinuousClock.Instant?

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

    func emitTerminal(_ event: WebSocketEvent) {
        lock.lock()
        let first = !terminalSent
        terminalSent = true
        outbox.removeAll()
        lock.unlock()
        guard first else { return }
        deliver(event, true)
    }

}
