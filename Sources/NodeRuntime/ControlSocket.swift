// The daemon's control socket: a Unix stream socket, one JSON request line in, an
// "accepted" line and one JSON response line out (ControlProtocol.swift has the rules). The
// CLI's `status`, `ptt`, `say`, … go through it. The accept loop survives descriptor
// exhaustion; idle and slow clients are timed out; the client gives up in about a second
// when nothing answers.

import Foundation
import GatewayProtocol
#if canImport(Glibc)
import Glibc
#endif

public enum ControlSocketError: Error, Sendable, CustomStringConvertible {
    case pathTooLong(String)
    case call(String, Int32, String)
    case daemonNotRunning(String)
    case alreadyRunning(String)
    case badResponse
    case notAnswering(String)
    case noResponse(String, Int)

    public var description: String {
        switch self {
        case .pathTooLong(let p): return "control socket path is too long: \(p)"
        case .call(let c, let e, let p): return "\(c) on \(p): \(String(cString: strerror(e)))"
        case .daemonNotRunning(let p): return "the clawvoice daemon is not running (no control socket at \(p)); start it with `clawvoice run`"
        case .alreadyRunning(let p): return "another clawvoice daemon is already running (it answers on \(p)); stop it first or check it with `clawvoice status`"
        case .badResponse: return "the daemon sent a response that is not JSON"
        case .notAnswering(let p): return "the daemon does not answer on \(p) (no reply within a second); it may be hung or overloaded, check it with `systemctl --user status clawvoice` or restart it"
        case .noResponse(let p, let s): return "the daemon took the request on \(p) but gave no answer within \(s) s"
        }
    }
}

private func makeAddress(_ path: String) throws(ControlSocketError) -> sockaddr_un {
    var addr = sockaddr_un()
    addr.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    let capacity = MemoryLayout.size(ofValue: addr.sun_path)
    guard bytes.count < capacity else { throw .pathTooLong(path) }
    withUnsafeMutableBytes(of: &addr.sun_path) { raw in
        for (i, b) in bytes.enumerated() { raw[i] = b }
        raw[bytes.count] = 0
    }
    return addr
}

/// Serves the control socket on its own thread; each request is answered by `handler` on a
/// thread of its own. ControlAdmission decides which connections are kept.
public final class ControlSocketServer: @unchecked Sendable {
    public typealias Handler = @Sendable (JSONValue) async -> JSONValue
    /// A request answered by a stream of lines (`events`) instead of one response; nil: not a stream.
    public typealias Streamer = @Sendable (JSONValue) -> (lines: AsyncStream<String>, end: @Sendable () -> Void)?
    private let path: String
    private let fd: Int32
    private let handler: Handler
    private let streamer: Streamer?
    private let stopped = LockedBox(false)
    /// Admission state and the descriptor of each open connection, under one lock. A connection's
    /// own thread is the only one that closes its descriptor (after removing it here), so the
    /// accept loop can `shutdown` a shed one without racing a reuse of the number.
    private let lock = NSLock()
    private var admission: ControlAdmission
    private var descriptors: [Int: Int32] = [:]
    private var nextId = 0
    /// Kept open so that at EMFILE one descriptor can be freed to tell the waiting client "busy".
    private var spare: Int32 = -1

    public init(path: String, limits: ControlAdmission.Limits = .init(), streamer: Streamer? = nil,
                handler: @escaping Handler) throws(ControlSocketError) {
        self.path = path
        self.handler = handler
        self.streamer = streamer
        self.admission = ControlAdmission(limits: limits)
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
        let s = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard s >= 0 else { throw .call("socket", errno, path) }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(s, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else { let e = errno; close(s); throw .call("bind", e, path) }
        chmod(path, 0o600)
        guard listen(s, 64) == 0 else { let e = errno; close(s); throw .call("listen", e, path) }
        fd = s
        spare = open("/dev/null", O_RDONLY | O_CLOEXEC)
        let thread = Thread { [weak self] in self?.acceptLoop() }
        thread.name = "clawvoice-control"
        thread.start()
    }

    /// Connections open right now (for tests and status).
    public var openConnections: Int { lock.lock(); defer { lock.unlock() }; return admission.count }

    private static func nowMs() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    private func acceptLoop() {
        while !stopped.get() {
            let c = acceptCloexec(fd)
            if stopped.get() { if c >= 0 { close(c) }; return }
            if c < 0 {
                let e = errno
                lock.lock()
                let r = admission.acceptFailed(errno: e)
                if let victim = r.shed, let vfd = descriptors[victim] { shutdown(vfd, Int32(SHUT_RDWR)) }
                lock.unlock()
                if r.outOfDescriptors && r.shed == nil { answerBusyWithSpare() }
                if r.pauseMs > 0 { usleep(useconds_t(r.pauseMs * 1000)) }
                continue
            }
            lock.lock()
            let id = nextId
            nextId += 1
            let decision = admission.accepted(id, nowMs: Self.nowMs())
            if case .serveShedding(let victim) = decision, let vfd = descriptors[victim] { shutdown(vfd, Int32(SHUT_RDWR)) }
            if decision != .refuseBusy { descriptors[id] = c }
            let deadline = admission.readDeadline(id) ?? 0
            lock.unlock()
            if decision == .refuseBusy {
                Self.refuse(c, "the daemon is busy (\(admission.limits.maxConnections) requests in progress); try again")
                close(c)
                continue
            }
            Thread.detachNewThread { [self] in serve(id, c, deadlineMs: deadline) }
        }
    }

    /// The descriptor table is full and nothing idle can be shed: free the spare, take the
    /// waiting client, tell it we are busy, and take the spare back.
    private func answerBusyWithSpare() {
        guard spare >= 0 else { return }
        close(spare)
        spare = -1
        let c = acceptCloexec(fd)
        if c >= 0 {
            Self.refuse(c, "the daemon is out of file descriptors; try again")
            close(c)
        }
        spare = open("/dev/null", O_RDONLY | O_CLOEXEC)
    }

    private static func refuse(_ c: Int32, _ message: String) {
        var tv = timeval(tv_sec: 0, tv_usec: 200_000)
        setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        writeAll(c, ControlLine.refusalLine(message) + "\n")
    }

    private func serve(_ id: Int, _ c: Int32, deadlineMs: Int64) {
        defer {
            lock.lock()
            admission.closed(id)
            descriptors[id] = nil
            lock.unlock()
            close(c)
        }
        // A client that does not read its answer must not hold the thread either.
        var tv = timeval(tv_sec: 3, tv_usec: 0)
        setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var reader = LineReader(fd: c)
        guard case .line(let bytes) = reader.next(deadlineMs: deadlineMs, limit: ControlLine.maxRequestBytes, now: Self.nowMs) else {
            return  // timed out, shed, too long or closed before a whole line
        }
        let request: JSONValue
        switch ControlLine.parseRequest(bytes) {
        case .failure(let refusal): writeAll(c, ControlLine.refusalLine(refusal.description) + "\n"); return
        case .success(let v): request = v
        }
        lock.lock()
        admission.requestRead(id)
        lock.unlock()
        writeAll(c, ControlLine.acceptedLine + "\n")
        if let (lines, end) = streamer?(request) {
            // A streaming request (`events`): one line per item until the client goes (a write
            // fails or times out) or the stream ends.
            let done = DispatchSemaphore(value: 0)
            Task {
                for await line in lines where !writeAll(c, line + "\n") { break }
                end()
                done.signal()
            }
            done.wait()
            return
        }
        let box = LockedBox<JSONValue?>(nil)
        let done = DispatchSemaphore(value: 0)
        let handler = self.handler
        Task {
            box.set(await handler(request))
            done.signal()
        }
        done.wait()
        let response = box.get() ?? ["ok": false, "error": "no response"]
        writeAll(c, ControlLine.responseLine(response) + "\n")
    }

    public func stop() {
        guard !stopped.get() else { return }
        stopped.set(true)
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
        unlink(path)
        lock.lock()
        if spare >= 0 { close(spare); spare = -1 }
        lock.unlock()
    }

    deinit { stop() }
}

/// accept(2) with the new descriptor marked close-on-exec (Glibc's module has no accept4).
private func acceptCloexec(_ fd: Int32) -> Int32 {
    let c = accept(fd, nil, nil)
    if c >= 0 { _ = fcntl(c, F_SETFD, FD_CLOEXEC) }
    return c
}

/// Reads newline-terminated lines from a descriptor with a deadline on each line.
struct LineReader {
    enum Result: Equatable { case line([UInt8]), timedOut, closed, tooLong }
    let fd: Int32
    private var buffer: [UInt8] = []

    init(fd: Int32) { self.fd = fd }

    /// The next line (without its newline) if it arrives by `deadlineMs` on the `now` clock.
    mutating func next(deadlineMs: Int64, limit: Int, now: () -> Int64) -> Result {
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            if let nl = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = Array(buffer[..<nl])
                buffer.removeSubrange(...nl)
                return line.count > limit ? .tooLong : .line(line)
            }
            if buffer.count > limit { return .tooLong }
            let left = deadlineMs - now()
            if left <= 0 { return .timedOut }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let r = poll(&p, 1, Int32(min(left, 60_000)))
            if r < 0 { if errno == EINTR { continue }; return .closed }
            if r == 0 { continue }
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return .closed }
            buffer += chunk[0..<n]
        }
    }
}

/// False when the peer is gone.
@discardableResult
func writeAll(_ fd: Int32, _ text: String) -> Bool {
    let data = Array(text.utf8)
    let total = data.count
    var off = 0
    while off < total {
        let n = data.withUnsafeBytes { send(fd, $0.baseAddress! + off, total - off, Int32(MSG_NOSIGNAL)) }
        if n < 0 && errno == EINTR { continue }
        if n <= 0 { return false }
        off += n
    }
    return true
}

/// The CLI side: one request, one response. Gives up after `answerWithinMs` when the daemon
/// does not even take the request (full backlog, dead accept loop, hung process).
public enum ControlSocketClient {
    public static func send(_ request: JSONValue, path: String, timeoutSeconds: Int = 30,
                            answerWithinMs: Int64 = 1_000) throws(ControlSocketError) -> JSONValue {
        var addr = try makeAddress(path)
        let s = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard s >= 0 else { throw .call("socket", errno, path) }
        defer { close(s) }
        let clock = { () -> Int64 in
            var ts = timespec()
            clock_gettime(CLOCK_MONOTONIC, &ts)
            return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
        }
        let answerBy = clock() + answerWithinMs
        // Non-blocking connect: a Unix socket whose backlog is full says EAGAIN at once instead of
        // blocking; retry until the deadline.
        while true {
            let rc = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(s, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            if rc == 0 { break }
            let e = errno
            if e == ENOENT || e == ECONNREFUSED { throw .daemonNotRunning(path) }
            if e == EINTR { continue }
            if e == EAGAIN || e == EINPROGRESS {
                if clock() >= answerBy { throw .notAnswering(path) }
                usleep(20_000)
                continue
            }
            throw .call("connect", e, path)
        }
        _ = fcntl(s, F_SETFL, fcntl(s, F_GETFL) & ~O_NONBLOCK)
        var tv = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        writeAll(s, ControlLine.responseLine(request) + "\n")
        var reader = LineReader(fd: s)
        var deadline = answerBy
        var accepted = false
        while true {
            switch reader.next(deadlineMs: deadline, limit: 16 << 20, now: clock) {
            case .timedOut:
                throw accepted ? .noResponse(path, timeoutSeconds) : .notAnswering(path)
            case .closed, .tooLong:
                throw accepted ? .badResponse : .notAnswering(path)
            case .line(let bytes):
                switch ControlLine.parseReply(bytes) {
                case .malformed: throw .badResponse
                case .response(let v): return v
                case .accepted:
                    guard !accepted else { throw .badResponse }
                    accepted = true
                    deadline = clock() + Int64(timeoutSeconds) * 1000
                }
            }
        }
    }
}

extension ControlSocketClient {
    /// Sends `request` and hands each line of the answer to `onLine` until the daemon closes
    /// the connection (or `onLine` returns false). No timeout: events may be minutes apart.
    /// Returns true when the daemon ended the stream (it stopped or went away), false when
    /// `onLine` did.
    @discardableResult
    public static func stream(_ request: JSONValue, path: String, onLine: (String) -> Bool) throws(ControlSocketError) -> Bool {
        var addr = try makeAddress(path)
        let s = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard s >= 0 else { throw .call("socket", errno, path) }
        defer { close(s) }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(s, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else {
            let e = errno
            if e == ENOENT || e == ECONNREFUSED { throw .daemonNotRunning(path) }
            throw .call("connect", e, path)
        }
        writeAll(s, ((try? JSONCoding.string(request)) ?? "{}") + "\n")
        var reader = LineReader(fd: s)
        var first = true
        while case .line(let bytes) = reader.next(deadlineMs: .max, limit: 1 << 20, now: { 0 }) {
            let line = String(decoding: bytes, as: UTF8.self)
            // The daemon first says it took the request (ControlLine.acceptedLine).
            if first && line == ControlLine.acceptedLine { first = false; continue }
            first = false
            if !onLine(line) { return false }
        }
        return true
    }
}

/// A tiny lock box for values shared with the socket threads.
final class LockedBox<T>: @unchecked Sendable {
    private var value: T
    private let lock = NSLock()
    init(_ v: T) { value = v }
    func get() -> T { lock.lock(); defer { lock.unlock() }; return value }
    func set(_ v: T) { lock.lock(); value = v; lock.unlock() }
}
