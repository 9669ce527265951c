// The daemon's control socket: a Unix stream socket, one JSON request line in, one JSON
// response line out. The CLI's `status` (and later `ptt`, `say`, …) go through it.

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

    public var description: String {
        switch self {
        case .pathTooLong(let p): return "control socket path is too long: \(p)"
        case .call(let c, let e, let p): return "\(c) on \(p): \(String(cString: strerror(e)))"
        case .daemonNotRunning(let p): return "the clawvoice daemon is not running (no control socket at \(p)); start it with `clawvoice run`"
        case .alreadyRunning(let p): return "another clawvoice daemon is already running (it answers on \(p)); stop it first or check it with `clawvoice status`"
        case .badResponse: return "the daemon sent a response that is not JSON"
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

/// Serves the control socket on its own thread; each request is answered by `handler`.
public final class ControlSocketServer: @unchecked Sendable {
    public typealias Handler = @Sendable (JSONValue) async -> JSONValue
    /// A request answered by a stream of lines (`events`) instead of one response; nil: not a stream.
    public typealias Streamer = @Sendable (JSONValue) -> (lines: AsyncStream<String>, end: @Sendable () -> Void)?
    private let path: String
    private let fd: Int32
    private let handler: Handler
    private let streamer: Streamer?
    private let stopped = LockedBox(false)

    public init(path: String, streamer: Streamer? = nil, handler: @escaping Handler) throws(ControlSocketError) {
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
        let s = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard s >= 0 else { throw .call("socket", errno, path) }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(s, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else { let e = errno; close(s); throw .call("bind", e, path) }
        chmod(path, 0o600)
        guard listen(s, 16) == 0 else { let e = errno; close(s); throw .call("listen", e, path) }
        fd = s
        let thread = Thread { [weak self] in self?.acceptLoop() }
        thread.name = "clawvoice-control"
        thread.start()
    }

    private func acceptLoop() {
        while !stopped.get() {
            let c = accept(fd, nil, nil)
            if c < 0 {
                if errno == EINTR { continue }
                return
            }
            let (handler, streamer) = (self.handler, self.streamer)
            Thread.detachNewThread {
                ControlSocketServer.serve(c, handler: handler, streamer: streamer)
            }
        }
    }

    private static func serve(_ c: Int32, handler: @escaping Handler, streamer: Streamer?) {
        defer { close(c) }
        var tv = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        guard let line = readLine(c) else { return }
        let request: JSONValue
        if let v = try? JSONCoding.decode(JSONValue.self, from: Data(line.utf8)) {
            request = v
        } else {
            writeAll(c, "{\"ok\":false,\"error\":\"request is not JSON\"}\n")
            return
        }
        if let (lines, end) = streamer?(request) {
            // One line per item until the client goes (a write fails) or the stream ends.
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
        Task {
            box.set(await handler(request))
            done.signal()
        }
        done.wait()
        let response = box.get() ?? ["ok": false, "error": "no response"]
        writeAll(c, ((try? JSONCoding.string(response)) ?? "{}") + "\n")
    }

    public func stop() {
        guard !stopped.get() else { return }
        stopped.set(true)
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
        unlink(path)
    }

    deinit { stop() }
}

func readLine(_ fd: Int32, limit: Int = 1 << 20) -> String? {
    var bytes: [UInt8] = []
    var b: UInt8 = 0
    while bytes.count < limit {
        let n = read(fd, &b, 1)
        if n <= 0 { return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self) }
        if b == UInt8(ascii: "\n") { break }
        bytes.append(b)
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// False when the peer is gone.
@discardableResult
func writeAll(_ fd: Int32, _ text: String) -> Bool {
    let data = Array(text.utf8)
    let total = data.count
    var off = 0
    while off < total {
        let n = data.withUnsafeBytes { write(fd, $0.baseAddress! + off, total - off) }
        if n <= 0 { return false }
        off += n
    }
    return true
}

/// The CLI side: one request, one response.
public enum ControlSocketClient {
    public static func send(_ request: JSONValue, path: String, timeoutSeconds: Int = 30) throws(ControlSocketError) -> JSONValue {
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
        var tv = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        writeAll(s, ((try? JSONCoding.string(request)) ?? "{}") + "\n")
        guard let line = readLine(s), let v = try? JSONCoding.decode(JSONValue.self, from: Data(line.utf8)) else {
            throw .badResponse
        }
        return v
    }
}

extension ControlSocketClient {
    /// Sends `request` and hands each line of the answer to `onLine` until the daemon closes
    /// the connection (or `onLine` returns false). No timeout: events may be minutes apart.
    public static func stream(_ request: JSONValue, path: String, onLine: (String) -> Bool) throws(ControlSocketError) {
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
        while let line = readLine(s) {
            if !onLine(line) { return }
        }
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
