// The WebSocket server's service thread and the state it shares with the public side: lws
// callbacks, each connection's message assembly and close handshake, and the requests other
// threads post (send, close, drop), carried out in that connection's WRITEABLE callback.

internal import CWebsockets
internal import Foundation

/// A request from another thread for one connection, carried out in its WRITEABLE callback.
enum ServerAction {
    case send(WebSocketMessage)
    case close(Int, String)
    case drop
}

/// The state the service thread and the public methods share. The thread holds a strong
/// reference until it has destroyed the context, so the context user pointer is unretained.
// @unchecked: libwebsockets' service thread owns the connection state; the public side only posts under `lock`.
final class ServerCore: @unchecked Sendable {
    /// Per-connection state, service thread only.
    private struct Connection {
        let id: ConnectionID
        var assembler: MessageAssembler
        var peerClose: (code: Int?, reason: String)?
        var sentClose: (code: Int, reason: String)?
    }

    let options: WebSocketServerOptions
    private let continuation: AsyncStream<WebSocketServerEvent>.Continuation
    private let stopped = CompletionSignal()
    private let protocols = ProtocolTable(callback: serverCallback, rxBufferBytes: 64 << 10)
    private let strings = CStringArena()

    // Guarded by `lock`.
    private let lock = NSLock()
    private var context: OpaquePointer?          // non-nil while lws_cancel_service is safe
    private var pending: [ConnectionID: [ServerAction]] = [:]
    private var live: Set<ConnectionID> = []
    private var stopRequested = false
    private var shutdownStarted = false
    private var threadStarted = false

    // Service thread only.
    private var connections: [OpaquePointer: Connection] = [:]
    private var sockets: [ConnectionID: OpaquePointer] = [:]
    private var nextID = 1

    init(options: WebSocketServerOptions, continuation: AsyncStream<WebSocketServerEvent>.Continuation) {
        self.options = options
        self.continuation = continuation
    }

    var liveConnections: [ConnectionID] {
        lock.lock()
        defer { lock.unlock() }
        return live.sorted { $0.raw < $1.raw }
    }

    /// Creates the context and the listening vhost; returns the bound port.
    func listen() throws(WebSocketError) -> Int {
        let tls = options.tlsCertificatePEMPath != nil || options.tlsPrivateKeyPEMPath != nil
        if tls && (options.tlsCertificatePEMPath == nil || options.tlsPrivateKeyPEMPath == nil) {
            throw .listenFailed("TLS needs both a certificate and a private key path")
        }
        guard (0...65535).contains(options.port) else { throw .listenFailed("port \(options.port) is not in 0...65535") }
        let (context, port) = try LWSRuntime.withContextLock { () throws(WebSocketError) -> (OpaquePointer, Int) in
            var info = lws_context_creation_info()
            info.options = UInt64(LWS_SERVER_OPTION_EXPLICIT_VHOSTS) | UInt64(LWS_SERVER_OPTION_VALIDATE_UTF8)
            info.protocols = UnsafePointer(protocols.pointer)
            info.user = Unmanaged.passUnretained(self).toOpaque()
            info.fd_limit_per_thread = 1024
            info.timeout_secs = 10
            guard let context = lws_create_context(&info) else { throw .contextCreationFailed }

            info.port = Int32(options.port)
            let host = options.host.trimmingASCIIWhitespace()
            if !host.isEmpty && host != "0.0.0.0" && host != "::" {
                info.iface = strings.make(String(host))
                if !host.contains(":") { info.options |= UInt64(LWS_SERVER_OPTION_DISABLE_IPV6) }
            }
            info.alpn = strings.make("http/1.1")
            if tls, let cert = options.tlsCertificatePEMPath, let key = options.tlsPrivateKeyPEMPath {
                info.ssl_cert_filepath = strings.make(cert)
                info.ssl_private_key_filepath = strings.make(key)
                info.options |= UInt64(LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT)  // vhost only: see LWSRuntime
            }
            _ = LWSRuntime.takeLastError()
            guard let vhost = lws_create_vhost(context, &info) else {
                let detail = LWSRuntime.takeLastError().map { " (\($0))" } ?? ""
                lws_context_destroy(context)
                throw .listenFailed("lws_create_vhost could not listen on \(options.host):\(options.port)"
                    + (tls ? " with TLS certificate \(options.tlsCertificatePEMPath ?? "")" : "") + detail)
            }
            return (context, Int(lws_get_vhost_listen_port(vhost)))
        }
        lock.lock()
        self.context = context
        lock.unlock()
        return port
    }

    func startThread() {
        lock.lock()
        threadStarted = true
        lock.unlock()
        let thread = Thread { self.serviceThreadMain() }
        thread.name = "cv-ws-server"
        thread.start()
    }

    func request(_ action: ServerAction, for id: ConnectionID) {
        lock.lock()
        defer { lock.unlock() }
        guard live.contains(id), !stopRequested else { return }
        pending[id, default: []].append(action)
        if let context { lws_cancel_service(context) }
    }

    func shutdown(grace: Duration) {
        lock.lock()
        if shutdownStarted {
            lock.unlock()
            stopped.wait(timeout: .seconds(30))
            return
        }
        shutdownStarted = true
        let running = threadStarted
        // Phase 1: ask every connection to close; the thread stops early once none is left.
        for id in live { pending[id, default: []].append(.close(1001, "server shutdown")) }
        if grace <= .zero { stopRequested = true }
        if let context { lws_cancel_service(context) }
        lock.unlock()
        guard running else { return }
        if grace > .zero {
            let deadline = ContinuousClock.now + grace
            while ContinuousClock.now < deadline {
                lock.lock()
                let remaining = live.count
                lock.unlock()
                if remaining == 0 || stopped.isSignalled { break }
                stopped.wait(timeout: .milliseconds(10))
            }
            lock.lock()
            stopRequested = true
            if let context { lws_cancel_service(context) }
            lock.unlock()
        }
        // Phase 2: the thread leaves its loop and destroys the context.
        stopped.wait(timeout: .seconds(30))
    }

    private func serviceThreadMain() {
        lock.lock()
        let context = self.context!
        lock.unlock()
        while true {
            lock.lock()
            let stop = stopRequested
            lock.unlock()
            if stop { break }
            if lws_service(context, 0) < 0 { break }
        }
        lock.lock()
        self.context = nil
        lock.unlock()
        LWSRuntime.contextLock.lock()
        lws_context_destroy(context)  // closes the listener and any connection left (CLOSED callbacks)
        LWSRuntime.contextLock.unlock()
        lock.lock()
        live.removeAll()
        pending.removeAll()
        lock.unlock()
        continuation.finish()
        withExtendedLifetime(protocols) {}
        withExtendedLifetime(strings) {}
        stopped.signal()
    }

    /// Dispatch for every lws callback of this context (service thread; in init for vhost
    /// setup). Non-zero closes the connection. Nothing here may throw or block.
    fileprivate func handle(_ wsi: OpaquePointer, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
                            _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
        switch reason {
        case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
            lock.lock()
            let ids = pending.filter { !$0.value.isEmpty }.map(\.key)
            lock.unlock()
            for id in ids {
                if let socket = sockets[id] { lws_callback_on_writable(socket) }
            }
            return 0

        case LWS_CALLBACK_ESTABLISHED:
            let id = ConnectionID(raw: nextID)
            nextID += 1
            connections[wsi] = Connection(id: id, assembler: MessageAssembler(limitBytes: max(0, options.maxMessageBytes)))
            sockets[id] = wsi
            let headers = Self.headers(of: wsi)
            lock.lock()
            live.insert(id)
            lock.unlock()
            continuation.yield(.connected(id, headers: headers))
            return 0

        case LWS_CALLBACK_RECEIVE:
            guard var connection = connections[wsi] else { return 0 }
            let outcome = connection.assembler.append(wsi: wsi, bytes: input, count: length)
            switch outcome {
            case .incomplete:
                connections[wsi] = connection
                return 0
            case .complete(let message):
                connections[wsi] = connection
                continuation.yield(.message(connection.id, message))
                return 0
            case .tooLarge:
                ClosePayload.set(on: wsi, code: 1009, reason: "message too large")
                connection.sentClose = (1009, "message too large")
                connections[wsi] = connection
                return -1
            }

        case LWS_CALLBACK_SERVER_WRITEABLE:
            return writeNext(wsi)

        case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
            connections[wsi]?.peerClose = ClosePayload.parse(input, count: length)
            return 0

        case LWS_CALLBACK_CLOSED:
            guard let connection = connections.removeValue(forKey: wsi) else { return 0 }
            sockets[connection.id] = nil
            lock.lock()
            live.remove(connection.id)
            pending[connection.id] = nil
            lock.unlock()
            let end = connection.peerClose ?? connection.sentClose.map { (Optional($0.code), $0.reason) } ?? (nil, "")
            continuation.yield(.disconnected(connection.id, code: end.code, reason: end.reason))
            return 0

        default:
            // Plain HTTP requests, protocol init and the rest: lws' stock behaviour (404s).
            return lws_callback_http_dummy(wsi, reason, user, input, length)
        }
    }

    /// One action per WRITEABLE callback; asks for another callback while more are queued.
    private func writeNext(_ wsi: OpaquePointer) -> Int32 {
        guard let id = connections[wsi]?.id else { return 0 }
        lock.lock()
        var queue = pending[id] ?? []
        let action = queue.isEmpty ? nil : queue.removeFirst()
        pending[id] = queue
        let more = !queue.isEmpty
        lock.unlock()
        switch action {
        case nil:
            return 0
        case .send(let message)?:
            guard LWSWriter.write(message, to: wsi) else { return -1 }
            if more { lws_callback_on_writable(wsi) }
            return 0
        case .close(let code, let reason)?:
            ClosePayload.set(on: wsi, code: code, reason: reason)
            connections[wsi]?.sentClose = (code, reason)
            return -1  // lws sends the close frame and waits for the client's
        case .drop?:
            // No lws_close_reason, so lws closes the socket without a close frame.
            return -1
        }
    }

    private static let headerTokens: [(String, lws_token_indexes)] = [
        ("origin", WSI_TOKEN_ORIGIN),
        ("user-agent", WSI_TOKEN_HTTP_USER_AGENT),
        ("host", WSI_TOKEN_HOST),
        ("authorization", WSI_TOKEN_HTTP_AUTHORIZATION),
        ("sec-websocket-protocol", WSI_TOKEN_PROTOCOL),
        ("x-forwarded-for", WSI_TOKEN_X_FORWARDED_FOR),
        ("path", WSI_TOKEN_GET_URI),
    ]

    /// Copies the request headers; lws still holds them during LWS_CALLBACK_ESTABLISHED.
    private static func headers(of wsi: OpaquePointer) -> [String: String] {
        var result: [String: String] = [:]
        for (name, token) in headerTokens {
            let length = Int(lws_hdr_total_length(wsi, token))
            guard length > 0 else { continue }
            var buffer = [CChar](repeating: 0, count: length + 1)
            let copied = lws_hdr_copy(wsi, &buffer, Int32(buffer.count), token)
            guard copied >= 0 else { continue }
            result[name] = String(nulTerminated: Array(buffer[..<Int(copied)]))
        }
        if result["path"] == nil { result["path"] = "/" }
        // lws keeps the query apart (and joins its arguments with "&").
        let argsLength = Int(lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_URI_ARGS))
        if argsLength > 0 {
            var buffer = [CChar](repeating: 0, count: argsLength + 1)
            if lws_hdr_copy(wsi, &buffer, Int32(buffer.count), WSI_TOKEN_HTTP_URI_ARGS) > 0 {
                result["path", default: "/"] += "?" + String(nulTerminated: buffer)
            }
        }
        var peer = [CChar](repeating: 0, count: 64)
        if lws_get_peer_simple(wsi, &peer, peer.count) != nil {
            result["remote-address"] = String(nulTerminated: peer)
        }
        return result
    }
}

/// The C entry point for the server's lws protocol.
private let serverCallback: LWSCallback = { wsi, reason, user, input, length in
    guard let wsi, let context = lws_get_context(wsi), let owner = lws_context_user(context) else {
        return lws_callback_http_dummy(wsi, reason, user, input, length)
    }
    let core = Unmanaged<ServerCore>.fromOpaque(owner).takeUnretainedValue()
    return core.handle(wsi, reason, user, input, length)
}
