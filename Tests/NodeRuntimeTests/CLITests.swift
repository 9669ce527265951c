import ClawvoiceTesting
import Foundation
import GatewayProtocol
import Testing
import LoopbackGateway
#if canImport(Glibc)
import Glibc
#endif

// These run the real `clawvoice` executable, each with its own state dir and config home,
// against LoopbackGateway instances on 127.0.0.1.

/// Checks the "one clear line" contract: non-zero exit, exactly one stderr line starting
/// `clawvoice:`, no crash output. Returns that line.
@discardableResult
private func expectOneLineFailure(_ o: Outcome, sourceLocation: SourceLocation = #_sourceLocation) -> String {
    #expect(o.status != nil && o.status != 0, "expected a non-zero exit: \(o)", sourceLocation: sourceLocation)
    #expect(o.stderrLines.count == 1, "expected one stderr line: \(o)", sourceLocation: sourceLocation)
    #expect(o.stderrLines.first?.hasPrefix("clawvoice: ") == true, "stderr must start with 'clawvoice: ': \(o)", sourceLocation: sourceLocation)
    for crash in ["Fatal error", "Backtrac", "Stack dump", "Current stack trace"] {
        #expect(!o.stderr.contains(crash) && !o.stdout.contains(crash), "crash output: \(o)", sourceLocation: sourceLocation)
    }
    return o.stderrLines.first ?? ""
}

/// `clawvoice status --json`, parsed; nil while the daemon does not answer.
private func statusJSON(_ env: CLIEnvironment) async throws -> [String: Any]? {
    let o = try await env.run(["status", "--json"], timeout: .seconds(10))
    guard o.status == 0, let data = o.stdout.data(using: .utf8) else { return nil }
    return try? JSONSerialization.jsonObject(with: data) as? [String: Any]
}

private func session(_ status: [String: Any]?, _ role: String) -> [String: Any]? {
    (status?["sessions"] as? [String: Any])?[role] as? [String: Any]
}

private func bothConnected(_ status: [String: Any]?) -> Bool {
    session(status, "node")?["state"] as? String == "connected" && session(status, "operator")?["state"] as? String == "connected"
}

private func connectedAt(_ status: [String: Any]?, _ role: String) -> Double? {
    session(status, role)?["connectedAtMs"] as? Double
}

/// Starts `clawvoice run` against `gateway` and waits until status shows both roles connected.
private func startDaemon(_ env: inout CLIEnvironment, gateway: LoopbackGateway, token: String,
                         sourceLocation: SourceLocation = #_sourceLocation) async throws -> (Spawned, [String: Any]?) {
    env.extra["CLAWVOICE_GATEWAY_URL"] = await gateway.url
    env.extra["CLAWVOICE_GATEWAY_TOKEN"] = token
    let daemon = try env.spawn(["--log-level", "debug", "run"])
    var last: [String: Any]?
    let up = try await eventually(.seconds(20)) {
        guard daemon.isRunning else { return true }
        last = try await statusJSON(env)
        return bothConnected(last)
    }
    #expect(up && daemon.isRunning && bothConnected(last),
            "daemon did not connect both roles within 20 s; last status: \(String(describing: last))\nstderr:\n\(daemon.stderr)",
            sourceLocation: sourceLocation)
    return (daemon, last)
}

private func requestIds(in text: String) -> [String] {
    var ids: [String] = []
    for line in text.split(separator: "\n") {
        guard let r = line.range(of: "openclaw devices approve ") else { continue }
        let id = line[r.upperBound...].prefix { !$0.isWhitespace }
        if id.hasPrefix("r_") && !ids.contains(String(id)) { ids.append(String(id)) }
    }
    return ids
}

@Suite struct `CLI help and version` {
    @Test func `--version prints the version`() async throws {
        let o = try await CLIEnvironment().run(["--version"])
        #expect(o.status == 0)
        #expect(o.stdout == "clawvoice 0.1.0\n")
        #expect(o.stderr.isEmpty)
    }

    @Test func `--help lists every command`() async throws {
        let o = try await CLIEnvironment().run(["--help"])
        #expect(o.status == 0, "\(o)")
        for command in ["pair", "run", "status", "gateways", "demo"] {
            #expect(o.stdout.contains("\n  \(command) "), "--help does not list \(command): \(o)")
        }
        #expect(o.stdout.contains("Usage:"))
    }

    @Test(arguments: ["pair", "run", "status", "gateways", "demo"])
    func `each command has help`(_ command: String) async throws {
        let env = try CLIEnvironment()
        let o = try await env.run([command, "--help"])
        #expect(o.status == 0, "\(o)")
        #expect(o.stdout.contains("Usage: clawvoice \(command)"), "\(o)")
        #expect(o.stderr.isEmpty, "\(o)")
        // Help never touches the state dir.
        #expect(!FileManager.default.fileExists(atPath: env.stateDir))
    }
}

@Suite struct `CLI failures are one clear line` {
    @Test func `an unknown command`() async throws {
        let line = expectOneLineFailure(try await CLIEnvironment().run(["frobnicate"]))
        #expect(line.contains("unknown command 'frobnicate'"))
    }

    @Test func `an unknown flag`() async throws {
        let line = expectOneLineFailure(try await CLIEnvironment().run(["pair", "--bogus"]))
        #expect(line.contains("--bogus"))
        #expect(line.contains("clawvoice pair --help"))
    }

    @Test func `a flag missing its value`() async throws {
        let line = expectOneLineFailure(try await CLIEnvironment().run(["pair", "--url"]))
        #expect(line.contains("--url needs a value"))
    }

    @Test func `a malformed setup code`() async throws {
        let line = expectOneLineFailure(try await CLIEnvironment().run(["pair", "not-base64!!"]))
        #expect(line.contains("setup code"))
    }

    @Test func `an expired setup code`() async throws {
        let code = base64url(#"{"url":"ws://127.0.0.1:1","bootstrapToken":"x","expiresAtMs":1000}"#)
        let line = expectOneLineFailure(try await CLIEnvironment().run(["pair", code]))
        #expect(line.contains("expired"))
    }

    @Test func `a URL that is not ws or wss`() async throws {
        let line = expectOneLineFailure(try await CLIEnvironment().run(["pair", "--url", "http://x"]))
        #expect(line.contains("http"))
    }

    @Test func `plain ws to a non-loopback host is refused before connecting`() async throws {
        let env = try CLIEnvironment()
        let o = try await env.run(["pair", "--url", "ws://192.0.2.1:18789", "--token-file", try env.scratch.write("token", "t"), "--timeout", "1"])
        let line = expectOneLineFailure(o)
        #expect(line.contains("ws://"), "\(o)")
        #expect(line.contains("192.0.2.1"), "\(o)")
        #expect(line.contains("wss://"), "\(o)")
        #expect(line.contains("--allow-insecure"), "\(o)")
        // Refused up front: pair prints "Device … → gateway …" and opens the store before it
        // connects, so no output and no state dir mean no connection was attempted.
        #expect(o.stdout.isEmpty, "\(o)")
        #expect(!FileManager.default.fileExists(atPath: env.stateDir), "the state dir was created")
    }

    @Test func `a config file with a syntax error names its line and column`() async throws {
        let env = try CLIEnvironment()
        let file = try env.scratch.write("config/clawvoice/config.json5", "{\n  log: { level: \"info\" }\n  node: {}\n}\n")
        let line = expectOneLineFailure(try await env.run(["status"]))
        #expect(line.contains(file), "\(line)")
        #expect(line.contains("line 3, column 3"), "\(line)")
    }

    @Test func `a config file with an unknown key names the key`() async throws {
        let env = try CLIEnvironment()
        let file = try env.scratch.write("bad.json5", "{ gateway: { urll: 'ws://127.0.0.1:1' } }")
        let line = expectOneLineFailure(try await env.run(["--config", file, "run"]))
        #expect(line.contains("'gateway.urll'"), "\(line)")
        #expect(line.contains("did you mean 'url'"), "\(line)")
    }

    @Test func `status with no daemon running says to start it`() async throws {
        let line = expectOneLineFailure(try await CLIEnvironment().run(["status"]))
        #expect(line.contains("daemon is not running"), "\(line)")
        #expect(line.contains("clawvoice run"), "\(line)")
    }

    @Test func `run with no gateway paired says to pair first`() async throws {
        let line = expectOneLineFailure(try await CLIEnvironment().run(["run"]))
        #expect(line.contains("no gateway paired"), "\(line)")
        #expect(line.contains("clawvoice pair"), "\(line)")
    }

    @Test func `gateways use refuses while the config's gateway.url decides`() async throws {
        var env = try CLIEnvironment()
        env.extra["CLAWVOICE_GATEWAY_URL"] = "ws://127.0.0.1:9/"
        let line = expectOneLineFailure(try await env.run(["gateways", "use", "alpha"]))
        #expect(line.contains("gateway.url (ws://127.0.0.1:9/)"), "\(line)")
        #expect(line.contains("CLAWVOICE_GATEWAY_URL"), "\(line)")
    }

    @Test func `gateways use with an unknown name`() async throws {
        let line = expectOneLineFailure(try await CLIEnvironment().run(["gateways", "use", "nowhere"]))
        #expect(line.contains("no gateway named 'nowhere'"), "\(line)")
    }
}

@Suite struct `Pairing from the command line` {
    @Test func `pair waits for explicit approval of both roles, then lists the gateway`() async throws {
        let gateway = try await startGateway(auth: .token("t1"))
        defer { Task { await gateway.stop() } }
        let url = await gateway.url
        let env = try CLIEnvironment()
        let pair = try env.spawn(["pair", "--url", url, "--token-file", try env.scratch.write("token", "t1"), "--timeout", "30"])

        // The CLI prints the approval command before anything is approved.
        let asked = await eventually(.seconds(15)) { !requestIds(in: pair.stdout).isEmpty || !pair.isRunning }
        let first = requestIds(in: pair.stdout).first
        #expect(asked && first != nil, "pair never printed `openclaw devices approve r_…`:\n\(pair.stdout)\n\(pair.stderr)")
        let pending = await gateway.pendingPairings()
        #expect(pending.contains { $0.requestId == first }, "printed id \(first ?? "-") is not pending: \(pending)")

        // Approve exactly the ids the CLI prints, as an operator would, until it exits.
        var approved: [String] = []
        let finished = await eventually(.seconds(30)) {
            for id in requestIds(in: pair.stdout) where !approved.contains(id) {
                if await gateway.approve(id) { approved.append(id) }
            }
            return !pair.isRunning
        }
        let status = await pair.waitForExit(.seconds(5))
        let out = pair.stdout
        #expect(finished && status == 0, "pair did not succeed: exit \(String(describing: status))\n\(out)\n\(pair.stderr)")
        #expect(approved.count == 2, "approved \(approved)")
        #expect(out.contains("node: paired and connected"), "\(out)")
        #expect(out.contains("operator: paired and connected"), "\(out)")
        #expect(await gateway.pendingPairings().isEmpty)

        let name = "127.0.0.1:\(await gateway.port)"
        let list = try await env.run(["gateways"])
        #expect(list.status == 0, "\(list)")
        let line = list.stdout.split(separator: "\n").first { $0.contains(name) }.map(String.init)
        #expect(line?.hasPrefix("*") == true, "\(list)")
        #expect(line?.contains(url) == true, "\(list)")
        #expect(line?.contains("tokens: node,operator") == true, "\(list)")
    }

    @Test func `pair with a setup code needs no manual approval`() async throws {
        let gateway = try await startGateway(auth: .token("secret-not-given"))
        defer { Task { await gateway.stop() } }
        let code = await gateway.makeSetupCode()
        let env = try CLIEnvironment()
        let o = try await env.run(["pair", code, "--timeout", "20"], timeout: .seconds(25))
        #expect(o.status == 0, "\(o)")
        #expect(o.stdout.contains("reachable"), "\(o)")
        #expect(o.stdout.contains("node: paired and connected"), "\(o)")
        #expect(o.stdout.contains("operator: paired and connected"), "\(o)")
        #expect(!o.stdout.contains("openclaw devices approve"), "\(o)")
        #expect(await gateway.pendingPairings().isEmpty)

        let list = try await env.run(["gateways"])
        #expect(list.stdout.contains("tokens: node,operator"), "\(list)")
    }

    @Test func `gateways use switches the active one and forget removes it`() async throws {
        let a = try await startGateway(auth: .token("ta"), autoApprove: true)
        let b = try await startGateway(auth: .token("tb"), autoApprove: true)
        defer { Task { await a.stop(); await b.stop() } }
        let env = try CLIEnvironment()
        let pairA = try await env.run(["pair", "--url", await a.url, "--token-file", try env.scratch.write("token", "ta"), "--name", "alpha", "--timeout", "20"], timeout: .seconds(25))
        #expect(pairA.status == 0, "\(pairA)")
        let pairB = try await env.run(["pair", "--url", await b.url, "--token-file", try env.scratch.write("token", "tb"), "--name", "beta", "--timeout", "20"], timeout: .seconds(25))
        #expect(pairB.status == 0, "\(pairB)")

        func listed() async throws -> [String: Bool] {
            let o = try await env.run(["gateways", "list"])
            #expect(o.status == 0, "\(o)")
            var out: [String: Bool] = [:]
            for line in o.stdout.split(separator: "\n") {
                let words = line.dropFirst(2).split(separator: " ")
                if let name = words.first { out[String(name)] = line.hasPrefix("*") }
            }
            return out
        }
        #expect(try await listed() == ["alpha": false, "beta": true])

        let use = try await env.run(["gateways", "use", "alpha"])
        #expect(use.status == 0, "\(use)")
        #expect(use.stdout.contains("Active gateway: alpha"), "\(use)")
        #expect(try await listed() == ["alpha": true, "beta": false])

        let forget = try await env.run(["gateways", "forget", "beta"])
        #expect(forget.status == 0, "\(forget)")
        #expect(forget.stdout.contains("Forgot beta"), "\(forget)")
        #expect(try await listed() == ["alpha": true])

        let again = try await env.run(["gateways", "forget", "beta"])
        expectOneLineFailure(again)
    }
}

@Suite struct `The daemon` {
    @Test func `status reports both roles connected and SIGTERM stops it cleanly`() async throws {
        let gateway = try await startGateway(auth: .token("t2"), autoApprove: true)
        defer { Task { await gateway.stop() } }
        var env = try CLIEnvironment()
        let (daemon, status) = try await startDaemon(&env, gateway: gateway, token: "t2")
        #expect(FileManager.default.fileExists(atPath: env.controlSocket))
        #expect((status?["gateway"] as? [String: Any])?["url"] as? String == (await gateway.url))
        #expect(status?["version"] as? String == "0.1.0")
        #expect(status?["sessionKey"] as? String == "agent:main:main")

        let plain = try await env.run(["status"])
        #expect(plain.status == 0, "\(plain)")
        let lines = plain.stdout.split(separator: "\n")
        #expect(lines.contains { $0.contains("node") && $0.contains("connected") }, "\(plain)")
        #expect(lines.contains { $0.contains("operator") && $0.contains("connected") }, "\(plain)")
        #expect(await gateway.connectedRoles() == ["node", "operator"])

        daemon.signal(SIGTERM)
        let code = await daemon.waitForExit(.seconds(5))
        #expect(code == 0, "daemon exit \(String(describing: code)):\n\(daemon.stderr)")
        #expect(!FileManager.default.fileExists(atPath: env.controlSocket), "control socket left behind")
        let after = try await env.run(["status"])
        expectOneLineFailure(after)
    }

    @Test func `a second daemon on the same control socket is refused`() async throws {
        let gateway = try await startGateway(auth: .token("t4"), autoApprove: true)
        defer { Task { await gateway.stop() } }
        var env = try CLIEnvironment()
        let (daemon, _) = try await startDaemon(&env, gateway: gateway, token: "t4")
        let second = try await env.run(["run"], timeout: .seconds(10))
        // `run` logs to stderr as it starts; the failure is its last line.
        #expect(second.status == 1, "\(second)")
        let last = second.stderrLines.last ?? ""
        #expect(last.hasPrefix("clawvoice: ") && last.contains("already running"), "\(second)")
        #expect(!second.stderr.contains("Fatal error"), "\(second)")
        // The first one is unharmed.
        #expect(daemon.isRunning)
        #expect(bothConnected(try await statusJSON(env)))
        daemon.signal(SIGTERM)
        #expect(await daemon.waitForExit(.seconds(5)) == 0)
    }

    @Test func `the daemon reconnects both roles after the gateway restarts`() async throws {
        let gateway = try await startGateway(auth: .token("t3"), autoApprove: true)
        defer { Task { await gateway.stop() } }
        var env = try CLIEnvironment()
        let (daemon, before) = try await startDaemon(&env, gateway: gateway, token: "t3")
        let nodeBefore = try #require(connectedAt(before, "node"))
        let operatorBefore = try #require(connectedAt(before, "operator"))

        try await gateway.restart(downForMs: 500)

        var last: [String: Any]?
        let back = try await eventually(.seconds(20)) {
            last = try await statusJSON(env)
            return bothConnected(last) && (connectedAt(last, "node") ?? 0) > nodeBefore
                && (connectedAt(last, "operator") ?? 0) > operatorBefore
        }
        #expect(back, "not reconnected after the restart; last status: \(String(describing: last))\n\(daemon.stderr)")
        #expect(await gateway.connectedRoles() == ["node", "operator"])
        #expect(daemon.isRunning)
        daemon.signal(SIGTERM)
        #expect(await daemon.waitForExit(.seconds(5)) == 0)
    }

    @Test func `the demo pairs, runs talk.ptt.once on a virtual microphone, speaks the echo and holds a call`() async throws {
        let env = try CLIEnvironment()
        let wav = env.scratch.sub("demo.wav")
        let o = try await env.run(["demo", "--out", wav], timeout: .seconds(120))
        #expect(o.status == 0, "\(o)")
        #expect(o.stdout.contains("Paired: node and operator connected"), "\(o)")
        #expect(o.stdout.contains("\"status\":\"queued\""), "\(o)")
        #expect(o.stdout.contains("← reply spoken via gateway"), "\(o)")
        // The wake step: through the daemon's own microphone loop, into a delivered turn.
        if FileManager.default.fileExists(atPath: repositoryRoot().appendingPathComponent("models/openclaw.json").path) {
            // The demo's sentence ("hey, openclaw, what is the weather like") peaks at 0.92–0.95 from a
            // file with the shipped openclaw head (threshold 0.83, 2 steps in a row), but through
            // PulseAudio under a full test run's load the live wake checks still miss now and then
            // (issue 9): recorded as an intermittent known issue.
            withKnownIssue("the shipped openclaw head misses the demo's wake sentence", isIntermittent: true) {
                #expect(o.stdout.contains("← wake word \"openclaw\" heard; chat.send → \"what is the weather like\""), "\(o)")
            }
        }
        // The call step (issue 23): a relay call connects, is answered and hangs up.
        #expect(o.stdout.contains("connected over relay"), "\(o)")
        #expect(o.stdout.range(of: #"answered with [1-9][0-9]*\.[0-9] s of audio|answered with 0\.[1-9] s of audio"#, options: .regularExpression) != nil, "\(o)")
        #expect(o.stdout.contains("the call ended (hangup)"), "\(o)")
        let data = try #require(FileManager.default.contents(atPath: wav))
        #expect(data.count > 44 + 16_000, "the speaker recording holds the spoken reply")
    }
}

/// One daemon process across gateway and session switches (issue 10, defects 4 and 5).
@Suite struct `One daemon across switches` {
    /// The descriptors of `pid` that point at deleted files (a database reopened behind SQLite's back).
    func deletedFiles(_ pid: Int32) -> [String] {
        let dir = "/proc/\(pid)/fd"
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
        return fds.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: dir + "/" + $0) }
            .filter { $0.hasSuffix("(deleted)") }
    }

    func connected(to name: String, _ env: CLIEnvironment) async throws -> Bool {
        let s = try await statusJSON(env)
        return bothConnected(s) && (s?["gateway"] as? [String: Any])?["name"] as? String == name
    }

    @Test func `gateways use rebuilds the link in place; send, session use and SIGTERM keep working`() async throws {
        let a = try await startGateway(auth: .token("ta"), autoApprove: true)
        let b = try await startGateway(auth: .token("tb"), autoApprove: true)
        defer { Task { await a.stop(); await b.stop() } }
        let env = try CLIEnvironment()
        for (g, token, name) in [(a, "ta", "alpha"), (b, "tb", "beta")] {
            let pair = try await env.run(["pair", "--url", await g.url, "--token-file", try env.scratch.write("token", token), "--name", name, "--timeout", "20"], timeout: .seconds(25))
            #expect(pair.status == 0, "\(pair)")
        }
        let daemon = try env.spawn(["--log-level", "debug", "run"])
        #expect(try await eventually(.seconds(20)) { try await connected(to: "beta", env) }, "stderr:\n\(daemon.stderr)")

        let use = try await env.run(["gateways", "use", "alpha"])
        #expect(use.status == 0, "\(use)")
        #expect(try await eventually(.seconds(20)) { try await connected(to: "alpha", env) }, "stderr:\n\(daemon.stderr)")
        #expect(daemon.isRunning, "the switch happens in place, not by a restart")

        // A typed turn queued now goes out to the new gateway, in the current session.
        let session = try await env.run(["session", "use", "agent:main:kitchen"])
        #expect(session.status == 0, "\(session)")
        #expect((try await statusJSON(env))?["sessionKey"] as? String == "agent:main:kitchen")
        let send = try await env.run(["send", "hello alpha"])
        #expect(send.status == 0, "\(send)")
        #expect(send.stdout.contains("agent:main:kitchen"), "\(send)")
        let delivered = try await eventually(.seconds(10)) {
            await a.requests(method: "chat.send").contains { $0.params?["message"]?.stringValue == "hello alpha" }
        }
        #expect(delivered, "stderr:\n\(daemon.stderr)")
        let sent = await a.requests(method: "chat.send").first { $0.params?["message"]?.stringValue == "hello alpha" }
        #expect(sent?.params?["sessionKey"]?.stringValue == "agent:main:kitchen")
        #expect(deletedFiles(daemon.process.processIdentifier).isEmpty, "\(deletedFiles(daemon.process.processIdentifier))")

        daemon.signal(SIGTERM)
        #expect(await daemon.waitForExit(.seconds(5)) == 0, "stderr:\n\(daemon.stderr)")

        // The chosen session survives a restart, for this gateway.
        let again = try env.spawn(["run"])
        #expect(try await eventually(.seconds(20)) { try await connected(to: "alpha", env) }, "stderr:\n\(again.stderr)")
        #expect((try await statusJSON(env))?["sessionKey"] as? String == "agent:main:kitchen")
        let shown = try await env.run(["session"])
        #expect(shown.stdout.contains("agent:main:kitchen"), "\(shown)")
        again.signal(SIGINT)
        #expect(await again.waitForExit(.seconds(5)) == 0, "stderr:\n\(again.stderr)")
    }
}
