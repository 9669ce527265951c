// The daemon's control socket, client side and shared pieces: a Unix stream socket, one JSON
// request line in, an "accepted" line and one JSON response line out (ControlProtocol.swift has
// the rules; ControlSocketServer.swift serves it). The CLI's `status`, `ptt`, `say`, … go
// through it; the client gives up in about a second when nothing answers.

import ClawvoiceCore
package import Foundation
import GatewayCrypto
public import GatewayProtocol
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

package func makeAddress(_ path: String) throws(ControlSocketError) -> sockaddr_un {
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

/// Reads newline-terminated lines from a descriptor with a deadline on each line.
struct LineReader {
    enum Result: Equatable { case line([UInt8]), timedOut, closed, tooLong }
    package let fd: Int32
    private var buffer: [UInt8] = []

    init(fd: Int32) { self.fd = fd }

    /// The next line (without its newline) if it arrives by `deadlineMs` on the `now` clock.
    package mutating func next(deadlineMs: Int64, limit: Int, now: () -> Int64) -> Result {
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
package func writeAll(_ fd: Int32, _ text: String) -> Bool {
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
