// AiortcPeer: one run of tests/peer/webrtc_peer.py, the aiortc far end of a realtime call (the
// provider behind the gateway's offer route), for the call tests and clawvoice-bench --calls.
// Written once here: it starts the peer from the checkout's venv, reads its "listening <port>",
// keeps draining its stdout (one line at a time to `onLine`, so the pipe never fills), answers
// offers and fetches its /stats. Its stdin open keeps it alive; `stop()` closes it and waits.

import Foundation
public import GatewayProtocol
import Synchronization
import Realtime
#if canImport(Glibc)
import Glibc
#endif

public final class AiortcPeer: Sendable {
    /// Why the peer could not start or be reached: one line that says what to do.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
        init(_ d: String) { description = d }
    }

    private let process = Process()
    private let stdin = Pipe()
    public let port: Int
    /// The broker token the peer checks on every offer (D1).
    public let secret = "peer-\(UInt32.random(in: 0...UInt32.max))"
    public var origin: String { "http://127.0.0.1:\(port)" }

    /// The checkout the peer lives in: this source's own place (tests and the bench run from a
    /// checkout), else the working directory.
    public static var repositoryRoot: String {
        let fromSource = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
        return FileManager.default.fileExists(atPath: fromSource + "/tests/peer/webrtc_peer.py")
            ? fromSource : FileManager.default.currentDirectoryPath
    }

    /// Starts the peer and waits for its port. `replyDelayMs`: its scripted pause before it answers
    /// an utterance. `showLog`: its stderr, and its stdout lines as "peer: …", go to our stderr
    /// (else they are discarded). `onLine`: each later line of its stdout (its events, `reply-gap-ms …`).
    public init(replyDelayMs: Int = 0, showLog: Bool = false,
                onLine: @escaping @Sendable (Substring) -> Void = { _ in }) throws {
        let root = Self.repositoryRoot
        let python = root + "/tests/peer/.venv/bin/python"
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw Failure("\(python) is missing: run `make tests/peer/.venv/.ready` (the peer needs aiortc)")
        }
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [root + "/tests/peer/webrtc_peer.py", "--secret", secret, "--reply-delay-ms", String(replyDelayMs)]
        let out = Pipe()
        process.standardInput = stdin
        process.standardOutput = out
        if !showLog { process.standardError = FileHandle.nullDevice }
        try process.run()
        // The first line is "listening <port>".
        var line = Data()
        let handle = out.fileHandleForReading
        while !line.contains(UInt8(ascii: "\n")) {
            let d = handle.availableData
            if d.isEmpty { throw Failure("the WebRTC peer exited before it listened") }
            line += d
        }
        var text = String(decoding: line, as: UTF8.self)
        let first = text.prefix { $0 != "\n" }
        guard first.hasPrefix("listening "), let p = Int(first.dropFirst("listening ".count)) else {
            throw Failure("the WebRTC peer said \(first)")
        }
        port = p
        text = String(text.dropFirst(first.count + 1))
        let pending = Mutex(text)
        handle.readabilityHandler = { h in
            let d = h.availableData
            guard !d.isEmpty else { return }
            let lines = pending.withLock { p -> [Substring] in
                p += String(decoding: d, as: UTF8.self)
                var parts = p.split(separator: "\n", omittingEmptySubsequences: false)
                p = String(parts.removeLast())
                return parts
            }
            for l in lines {
                if showLog { FileHandle.standardError.write(Data("peer: \(l)\n".utf8)) }
                onLine(l)
            }
        }
    }

    /// Our offer through the peer's offer route, as the gateway's broker posts it; its answer.
    public func answer(_ offer: String) async throws -> String {
        try await OfferExchange.post(origin: origin, path: "/talk/offer", secret: secret, offer: offer)
    }

    /// A bodiless HTTP call to the peer (GET /stats, POST /close): its JSON, or its text as a string.
    public func request(_ method: String, _ path: String) async throws -> JSONValue {
        let port = self.port
        let reply: String? = await onOwnThread {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(fd) }
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_port = in_port_t(UInt16(port).bigEndian)
            addr.sin_addr.s_addr = inet_addr("127.0.0.1")
            let ok = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard ok == 0 else { return nil }
            let req = Array("\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n".utf8)
            _ = req.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
            var out: [UInt8] = []
            var buf = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if n <= 0 { break }
                out += buf[0..<n]
            }
            return String(decoding: out, as: UTF8.self)
        }
        guard let text = reply else { throw Failure("cannot reach the WebRTC peer on port \(port)") }
        guard let r = text.range(of: "\r\n\r\n") else { return .null }
        let body = Data(text[r.upperBound...].utf8)
        return (try? JSONCoding.decode(JSONValue.self, from: body)) ?? .string(String(decoding: body, as: UTF8.self))
    }

    /// GET /stats, or nil when the peer cannot be reached.
    public func stats() async -> JSONValue? { try? await request("GET", "/stats") }

    /// GET /stats until `enough` holds or `seconds` pass; the last stats read. On a loaded machine the
    /// Python peer can lag a second or more behind the media it is sent, then catch up at once.
    public func stats(within seconds: Double, until enough: (JSONValue) -> Bool) async -> JSONValue? {
        let deadline = ContinuousClock.now + .seconds(seconds)
        var last = await stats()
        while ContinuousClock.now < deadline, !(last.map(enough) ?? false) {
            try? await Task.sleep(for: .milliseconds(100))
            last = await stats()
        }
        return last
    }

    public func stop() {
        try? stdin.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}
