// The WebSocket server (used by the loopback gateway and tests): one libwebsockets context,
// one listening vhost and one service thread. All lws calls except lws_cancel_service happen
// on that thread, apart from creating the context in init (WebSocketServerCore.swift).
internal import CWebsockets
internal import Foundation

/// Where and how a ``WebSocketServer`` listens.
public struct WebSocketServerOptions: Sendable {
    /// Interface address to bind: an IP literal such as "127.0.0.1" or "::1"; "0.0.0.0" or
    /// "" binds all interfaces.
    public var host: String = "127.0.0.1"
    /// TCP port; 0 lets the kernel pick a free one (read it back from ``WebSocketServer/port``).
    public var port: Int = 0
    /// PEM certificate and key; both set means the server speaks TLS (`wss://`) only.
    public var tlsCertificatePEMPath: String?
    public var tlsPrivateKeyPEMPath: String?
    /// The largest message accepted from a client, in bytes; a bigger one closes that
    /// connection with 1009. Default 16 MiB.
    public var maxMessageBytes: Int = 16 << 20

    public init(
        host: String = "127.0.0.1",
        port: Int = 0,
        tlsCertificatePEMPath: String? = nil,
        tlsPrivateKeyPEMPath: String? = nil,
        maxMessageBytes: Int = 16 << 20
    ) {
        self.host = host
        self.port = port
        self.tlsCertificatePEMPath = tlsCertificatePEMPath
        self.tlsPrivateKeyPEMPath = tlsPrivateKeyPEMPath
        self.maxMessageBytes = maxMessageBytes
    }
}

/// Identifies one accepted connection for the life of its server; never reused.
public struct ConnectionID: Hashable, Sendable, CustomStringConvertible {
    public let raw: Int
    public init(raw: Int) { self.raw = raw }
    public var description: String { "conn#\(raw)" }
}

/// What a ``WebSocketServer`` reports.
public enum WebSocketServerEvent: Sendable {
    /// A client completed the opening handshake. Header names are lowercased; present when
    /// the client sent them: "origin", "user-agent", "host", "authorization",
    /// "sec-websocket-protocol", "x-forwarded-for"; always: "path" (request target) and
    /// "remote-address" (peer IP).
    case connected(ConnectionID, headers: [String: String])
    /// A complete text or binary message from that client.
    case message(ConnectionID, WebSocketMessage)
    /// The connection ended. `code` is the close frame's code (the client's if it closed
    /// first, ours if we did); nil means it ended without a close frame. lws 4.1.6 reports a
    /// client's code in 1012...2999 (or below 1000, or 1004...1006) as 1002; clients send
    /// 1000, 1001 or 4xxx, so this only matters for misbehaving ones.
    case disconnected(ConnectionID, code: Int?, reason: String)
}

/// A WebSocket server on one address and port.
///
/// It listens as soon as `init` returns, accepts WebSocket upgrades on any path (plain HTTP
/// requests get lws' stock answer), and reports on ``events`` until ``shutdown()``. The methods are
/// thread-safe; actions on a connection that is gone are ignored.
public final class WebSocketServer: Sendable {
    /// The bound TCP port (the kernel's choice when the options asked for 0).
    public let port: Int
    public let options: WebSocketServerOptions
    /// Connection events; finishes after ``shutdown()``.
    public let events: AsyncStream<WebSocketServerEvent>
    private let core: ServerCore

    /// Creates the context, binds and starts the service thread.
    public init(options: WebSocketServerOptions = WebSocketServerOptions()) throws(WebSocketError) {
        self.options = options
        let (stream, continuation) = AsyncStream.makeStream(of: WebSocketServerEvent.self, bufferingPolicy: .unbounded)
        events = stream
        core = ServerCore(options: options, continuation: continuation)
        port = try core.listen()
        core.startThread()
    }

    deinit { core.shutdown(grace: .zero) }

    /// Connections that have completed the handshake and not yet ended.
    public var connectionIDs: [ConnectionID] { core.liveConnections }

    /// Queues a message for one connection.
    public func send(_ message: WebSocketMessage, to id: ConnectionID) { core.request(.send(message), for: id) }

    /// Sends queued messages, then a close frame with `code` and `reason` (at most 123 bytes).
    public func close(_ id: ConnectionID, code: Int, reason: String) { core.request(.close(code, reason), for: id) }

    /// Ends the TCP connection without a close frame (fault injection): the client sees the
    /// stream end with no close code, as when a network path dies.
    public func drop(_ id: ConnectionID) { core.request(.drop, for: id) }

    /// Closes every connection with 1001 "server shutdown", waits up to `grace` for the
    /// closing handshakes, then destroys the context (closing the listening socket, so the
    /// port can be bound again at once) and stops the thread. Blocks until done; later calls
    /// return immediately.
    public func shutdown(grace: Duration = .seconds(1)) { core.shutdown(grace: grace) }
}
