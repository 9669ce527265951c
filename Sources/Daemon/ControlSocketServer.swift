// The daemon's control socket server: one I/O thread polls the listening socket and every
// connection (non-blocking: reads with a deadline, buffered writes with a stall limit), and
// `run()` answers each request as a child task of its own task group. No thread per
// connection, nothing blocks the cooperative pool. ControlAdmission decides which connections
// are kept; ControlProtocol.swift has the line rules.

import ClawvoiceCore
import Foundation
import GatewayCrypto
public import GatewayProtocol
import Synchronization
public import NodeRuntime
#if canImport(Glibc)
import Glibc
#endif

public final class ControlSocketServer: Service {
    public typealias Handler = @Sendable (JSONValue) async -> JSONValue
    /// A request answered by a stream of lines (`events`) instead of one response; nil: not a stream.
    public typealias Streamer = @Sendable (JSONValue) -> (lines: AsyncStream<String>, end: @Sendable () -> Void)?
    private let path: String
    private let handler: Handler
    private let streamer: Streamer?
    private let io: ControlIO
    private let requests: AsyncStream<(Int, JSONValue)>

    /// Binds the socket (refusing a path where a daemon answers) and starts accepting; requests
    /// are answered while `run()` runs.
    public init(path: String, limits: ControlAdmission.Limits = .init(), streamer: Streamer? = nil,
                handler: @escaping Handler) throws(ControlSocketError) {
        self.path = path
        self.handler = handler
        self.streamer = streamer
        let dir = (path as NSString).deletingLastPathComponent
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        var addr = try makeAddress(path)
        // A socket file left by a daemon that died: remove it if nobody answers on it.
        if FileManager.default.fileExists(atPath: path) {
            if (try? ControlSocketClient.send(["cmd": "ping"], path: path, timeoutSeconds: 1)) != nil {
                throw .alreadyRunning(path)
            }
            unlink(path)
        }
        let s = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard s >= 0 else { throw .call("socket", errno, path) }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(s, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else { let e = errno; close(s); throw .call("bind", e, path) }
        chmod(path, 0o600)
        guard listen(s, 64) == 0 else { let e = errno; close(s); throw .call("listen", e, path) }
        let (requests, sink) = AsyncStream.makeStream(of: (Int, JSONValue).self)
        self.requests = requests
        guard let io = ControlIO(listening: s, limits: limits, requests: sink) else { close(s); throw .call("pipe", errno, path) }
        self.io = io
        let thread = Thread { io.loop() }
        thread.name = "clawvoice-control"
        thread.start()
    }

    /// Connections open right now (for tests and status).
    public var openConnections: Int { io.openConnections }

    /// Answers requests until cancelled (or `stop()`), each one a child task; then closes.
    public func run() async {
        await withDiscardingTaskGroup { group in
            for await (id, request) in requests {
                group.addTask { await self.answer(id, request) }
            }
            group.cancelAll()
        }
        stop()
    }

    private func answer(_ id: Int, _ request: JSONValue) async {
        if let (lines, end) = streamer?(request) {
            // A streaming request (`events`): one line per item until the client goes (its
            // connection closed, or too far behind) or the stream ends.
            for await line in lines where !io.send(id, line + "\n") { break }
            end()
        } else {
            io.send(id, ControlLine.responseLine(await handler(request)) + "\n")
        }
        io.finish(id)
    }

    /// Stops accepting and closes every connection. Safe to call more than once.
    public func stop() {
        guard io.stop() else { return }
        unlink(path)
    }

    deinit { stop() }
}

/// The I/O thread's world: the listening socket, each connection's buffers and phase, the
/// admission state. Public calls post under the lock and wake the thread through a pipe.
final class ControlIO: Sendable {
    /// How long a client may leave its answer unread before it is closed.
    static let writeStallMs: Int64 = 3_000
    /// How far an `events` subscriber may fall behind before it is dropped.
    static let maxBufferedBytes = 1 << 20

    private struct Connection {
        let fd: Int32
        var input: [UInt8] = []
        var output: [UInt8] = []
        var handling = false
        var finishing = false
        var lastWriteMs: Int64
    }

    private struct State {
        var admission: ControlAdmission
        var connections: [Int: Connection] = [:]
        var nextId = 0
        var stopped = false
        var acceptPausedUntilMs: Int64 = 0
        /// Kept open so that at EMFILE one descriptor can be freed to tell the waiting client "busy".
        var spare: Int32 = -1
    }

    private let listening: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let requests: AsyncStream<(Int, JSONValue)>.Continuation
    private let state: Mutex<State>

    init?(listening: Int32, limits: ControlAdmission.Limits, requests: AsyncStream<(Int, JSONValue)>.Continuation) {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { return nil }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC); _ = fcntl(fd, F_SETFL, O_NONBLOCK) }
        (wakeRead, wakeWrite) = (fds[0], fds[1])
        self.listening = listening
        self.requests = requests
        state = Mutex(State(admission: ControlAdmission(limits: limits), spare: open("/dev/null", O_RDONLY | O_CLOEXEC)))
    }

    var openConnections: Int { state.withLock { $0.admission.count } }

    /// Queues `text` for connection `id`; false when it is gone or too far behind (then closed).
    @discardableResult
    package func send(_ id: Int, _ text: String) -> Bool {
        let ok = state.withLock { s -> Bool in
            guard var c = s.connections[id], !c.finishing else { return false }
            if c.output.isEmpty { c.lastWriteMs = monotonicMs() }
            c.output += Array(text.utf8)
            if c.output.count > Self.maxBufferedBytes { Self.close(id, &s); return false }
            s.connections[id] = c
            return true
        }
        wake()
        return ok
    }

    /// Closes connection `id` once what was queued for it is written.
    package func finish(_ id: Int) {
        state.withLock { s in s.connections[id]?.finishing = true }
        wake()
    }

    /// True for the call that stopped it.
    package func stop() -> Bool {
        let first = state.withLock { s in defer { s.stopped = true }; return !s.stopped }
        if first { requests.finish(); wake() }
        return first
    }

    private func wake() {
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    private static func close(_ id: Int, _ s: inout State) {
        guard let c = s.connections.removeValue(forKey: id) else { return }
        s.admission.closed(id)
        Glibc.close(c.fd)
    }

    /// The thread: poll, accept, read lines, write what is queued, enforce the deadlines.
    func loop() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let now = monotonicMs()
            // What to watch, and how long to sleep at most.
            let (fds, ids, timeout) = state.withLock { s -> ([pollfd], [Int], Int64) in
                var fds = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
                var ids = [-1]
                var timeout: Int64 = 60_000
                if s.acceptPausedUntilMs <= now {
                    fds.append(pollfd(fd: listening, events: Int16(POLLIN), revents: 0)); ids.append(-2)
                } else { timeout = min(timeout, s.acceptPausedUntilMs - now) }
                for (id, c) in s.connections {
                    var events: Int16 = 0
                    if !c.handling { events |= Int16(POLLIN) }
                    if !c.output.isEmpty { events |= Int16(POLLOUT); timeout = min(timeout, c.lastWriteMs + Self.writeStallMs - now) }
                    if let d = s.admission.readDeadline(id) { timeout = min(timeout, d - now) }
                    fds.append(pollfd(fd: c.fd, events: events, revents: 0)); ids.append(id)
                }
                return (fds, ids, max(timeout, 0))
            }
            var polled = fds
            if poll(&polled, nfds_t(polled.count), Int32(timeout)) < 0 && errno != EINTR { usleep(10_000) }
            if polled[0].revents != 0 { while read(wakeRead, &buffer, buffer.count) > 0 {} }
            var parsed: [(Int, JSONValue)] = []
            let stopped = state.withLock { s -> Bool in
                if s.stopped { return true }
                let now = monotonicMs()
                for (i, p) in polled.enumerated() where i > 0 && p.revents != 0 {
                    if ids[i] == -2 { acceptAll(&s, now: now); continue }
                    service(ids[i], revents: p.revents, &s, buffer: &buffer, parsed: &parsed)
                }
                // Deadlines: a line not sent in time, an answer not read in time; finished ones.
                for (id, c) in s.connections {
                    let late = s.admission.readDeadline(id).map { $0 <= now } ?? false
                    let stalled = !c.output.isEmpty && now - c.lastWriteMs >= Self.writeStallMs
                    if late || stalled || (c.finishing && c.output.isEmpty) { Self.close(id, &s) }
                }
                return false
            }
            for r in parsed { requests.yield(r) }
            if stopped { break }
        }
        state.withLock { s in
            for id in Array(s.connections.keys) { Self.close(id, &s) }
            if s.spare >= 0 { Glibc.close(s.spare); s.spare = -1 }
        }
        Glibc.close(listening)
        Glibc.close(wakeRead)
        Glibc.close(wakeWrite)
    }

    private func acceptAll(_ s: inout State, now: Int64) {
        while true {
            let c = accept(listening, nil, nil)
            if c < 0 {
                let e = errno
                if e == EAGAIN || e == EWOULDBLOCK { return }
                let r = s.admission.acceptFailed(errno: e)
                if let victim = r.shed { Self.close(victim, &s) }
                if r.outOfDescriptors && r.shed == nil { answerBusyWithSpare(&s) }
                if r.pauseMs > 0 { s.acceptPausedUntilMs = now + r.pauseMs; return }
                continue
            }
            _ = fcntl(c, F_SETFD, FD_CLOEXEC)
            _ = fcntl(c, F_SETFL, O_NONBLOCK)
            let id = s.nextId
            s.nextId += 1
            let decision = s.admission.accepted(id, nowMs: now)
            if case .serveShedding(let victim) = decision { Self.close(victim, &s) }
            if decision == .refuseBusy {
                _ = writeAll(c, ControlLine.refusalLine("the daemon is busy (\(s.admission.limits.maxConnections) requests in progress); try again") + "\n")
                Glibc.close(c)
                continue
            }
            s.connections[id] = Connection(fd: c, lastWriteMs: now)
        }
    }

    /// The descriptor table is full and nothing idle can be shed: free the spare, take the
    /// waiting client, tell it we are busy, and take the spare back.
    private func answerBusyWithSpare(_ s: inout State) {
        guard s.spare >= 0 else { return }
        Glibc.close(s.spare)
        let c = accept(listening, nil, nil)
        if c >= 0 {
            _ = writeAll(c, ControlLine.refusalLine("the daemon is out of file descriptors; try again") + "\n")
            Glibc.close(c)
        }
        s.spare = open("/dev/null", O_RDONLY | O_CLOEXEC)
    }

    /// Reads what arrived (a request line) and writes what is queued, for one connection.
    private func service(_ id: Int, revents: Int16, _ s: inout State, buffer: inout [UInt8], parsed: inout [(Int, JSONValue)]) {
        guard var c = s.connections[id] else { return }
        if revents & Int16(POLLOUT) != 0, !c.output.isEmpty {
            let n = c.output.withUnsafeBytes { Glibc.send(c.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n > 0 { c.output.removeFirst(n); c.lastWriteMs = monotonicMs() }
            if n < 0 && errno != EAGAIN && errno != EINTR { Self.close(id, &s); return }
        }
        if revents & Int16(POLLIN | POLLHUP | POLLERR) != 0, !c.handling {
            let n = read(c.fd, &buffer, buffer.count)
            if n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) { Self.close(id, &s); return }
            if n > 0 { c.input += buffer[0..<n] }
            if let nl = c.input.firstIndex(of: UInt8(ascii: "\n")) {
                let line = Array(c.input[..<nl])
                c.input = []
                c.handling = true
                switch ControlLine.parseRequest(line) {
                case .failure(let refusal):
                    c.output += Array((ControlLine.refusalLine(refusal.description) + "\n").utf8)
                    c.finishing = true
                case .success(let request):
                    s.admission.requestRead(id)
                    c.output += Array((ControlLine.acceptedLine + "\n").utf8)
                    parsed.append((id, request))
                }
                c.lastWriteMs = monotonicMs()
            } else if c.input.count > ControlLine.maxRequestBytes {
                Self.close(id, &s)
                return
            }
        } else if revents & Int16(POLLHUP | POLLERR) != 0 {
            // The peer went while its request is handled: nothing more can reach it.
            Self.close(id, &s)
            return
        }
        s.connections[id] = c
    }
}

private func monotonicMs() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
}
