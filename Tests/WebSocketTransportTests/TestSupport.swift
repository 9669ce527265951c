import Foundation
import Testing
@testable import WebSocketTransport

/// Records everything a stream yields, so tests can wait for a named condition with a
/// deadline instead of sleeping.
final class EventRecorder<Event: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var recorded: [Event] = []
    private var ended = false
    private var task: Task<Void, Never>?

    init(_ stream: AsyncStream<Event>) {
        task = Task { [weak self] in
            for await event in stream { self?.append(event) }
            self?.finish()
        }
    }

    deinit { task?.cancel() }

    private func append(_ event: Event) {
        lock.lock(); recorded.append(event); lock.unlock()
    }

    private func finish() {
        lock.lock(); ended = true; lock.unlock()
    }

    var events: [Event] {
        lock.lock(); defer { lock.unlock() }
        return recorded
    }

    var isFinished: Bool {
        lock.lock(); defer { lock.unlock() }
        return ended
    }

    /// Polls until `match` returns a value or `timeout` passes; records a test issue named
    /// after `condition` on timeout.
    func wait<T>(
        for condition: String, timeout: Duration = .seconds(5),
        sourceLocation: SourceLocation = #_sourceLocation,
        _ match: ([Event]) -> T?
    ) async -> T? {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let value = match(events) { return value }
            if ContinuousClock.now >= deadline {
                Issue.record("timed out after \(timeout) waiting for: \(condition)", sourceLocation: sourceLocation)
                return nil
            }
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Waits until the stream has finished.
    @discardableResult
    func waitForEnd(timeout: Duration = .seconds(5), sourceLocation: SourceLocation = #_sourceLocation) async -> Bool {
        await wait(for: "the event stream to finish", timeout: timeout, sourceLocation: sourceLocation) { _ in
            self.isFinished ? true : nil
        } ?? false
    }
}

extension WebSocketEvent {
    var isOpened: Bool { if case .opened = self { true } else { false } }
    var message: WebSocketMessage? { if case .message(let m) = self { m } else { nil } }
    var isTerminal: Bool {
        switch self {
        case .closed, .failed: true
        default: false
        }
    }
}

extension WebSocketServerEvent {
    var connectedID: ConnectionID? { if case .connected(let id, _) = self { id } else { nil } }
    var connectedHeaders: [String: String]? { if case .connected(_, let headers) = self { headers } else { nil } }
    func message(from id: ConnectionID) -> WebSocketMessage? {
        if case .message(id, let m) = self { m } else { nil }
    }
    func disconnect(of id: ConnectionID) -> (code: Int?, reason: String)? {
        if case .disconnected(id, let code, let reason) = self { (code, reason) } else { nil }
    }
}

/// A server on 127.0.0.1 with an ephemeral port, and a client connected to it.
struct LoopbackPair {
    let server: WebSocketServer
    let serverEvents: EventRecorder<WebSocketServerEvent>
    let client: WebSocketClient
    let clientEvents: EventRecorder<WebSocketEvent>
    let id: ConnectionID

    static func open(
        path: String = "/",
        serverOptions: WebSocketServerOptions = WebSocketServerOptions(),
        clientOptions: WebSocketClientOptions = WebSocketClientOptions(),
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> LoopbackPair {
        let server = try WebSocketServer(options: serverOptions)
        let serverEvents = EventRecorder(server.events)
        let scheme = serverOptions.tlsCertificatePEMPath == nil ? "ws" : "wss"
        let url = try WebSocketURL(parsing: "\(scheme)://127.0.0.1:\(server.port)\(path)")
        let client = try WebSocketClient(url: url, options: clientOptions)
        let clientEvents = EventRecorder(client.events)
        client.connect()
        let opened = await clientEvents.wait(for: "client .opened", sourceLocation: sourceLocation) { events in
            events.contains(where: \.isOpened) ? true : nil
        }
        let id = await serverEvents.wait(for: "server .connected", sourceLocation: sourceLocation) { events in
            events.lazy.compactMap(\.connectedID).first
        }
        guard opened == true, let id else { throw PairError.notOpened(clientEvents.events.map { "\($0)" }) }
        return LoopbackPair(server: server, serverEvents: serverEvents, client: client, clientEvents: clientEvents, id: id)
    }

    enum PairError: Error { case notOpened([String]) }
}

/// A scratch directory removed at deinit.
final class TemporaryDirectory {
    let path: String

    init() throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("clawvoice-ws-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        path = base.path
    }

    func file(_ name: String) -> String { path + "/" + name }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// A TCP port on 127.0.0.1 that nothing listens on (bound by a server that was shut down).
func closedLoopbackPort() throws -> Int {
    let server = try WebSocketServer(options: WebSocketServerOptions(host: "127.0.0.1", port: 0))
    let port = server.port
    server.shutdown(grace: .zero)
    return port
}

/// Deterministic bytes for payload checks.
func patternBytes(count: Int, seed: UInt32 = 0x9E37_79B9) -> [UInt8] {
    var state = seed
    return (0..<count).map { _ in
        state = state &* 1_664_525 &+ 1_013_904_223
        return UInt8(truncatingIfNeeded: state >> 24)
    }
}
