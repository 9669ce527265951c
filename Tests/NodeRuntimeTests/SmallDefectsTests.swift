// Issue 11, item 8: the small ones an outside tester found. Each test failed before its fix.

import ClawvoiceTesting
import Foundation
import Testing
import GatewayProtocol
import LoopbackGateway
@testable import CLI
@testable import Daemon
@testable import NodeRuntime

private func stderrOneLine(_ o: Outcome, sourceLocation: SourceLocation = #_sourceLocation) -> String {
    #expect(o.status == 1, "\(o)", sourceLocation: sourceLocation)
    #expect(o.stderrLines.count == 1 && o.stderrLines.first?.hasPrefix("clawvoice: ") == true, "\(o)", sourceLocation: sourceLocation)
    return o.stderrLines.first ?? ""
}

@Suite struct `Small defects` {
    @Test func `a setup code that reaches no route says so on stderr`() async throws {
        let json = "{\"url\":\"ws://127.0.0.1:9\",\"bootstrapToken\":\"x\",\"expiresAtMs\":4102444800000}"
        let o = try await CLIEnvironment().run(["pair", base64url(json), "--timeout", "5"])
        let line = stderrOneLine(o)
        #expect(line.contains("no route answered") && line.contains("ws://127.0.0.1:9"), "\(line)")
    }

    @Test func `a wrong token is one line on stderr`() async throws {
        var c = LoopbackGateway.Configuration()
        c.auth = .token("right")
        let g = LoopbackGateway(configuration: c)
        try await g.start()
        defer { Task { await g.stop() } }
        let env = try CLIEnvironment()
        let o = try await env.run(["pair", "--url", await g.url, "--token-file", try env.scratch.write("token", "wrong"), "--timeout", "10"], timeout: .seconds(20))
        let line = stderrOneLine(o)
        #expect(line.lowercased().contains("token"), "\(line)")
        #expect(!o.stdout.contains("Pairing stopped") && !o.stdout.contains("node: ") && !o.stdout.contains("operator: "), "\(o)")
    }

    @Test func `audio devices without a sound server is one line on stderr that does not promise retries`() async throws {
        var env = try CLIEnvironment()
        env.extra["PULSE_SERVER"] = "unix:" + env.scratch.sub("none/native")
        let o = try await env.run(["audio", "devices"])
        let line = stderrOneLine(o)
        #expect(o.stdout.isEmpty, "\(o)")
        #expect(!line.contains("no sound server: no sound server") && !line.contains("keeps retrying"), "\(line)")
        #expect(line.contains("no sound server answers"), "\(line)")
    }

    @Test func `a URL with a non-ASCII path is reported as a bad path, not a bad port`() async throws {
        let env = try CLIEnvironment()
        let o = try await env.run(["pair", "--url", "ws://localhost:9/é", "--token-file", try env.scratch.write("token", "x"), "--timeout", "2"])
        #expect(o.stderrLines.count == 1 && o.stderr.contains("path") && !o.stderr.contains("port"), "\(o)")
    }
}

@Suite struct `Session key checks` {
    @Test func `the control socket refuses a non-string, empty or oversized session key`() async throws {
        #expect(ControlLine.parseRequest(Array(#"{"cmd":"session","use":"agent:main:kitchen"}"#.utf8))
                == .success(["cmd": "session", "use": "agent:main:kitchen"]))
        #expect(ControlLine.parseRequest(Array(#"{"cmd":"session"}"#.utf8)) == .success(["cmd": "session"]))
        for bad in [#"{"cmd":"session","use":5}"#, #"{"cmd":"session","use":null}"#, #"{"cmd":"session","use":""}"#,
                    #"{"cmd":"session","use":"a b"}"#,
                    "{\"cmd\":\"session\",\"use\":\"" + String(repeating: "k", count: 60_000) + "\"}"] {
            if case .success = ControlLine.parseRequest(Array(bad.utf8)) { Issue.record("accepted \(bad.prefix(60))") }
        }
        // Through a real socket, the refusal is the answer.
        let scratch = try Scratch()
        let server = try ControlSocketServer(path: scratch.sub("c.sock")) { _ in ["ok": true] }
        defer { server.stop() }
        async let serving: Void = server.run()
        let r = try await sendOffPool(["cmd": "session", "use": 5], path: scratch.sub("c.sock"), timeoutSeconds: 2)
        #expect(r["ok"] == false && r["error"]?.stringValue?.contains("must be a string") == true, "\(r)")
    }

    @Test func `session use with a 100 KiB key is a usage error before anything is sent`() async throws {
        let o = try await CLIEnvironment().run(["session", "use", String(repeating: "k", count: 100 * 1024)])
        #expect(o.status == 2 && o.stderrLines.count == 1 && o.stderr.contains("at most 256 bytes"), "\(o.stderr.prefix(300))")
    }
}

@Suite struct `Reading the outbox when nothing can be written` {
    /// A full disk, as one process sees it: RLIMIT_FSIZE 0 makes every write that would grow a
    /// file fail (EFBIG; SIGXFSZ ignored), which SQLite reports as it does ENOSPC.
    @Test(arguments: [true, false])
    func `outbox list works with no room to write`(gatewayFromEnvironment: Bool) async throws {
        var env = try CLIEnvironment()
        env.extra["CLAWVOICE_GATEWAY_URL"] = "ws://127.0.0.1:9"
        let queued = try await env.run(["send", "hello there"])
        try #require(queued.status == 0, "\(queued)")
        if !gatewayFromEnvironment { env.extra["CLAWVOICE_GATEWAY_URL"] = nil }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/sh")
        p.arguments = ["-c", "trap '' XFSZ; ulimit -f 0; exec \"$0\" outbox list", try ExecutableLookup.require().path]
        p.environment = env.variables
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let errors = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        _ = await eventually(.seconds(10)) { !p.isRunning }
        #expect(p.terminationStatus == 0 && text.contains("\"hello there\""), "\(text)\(errors)")
    }
}

@Suite struct `say with the gateway down` {
    @Test func `with no daemon and the gateway down, say speaks with espeak-ng without waiting out retries`() async throws {
        var env = try CLIEnvironment()
        env.extra["CLAWVOICE_GATEWAY_URL"] = "ws://127.0.0.1:9"
        env.extra["CLAWVOICE_GATEWAY_TOKEN"] = "t"
        let out = env.scratch.sub("say.wav")
        let started = ContinuousClock.now
        let o = try await env.run(["say", "Dinner is ready", "--out", out], timeout: .seconds(30))
        let took = ContinuousClock.now - started
        #expect(o.status == 0 && o.stdout.contains("via espeak-ng"), "\(o)")
        #expect(FileManager.default.fileExists(atPath: out))
        // It took about 10 s before; the connection is refused at once.
        #expect(took < .seconds(5), "say took \(took)")
    }
}
