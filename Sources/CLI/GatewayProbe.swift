// GatewayProbe: pair's look at an address before anything is stored: does an OpenClaw gateway
// answer there (connect.challenge)? When not, a plain TCP connect and a try with the other
// scheme gather what PairDiagnosis needs to say why, in one line, within a few seconds.

import ClawvoiceCore
import Foundation
import GatewayClient
import GatewayCrypto
import GatewayProtocol
import WebSocketTransport
import NodeRuntime
import Daemon
#if canImport(Glibc)
import Glibc
#endif

enum GatewayProbe {
    /// nil when an OpenClaw gateway answers at `url`; else the one line saying why not. A gateway
    /// sends its challenge at once, but a loaded machine (or gateway) can be slow: the socket has
    /// `open` to open, the challenge `challenge` from the start; the checks after a socket that
    /// never opened take 2 s each at most, so the whole stays under 10 s.
    static func check(_ url: String, tlsFingerprint: String?, allowInsecure: Bool,
                      open: Duration = .seconds(5), challenge: Duration = .seconds(9)) async -> String? {
        let result = await look(url, tlsFingerprint: tlsFingerprint, allowInsecure: allowInsecure, open: open, timeout: challenge)
        if result == .gateway { return nil }
        let (host, port, secure) = PairDiagnosis.parts(url)
        var tcp: TCPResult?
        switch result {
        case .notConnected, .noAnswer, .closedBeforeOpen:
            tcp = await tcpCheck(host: host, port: port, timeout: .seconds(2))
        default:
            break
        }
        var other: Bool?
        if tcp == nil || tcp == .connected {
            let swapped = PairDiagnosis.swapScheme(url)
            switch result {
            case .tlsFailed where secure:
                // Only the challenge is read, nothing is sent: plain ws:// is safe to try here.
                other = await look(swapped, tlsFingerprint: nil, allowInsecure: true, open: .seconds(2), timeout: .seconds(2)) == .gateway
            case .closedBeforeOpen where !secure, .upgradeRefused where !secure, .noAnswer where !secure:
                switch await look(swapped, tlsFingerprint: nil, allowInsecure: true, open: .seconds(2), timeout: .seconds(2)) {
                case .gateway, .certificate: other = true
                default: other = false
                }
            default:
                break
            }
        }
        return PairDiagnosis.line(url: url, probe: result, tcp: tcp, otherScheme: other)
    }

    /// One WebSocket connection to `url`: the first thing that decides what answers there. The
    /// socket must open within `open` (the transport fails it after that), the challenge arrive
    /// within `timeout`.
    static func look(_ url: String, tlsFingerprint: String?, allowInsecure: Bool, open: Duration, timeout: Duration) async -> ProbeResult {
        let client: WebSocketClient
        do {
            var o = WebSocketClientOptions()
            o.tlsPinSHA256 = tlsFingerprint
            o.allowInsecureRemote = allowInsecure
            o.connectTimeout = open
            client = try WebSocketClient(url: try WebSocketURL(parsing: url), options: o)
        } catch {
            return .notConnected("\(error)")
        }
        let opened = Locked(false)
        client.connect()
        let decided = await ConnectProbe.first(client, within: timeout, ended: ProbeResult.closedBeforeOpen) { e -> ProbeResult? in
            switch e {
            case .opened:
                opened.withLock { $0 = true }
                return nil
            case .message(let m):
                let frame: GatewayFrame?
                let excerpt: String
                switch m {
                case .text(let s):
                    frame = try? GatewayFrame.decode(s)
                    excerpt = "\"" + String(s.prefix(40)).replacingOccurrences(of: "\n", with: " ") + (s.count > 40 ? "…\"" : "\"")
                case .binary(let b):
                    frame = try? GatewayFrame.decode(b)
                    excerpt = "\(b.count) bytes of binary"
                }
                if case .event(let ev)? = frame, ev.event == GatewayEvent.challenge { return .gateway }
                return .otherMessage(excerpt)
            case .failed(let err):
                return ProbeResult.from(err, opened: opened.withLock { $0 })
            case .closed(let code, let reason):
                return opened.withLock { $0 } ? .closedAfterOpen(code: code, reason: reason) : .closedBeforeOpen
            }
        }
        client.close(code: 1000, reason: "probe")
        let wasOpen = opened.withLock { $0 }
        return decided ?? (wasOpen ? .silent(seconds: Int(timeout.components.seconds)) : .noAnswer(seconds: Int(open.components.seconds)))
    }

    /// A plain TCP connect to `host`:`port` (the first address), on a thread of its own: the
    /// name lookup and the wait block.
    static func tcpCheck(host: String, port: Int, timeout: Duration) async -> TCPResult {
        let ms = Int32(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        return await withCheckedContinuation { (c: CheckedContinuation<TCPResult, Never>) in
            Thread { c.resume(returning: blockingTCPCheck(host: host, port: port, timeoutMs: ms)) }.start()
        }
    }

    private static func blockingTCPCheck(host: String, port: Int, timeoutMs: Int32) -> TCPResult {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var list: UnsafeMutablePointer<addrinfo>?
        let host = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        let rc = getaddrinfo(host, String(port), &hints, &list)
        guard rc == 0, let first = list else {
            switch rc {
            case EAI_NONAME, -5 /* EAI_NODATA */: return .unresolved(temporary: false)
            case EAI_AGAIN: return .unresolved(temporary: true)
            default: return .failed(String(cString: gai_strerror(rc)))
            }
        }
        defer { freeaddrinfo(list) }
        let fd = socket(first.pointee.ai_family, first.pointee.ai_socktype, first.pointee.ai_protocol)
        guard fd >= 0 else { return .failed(String(cString: strerror(errno))) }
        defer { close(fd) }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK)
        var err: Int32 = 0
        if connect(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) != 0 {
            err = errno
            if err == EINPROGRESS {
                var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                let n = poll(&p, 1, timeoutMs)
                if n == 0 { return .timedOut(seconds: Int((timeoutMs + 999) / 1000)) }
                var len = socklen_t(MemoryLayout<Int32>.size)
                err = 0
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len)
            }
        }
        switch err {
        case 0: return .connected
        case ECONNREFUSED: return .refused
        case EHOSTUNREACH, ENETUNREACH, EINVAL, EACCES, EPERM: return .unreachable(String(cString: strerror(err)).lowercased())
        case ETIMEDOUT: return .timedOut(seconds: Int((timeoutMs + 999) / 1000))
        default: return .failed(String(cString: strerror(err)).lowercased())
        }
    }
}
