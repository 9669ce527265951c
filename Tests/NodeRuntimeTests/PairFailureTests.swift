// Issue 24, item 3: an address that cannot work made `pair` retry forever, showing
// libwebsockets' words ("lws_client_connect_via_info failed") and "still waiting for approval"
// with nothing pending, and stored every failed try as the active gateway. Now each wrong
// address ends within 10 s with one line naming the URL and the fix, and nothing is stored.
// Wrong hosts and routes live in a namespace of their own (tests/pairing/netns.sh).

import Foundation
import Testing
import LoopbackGateway
import WebSocketTransport
@testable import CLI
@testable import Daemon
@testable import NodeRuntime
#if canImport(Glibc)
import Glibc
#endif

/// The network namespace of tests/pairing/netns.sh: an unreachable TEST-NET route and a DNS stub
/// that knows no name under pairing.test.
final class PairNamespace: @unchecked Sendable {
    static let script = repositoryRoot().appendingPathComponent("tests/pairing/netns.sh").path
    let dir: String

    init() throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/bash")
        p.arguments = [Self.script, "start"]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        guard p.terminationStatus == 0, let r = text.range(of: "CLAWVOICE_PAIR_NS_DIR=") else {
            throw CLI.Failure(description: "netns.sh start failed (exit \(p.terminationStatus)): \(text)")
        }
        dir = String(text[r.upperBound...]).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    deinit {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/bash")
        p.arguments = [Self.script, "stop"]
        p.environment = ["CLAWVOICE_PAIR_NS_DIR": dir, "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"]
        try? p.run()
        p.waitUntilExit()
    }
}

extension CLIEnvironment {
    func run(in ns: PairNamespace, _ args: [String], timeout: Duration = .seconds(20)) async throws -> Outcome {
        var env = variables
        env["CLAWVOICE_PAIR_NS_DIR"] = ns.dir
        let p = try Spawned([PairNamespace.script, "exec", try ExecutableLookup.require().path] + args, env: env, in: scratch,
                            executable: URL(fileURLWithPath: "/bin/bash"))
        let status = await p.waitForExit(timeout)
        return Outcome(status: status, stdout: p.stdout, stderr: p.stderr)
    }
}

/// A one-answer TCP server on 127.0.0.1: every connection gets `reply` and is closed (an HTTP
/// server that is not a gateway).
final class CannedTCPServer: @unchecked Sendable {
    let port: Int
    private let fd: Int32

    init(reply: String) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.fd = fd
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0, listen(fd, 8) == 0 else { throw CLI.Failure(description: "cannot listen: \(errno)") }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        port = Int(UInt16(bigEndian: addr.sin_port))
        let listener = fd
        Thread {
            while true {
                let c = accept(listener, nil, nil)
                if c < 0 { return }
                var buf = [UInt8](repeating: 0, count: 4096)
                _ = read(c, &buf, buf.count)
                _ = reply.withCString { write(c, $0, strlen($0)) }
                close(c)
            }
        }.start()
    }

    deinit { shutdown(fd, Int32(SHUT_RDWR)); close(fd) }
}

/// A WebSocket server that greets every client with something other than connect.challenge.
func chattyWebSocketServer(greeting: String) throws -> WebSocketServer {
    let server = try WebSocketServer()
    Task {
        for await e in server.events {
            if case .connected(let id, _) = e { server.send(.text(greeting), to: id) }
        }
    }
    return server
}

/// The contract for a wrong address: within 10 s, exit 1, one line naming the URL and `fix`,
/// no libwebsockets words, nothing pending claimed, and no gateway stored.
@discardableResult
private func expectQuickFailure(_ env: CLIEnvironment, _ o: Outcome, took: Duration, url: String, saying phrases: [String],
                                sourceLocation: SourceLocation = #_sourceLocation) async throws -> String {
    #expect(o.status == 1, "\(o)", sourceLocation: sourceLocation)
    #expect(took < .seconds(10), "took \(took): \(o)", sourceLocation: sourceLocation)
    #expect(o.stderrLines.count == 1, "\(o)", sourceLocation: sourceLocation)
    let line = o.stderrLines.first ?? ""
    #expect(line.contains(url), "the line must name what was tried: \(line)", sourceLocation: sourceLocation)
    for p in phrases { #expect(line.contains(p), "expected '\(p)' in: \(line)", sourceLocation: sourceLocation) }
    #expect(!(o.stdout + o.stderr).contains("lws_"), "libwebsockets' words shown: \(o)", sourceLocation: sourceLocation)
    #expect(!o.stdout.contains("waiting for approval"), "\(o)", sourceLocation: sourceLocation)
    let list = try await env.run(["gateways"])
    #expect(list.stdout.contains("No gateways paired yet"), "a failed try was stored: \(list)", sourceLocation: sourceLocation)
    return line
}

private func timed(_ body: () async throws -> Outcome) async rethrows -> (Outcome, Duration) {
    let start = ContinuousClock.now
    let o = try await body()
    return (o, ContinuousClock.now - start)
}

@Suite struct `Pair failure lines` {
    @Test func `each failure is one line naming the URL and a fix`() {
        func line(_ url: String, _ p: ProbeResult, _ tcp: TCPResult? = nil, _ other: Bool? = nil) -> String {
            PairDiagnosis.line(url: url, probe: p, tcp: tcp, otherScheme: other)
        }
        let cases: [(String, [String])] = [
            (line("ws://127.0.0.1:1", .notConnected("lws x"), .refused), ["ws://127.0.0.1:1: connection refused", "port 1", "18789"]),
            (line("ws://gw.lan:18789", .notConnected("lws"), .unresolved(temporary: false)), ["no such host gw.lan", "spelling"]),
            (line("ws://gw.lan:18789", .notConnected("lws"), .unresolved(temporary: true)), ["cannot look up gw.lan", "DNS"]),
            (line("ws://192.0.2.1:18789", .notConnected("lws"), .unreachable("no route to host")), ["no route to 192.0.2.1", "network"]),
            (line("ws://10.9.9.9:18789", .noAnswer(seconds: 4), .timedOut(seconds: 3)), ["no answer from 10.9.9.9 port 18789 within 3 s", "firewall"]),
            (line("wss://127.0.0.1:5", .tlsFailed("TLS handshake with 127.0.0.1:5 failed: wrong version number"), nil, true),
             ["does not speak TLS", "ws://127.0.0.1:5"]),
            (line("wss://127.0.0.1:5", .tlsFailed("TLS handshake failed: x"), nil, false), ["TLS handshake failed", "use ws://"]),
            (line("ws://127.0.0.1:5", .closedBeforeOpen, .connected, true), ["speaks TLS", "use wss://127.0.0.1:5"]),
            (line("ws://127.0.0.1:5", .upgradeRefused("HTTP 404 Not Found"), nil, false), ["an HTTP server answers", "not an OpenClaw gateway", "404"]),
            (line("ws://127.0.0.1:5", .otherMessage("\"hello\""), nil, nil), ["WebSocket server answers", "not an OpenClaw gateway", "\"hello\""]),
            (line("ws://127.0.0.1:5", .silent(seconds: 4), nil, nil), ["no connect.challenge within 4 s"]),
            (line("wss://gw:443", .certificate("self-signed certificate"), nil, nil), ["certificate", "--tls-fingerprint"]),
        ]
        for (text, phrases) in cases {
            #expect(!text.contains("\n") && !text.contains("lws"), "\(text)")
            for p in phrases { #expect(text.contains(p), "expected '\(p)' in: \(text)") }
        }
    }

    @Test func `the transport's failures are sorted by what they mean`() {
        #expect(ProbeResult.from(.connectFailed("TLS handshake with h:1 failed: wrong version number"), opened: false) == .tlsFailed("TLS handshake with h:1 failed: wrong version number"))
        #expect(ProbeResult.from(.connectFailed("WebSocket upgrade to ws://h:1/ refused: HTTP 404 Not Found"), opened: false) == .upgradeRefused("HTTP 404 Not Found"))
        #expect(ProbeResult.from(.connectFailed("h:1 closed the connection before the WebSocket opened"), opened: false) == .closedBeforeOpen)
        #expect(ProbeResult.from(.connectFailed("lws_client_connect_via_info failed for ws://h:1/"), opened: false) == .notConnected("lws_client_connect_via_info failed for ws://h:1/"))
        #expect(ProbeResult.from(.untrustedCertificate(host: "h", reason: "self-signed certificate", sha256: nil), opened: false) == .certificate("self-signed certificate"))
    }

    @Test func `pair's progress line names what is pending, and nothing when nothing is`() {
        typealias V = PairProgress.SessionStatusView
        #expect(PairProgress.line(node: V(state: "paused", detail: "x"), operator: nil, waitedSeconds: 30) == nil)
        #expect(PairProgress.line(node: V(state: "connected", detail: "ok"), operator: V(state: "connected", detail: "ok"), waitedSeconds: 30) == nil)
        #expect(PairProgress.line(node: nil, operator: nil, waitedSeconds: 30) == nil)
        let approval = PairProgress.line(node: V(state: "pairing", detail: "waiting", requestId: "r_1"), operator: V(state: "connected", detail: "ok"), waitedSeconds: 30)
        #expect(approval == "still waiting for approval of node (request r_1) on the gateway (30 s)…")
        let connecting = PairProgress.line(node: V(state: "waiting", detail: "gateway starting; retrying in 2 s"), operator: nil, waitedSeconds: 60)
        #expect(connecting?.contains("still connecting (60 s): node: gateway starting") == true)
        #expect(connecting?.contains("approval") == false)
    }
}

@Suite(.serialized) struct `Pair with an address that cannot work` {
    @Test func `a closed port is refused in a second and nothing is stored`() async throws {
        let env = try CLIEnvironment()
        try env.scratch.write("tok", "t\n")
        let (o, took) = try await timed { try await env.run(["pair", "--url", "ws://127.0.0.1:1", "--token-file", env.scratch.sub("tok")]) }
        try await expectQuickFailure(env, o, took: took, url: "ws://127.0.0.1:1", saying: ["connection refused", "nothing listens"])
    }

    @Test func `no such host and no route, in a namespace of their own`() async throws {
        let ns = try PairNamespace()
        let env = try CLIEnvironment()
        try env.scratch.write("tok", "t\n")
        let tok = env.scratch.sub("tok")
        var (o, took) = try await timed { try await env.run(in: ns, ["pair", "--url", "ws://gatewy.pairing.test:18789", "--allow-insecure", "--token-file", tok]) }
        try await expectQuickFailure(env, o, took: took, url: "ws://gatewy.pairing.test:18789", saying: ["no such host gatewy.pairing.test"])
        (o, took) = try await timed { try await env.run(in: ns, ["pair", "--url", "wss://192.0.2.7:18789", "--token-file", tok]) }
        try await expectQuickFailure(env, o, took: took, url: "wss://192.0.2.7:18789", saying: ["no route to 192.0.2.7"])
    }

    @Test func `wss to a plain gateway and ws to a TLS one name the scheme that works`() async throws {
        let env = try CLIEnvironment()
        try env.scratch.write("tok", "t\n")
        let tok = env.scratch.sub("tok")
        let plain = try await startGateway(auth: .token("t"), autoApprove: true)
        defer { Task { await plain.stop() } }
        let port = await plain.port
        var (o, took) = try await timed { try await env.run(["pair", "--url", "wss://127.0.0.1:\(port)", "--token-file", tok]) }
        try await expectQuickFailure(env, o, took: took, url: "wss://127.0.0.1:\(port)",
                                     saying: ["does not speak TLS", "plain ws://127.0.0.1:\(port)"])

        let cert = env.scratch.sub("cert.pem"), key = env.scratch.sub("key.pem")
        try SelfSignedCertificate.generate(commonName: "127.0.0.1", certPath: cert, keyPath: key)
        var c = LoopbackGateway.Configuration()
        c.tlsCertificatePath = cert
        c.tlsKeyPath = key
        let tls = LoopbackGateway(configuration: c)
        try await tls.start()
        defer { Task { await tls.stop() } }
        let tport = await tls.port
        (o, took) = try await timed { try await env.run(["pair", "--url", "ws://127.0.0.1:\(tport)", "--token-file", tok]) }
        try await expectQuickFailure(env, o, took: took, url: "ws://127.0.0.1:\(tport)", saying: ["speaks TLS", "use wss://127.0.0.1:\(tport)"])
    }

    @Test func `an HTTP server or a WebSocket server that is not a gateway is named as such`() async throws {
        let env = try CLIEnvironment()
        try env.scratch.write("tok", "t\n")
        let tok = env.scratch.sub("tok")
        let http = try CannedTCPServer(reply: "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        var (o, took) = try await timed { try await env.run(["pair", "--url", "ws://127.0.0.1:\(http.port)", "--token-file", tok]) }
        try await expectQuickFailure(env, o, took: took, url: "ws://127.0.0.1:\(http.port)", saying: ["HTTP server", "not an OpenClaw gateway", "404"])

        let ws = try chattyWebSocketServer(greeting: "{\"hello\":\"world\"}")
        defer { ws.shutdown(grace: .zero) }
        (o, took) = try await timed { try await env.run(["pair", "--url", "ws://127.0.0.1:\(ws.port)", "--token-file", tok]) }
        try await expectQuickFailure(env, o, took: took, url: "ws://127.0.0.1:\(ws.port)", saying: ["WebSocket server", "not an OpenClaw gateway", "hello"])
    }

    @Test func `six typos leave no gateway behind and the paired one active`() async throws {
        let gateway = try await startGateway(auth: .token("good"), autoApprove: true)
        defer { Task { await gateway.stop() } }
        let env = try CLIEnvironment()
        try env.scratch.write("tok", "good\n")
        let tok = env.scratch.sub("tok")
        let ok = try await env.run(["pair", "--url", await gateway.url, "--token-file", tok, "--timeout", "20"], timeout: .seconds(25))
        #expect(ok.status == 0, "\(ok)")
        let port = await gateway.port
        let typos = ["ws://127.0.0.1:1", "ws://127.0.0.1:5", "wss://127.0.0.1:\(port)", "ws://127.0.0.1:2/",
                     "ws://127.0.0.1:3", "ws://127.0.0.1:4"]
        for url in typos {
            let o = try await env.run(["pair", "--url", url, "--token-file", tok], timeout: .seconds(12))
            #expect(o.status == 1 && o.stderrLines.count == 1, "\(url): \(o)")
        }
        let list = try await env.run(["gateways"])
        let lines = list.stdout.split(separator: "\n")
        #expect(lines.count == 1, "\(list)")
        #expect(lines.first?.hasPrefix("* 127.0.0.1:\(port)") == true, "\(list)")
    }
}
