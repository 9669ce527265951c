// `clawvoice history` and `clawvoice listen` as a user runs them: the cache seeded through
// ClawStore in this process, the real executable reading it with and without a daemon.

import ClawvoiceTesting
import Foundation
import GatewayClient
import GatewayProtocol
import LoopbackGateway
import Store
import Testing
#if canImport(Glibc)
import Glibc
#endif

private func nowMs() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

private let longAnswer = String(repeating: "All work and no play makes a long answer. ", count: 6)

/// Seeds the store in `env` with gateway "lb" (active) and a cached session refreshed `ageMs` ago.
private func seed(_ env: CLIEnvironment, ageMs: Int64, url: String = "ws://127.0.0.1:18789") throws {
    let store = try ClawStore(directory: env.stateDir)
    try store.upsertGateway(GatewayRecord(name: "lb", url: url, sharedToken: "t", isActive: true,
                                          mainSessionKey: "agent:main:main", addedAtMs: 0))
    let t = nowMs() - ageMs
    try store.replaceCachedMessages(gateway: "lb", sessionKey: "agent:main:main", messages: [
        CachedMessage(position: 0, messageId: "u-1", role: "user", text: "what is the weather", timestampMs: t - 2_000,
                      idempotencyKey: "i-1"),
        CachedMessage(position: 1, messageId: "a-1", role: "assistant", text: "Sunny.\nWarm later.", timestampMs: t - 1_000, runId: "i-1"),
        CachedMessage(position: 2, messageId: "u-2", role: "user", text: "and tomorrow", timestampMs: t - 500),
        CachedMessage(position: 3, messageId: "a-2", role: "assistant", text: longAnswer, timestampMs: t - 100),
    ], nowMs: t)
}

@Suite struct `History from the command line` {
    @Test func `history answers from the cache with no daemon and marks it stale and offline`() async throws {
        let env = try CLIEnvironment()
        try seed(env, ageMs: 125_000)
        let started = ContinuousClock.now
        let o = try await env.run(["history"])
        let elapsed = ContinuousClock.now - started
        #expect(o.status == 0, "\(o)")
        #expect(o.stderr.isEmpty, "\(o)")
        let lines = o.stdout.split(separator: "\n").map(String.init)
        let header = try #require(lines.first)
        #expect(header.hasPrefix("agent:main:main on lb"), "\(o)")
        #expect(header.contains("(cached 12") && header.contains("s ago, stale)"), "\(o)")
        #expect(header.contains("(offline: daemon not running)"), "\(o)")
        #expect(lines.count == 5, "\(o)")
        #expect(lines[1].contains("user") && lines[1].hasSuffix("what is the weather"), "\(o)")
        #expect(lines[2].contains("assistant") && lines[2].hasSuffix("Sunny. Warm later."), "one line per message: \(o)")
        #expect(lines[4].hasSuffix("…") && lines[4].count < 140, "long text is cut: \(o)")
        #expect(lines[1].range(of: #"\d\d:\d\d"#, options: .regularExpression) != nil, "a time column: \(o)")
        #expect(elapsed < .seconds(5), "answered at once, took \(elapsed)")
    }

    @Test func `limit, ids, another session and a fresh cache`() async throws {
        let env = try CLIEnvironment()
        try seed(env, ageMs: 3_000)
        let last = try await env.run(["history", "--limit", "1", "--ids"])
        #expect(last.status == 0, "\(last)")
        let lines = last.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 2 && lines[1].contains("a-2  assistant"), "\(last)")
        #expect(lines[0].contains("(cached 3s ago)") && !lines[0].contains("stale"), "\(last)")

        let other = try await env.run(["history", "--session", "agent:main:other"])
        #expect(other.status == 0, "\(other)")
        #expect(other.stdout.hasPrefix("agent:main:other on lb (not cached yet) (offline: daemon not running)"), "\(other)")
        #expect(other.stdout.contains("start the daemon"), "\(other)")

        let bad = try await env.run(["history", "--limit", "zero"])
        #expect(bad.status == 2 && bad.stderrLines.count == 1 && bad.stderr.contains("--limit needs a positive number"), "\(bad)")
    }

    @Test func `history --json carries the cache's age and every message`() async throws {
        let env = try CLIEnvironment()
        try seed(env, ageMs: 61_000)
        let o = try await env.run(["history", "--json"])
        #expect(o.status == 0, "\(o)")
        let j = try #require(try JSONSerialization.jsonObject(with: Data(o.stdout.utf8)) as? [String: Any])
        #expect(j["sessionKey"] as? String == "agent:main:main" && j["gateway"] as? String == "lb")
        #expect(j["stale"] as? Bool == true && j["cached"] as? Bool == true)
        #expect(j["offline"] as? String == "daemon not running")
        #expect(((j["ageMs"] as? Double) ?? 0) >= 61_000)
        let messages = try #require(j["messages"] as? [[String: Any]])
        #expect(messages.map { $0["id"] as? String } == ["u-1", "a-1", "u-2", "a-2"])
        #expect(messages[3]["text"] as? String == longAnswer, "JSON keeps the whole text")
        #expect(messages[1]["runId"] as? String == "i-1")
    }

    @Test func `history with no gateway paired says to pair first`() async throws {
        let env = try CLIEnvironment()
        let o = try await env.run(["history"])
        #expect(o.status == 1 && o.stderrLines.count == 1, "\(o)")
        #expect(o.stderr.hasPrefix("clawvoice: no gateway paired yet"), "\(o)")
    }

    @Test func `listen needs the daemon, and takes --last or an id, not both`() async throws {
        let env = try CLIEnvironment()
        try seed(env, ageMs: 0)
        let o = try await env.run(["listen", "--last"])
        #expect(o.status == 1 && o.stderrLines.count == 1, "\(o)")
        #expect(o.stderr.contains("daemon is not running") && o.stderr.contains("clawvoice run"), "\(o)")
        let both = try await env.run(["listen", "--last", "a-1"])
        #expect(both.status == 2 && both.stderr.contains("not both"), "\(both)")
    }
}

/// An operator session of its own (a second device) that can chat with the loopback gateway.
private func chat(_ gateway: LoopbackGateway, token: String, message: String, in scratch: Scratch) async throws {
    let store = try ClawStore(directory: scratch.sub("client"))
    let (identity, instanceId) = try store.loadOrCreateIdentity()
    let url = await gateway.url
    try store.upsertGateway(GatewayRecord(name: "lb", url: url, sharedToken: token, isActive: true, addedAtMs: 0))
    let session = GatewaySession(role: .operator, endpoint: GatewayEndpoint(name: "lb", url: url),
                                 credentials: GatewayCredentials(sharedToken: token), identity: identity, instanceId: instanceId,
                                 store: store, options: SessionOptions(displayName: "chat peer", version: "test"), log: .silent)
    await session.start()
    defer { Task { await session.stop() } }
    let status = await session.waitUntilSettled(timeout: .seconds(10))
    guard status.state == .connected else { throw CLITestFailure("chat peer did not connect: \(status.detail)") }
    _ = try await session.request(GatewayMethod.chatSend, params: [
        "sessionKey": "agent:main:main", "message": .string(message), "idempotencyKey": .string(UUID().uuidString.lowercased()),
    ], timeoutMs: 5_000)
    let answered = try await eventually(.seconds(5)) {
        let h = try await session.request(GatewayMethod.chatHistory, params: ["sessionKey": "agent:main:main"], timeoutMs: 5_000)
        return h["messages"]?.arrayValue?.last?["role"]?.stringValue == "assistant"
    }
    guard answered else { throw CLITestFailure("the echo never answered") }
}

private struct CLITestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

@Suite struct `History and listen through the daemon` {
    @Test func `the daemon refreshes the cache for history and toggles listen`() async throws {
        var c = LoopbackGateway.Configuration()
        c.auth = .token("t6")
        c.autoApprove = true
        c.echoDeltaDelayMs = 5
        let gateway = LoopbackGateway(configuration: c)
        try await gateway.start()
        defer { Task { await gateway.stop() } }
        var env = try CLIEnvironment()
        env.extra["CLAWVOICE_GATEWAY_URL"] = await gateway.url
        env.extra["CLAWVOICE_GATEWAY_TOKEN"] = "t6"
        let daemon = try env.spawn(["run"])
        defer { daemon.signal(SIGTERM) }
        let up = try await eventually(.seconds(20)) {
            let o = try await env.run(["status", "--json"], timeout: .seconds(10))
            let j = (try? JSONSerialization.jsonObject(with: Data(o.stdout.utf8))) as? [String: Any]
            let sessions = j?["sessions"] as? [String: [String: Any]]
            return sessions?["node"]?["state"] as? String == "connected" && sessions?["operator"]?["state"] as? String == "connected"
        }
        try #require(up, "daemon did not connect: \(daemon.stderr)")

        try await chat(gateway, token: "t6", message: "hello there", in: env.scratch)
        // The first history answers from whatever the cache holds and asks the daemon to refresh;
        // soon the answer shows the new turn, with no offline mark.
        var last = Outcome(status: nil, stdout: "", stderr: "")
        let fresh = try await eventually(.seconds(10)) {
            last = try await env.run(["history"])
            return last.stdout.contains("You said: hello there")
        }
        #expect(fresh, "\(last)\n\(daemon.stderr)")
        #expect(!last.stdout.contains("offline"), "\(last)")
        #expect(last.stdout.split(separator: "\n").first?.hasPrefix("agent:main:main on 127.0.0.1:") == true, "\(last)")

        let ids = try await env.run(["history", "--ids"])
        #expect(ids.stdout.contains("agent:main:main#1  assistant"), "synthetic ids from the loopback: \(ids)")

        // No sound server in this environment: playback waits for one, so the message stays
        // "playing" long enough for the second request to stop it.
        let speak = try await env.run(["listen", "--last"], timeout: .seconds(30))
        #expect(speak.status == 0, "\(speak)")
        #expect(speak.stdout.contains("speaking message agent:main:main#1 (21 chars)"), "\(speak)")
        let stop = try await env.run(["listen", "agent:main:main#1"], timeout: .seconds(30))
        #expect(stop.status == 0 && stop.stdout.contains("stopped message agent:main:main#1"), "\(stop)")
        #expect(await gateway.speakCalls().contains { $0.0 == "tts.speak" && $0.1["text"]?.stringValue == "You said: hello there" })

        let missing = try await env.run(["listen", "nope"], timeout: .seconds(30))
        #expect(missing.status == 1 && missing.stderr.contains("no message 'nope'"), "\(missing)")

        daemon.signal(SIGTERM)
        #expect(await daemon.waitForExit(.seconds(10)) == 0, "\(daemon.stderr)")
    }
}
