// Issue 24, item 3: recovering from a first mistake. Before: the config's gateway.url rewrote
// the stored gateways for good (even for a one-off `say --config`, even when invalid) and
// ignored a paired gateway's tokens at the same URL; a running daemon stayed "paused, pair
// again" after a successful `pair` until restarted (SIGHUP did not help); a setup code without
// an operator part waited forever. Real processes against the loopback gateway.

import ClawvoiceTesting
import Foundation
import Testing
import LoopbackGateway
@testable import CLI
@testable import Daemon
@testable import NodeRuntime

private func statusJSON(_ env: CLIEnvironment) async throws -> [String: Any]? {
    let o = try await env.run(["status", "--json"], timeout: .seconds(10))
    guard o.status == 0, let data = o.stdout.data(using: .utf8) else { return nil }
    return try? JSONSerialization.jsonObject(with: data) as? [String: Any]
}

private func state(_ s: [String: Any]?, _ role: String) -> String? {
    ((s?["sessions"] as? [String: Any])?[role] as? [String: Any])?["state"] as? String
}

private func bothConnected(_ env: CLIEnvironment) async throws -> Bool {
    let s = try await statusJSON(env)
    return state(s, "node") == "connected" && state(s, "operator") == "connected"
}

/// Polls status until `condition` holds; returns whether it did and the last status seen.
private func waitFor(_ env: CLIEnvironment, _ timeout: Duration, _ condition: @escaping ([String: Any]?) -> Bool) async throws -> (Bool, String) {
    var last: [String: Any]?
    let ok = try await eventually(timeout) {
        last = try await statusJSON(env)
        return condition(last)
    }
    return (ok, String(describing: last))
}

private func connected(_ s: [String: Any]?) -> Bool { state(s, "node") == "connected" && state(s, "operator") == "connected" }

private func gatewayLines(_ env: CLIEnvironment) async throws -> [String] {
    try await env.run(["gateways"]).stdout.split(separator: "\n").map(String.init)
}

private func deviceId(_ pairOutput: String) -> String? {
    guard let r = pairOutput.range(of: "Device ") else { return nil }
    return String(pairOutput[r.upperBound...].prefix { !$0.isWhitespace })
}

@Suite(.serialized) struct `Pairing again and the config's gateway` {
    @Test func `gateway.url uses the paired gateway's tokens and never rewrites the stored gateways`() async throws {
        let gateway = try await startGateway(auth: .token("right"), autoApprove: true)
        defer { Task { await gateway.stop() } }
        var env = try CLIEnvironment()
        let url = await gateway.url
        let pair = try await env.run(["pair", "--url", url, "--token-file", try env.scratch.write("token", "right"),
                                      "--name", "home", "--timeout", "20"], timeout: .seconds(25))
        #expect(pair.status == 0, "\(pair)")

        // The config names the same gateway (with a trailing slash) and a stale token.
        env.extra["CLAWVOICE_GATEWAY_URL"] = url + "/"
        env.extra["CLAWVOICE_GATEWAY_TOKEN"] = "stale"
        let daemon = try env.spawn(["run"])
        defer { daemon.signal(SIGKILL) }
        let (up, last) = try await waitFor(env, .seconds(20)) { connected($0) || !daemon.isRunning }
        #expect(up && daemon.isRunning, "the paired tokens were not used: \(last)\n\(daemon.stderr)")
        #expect(!daemon.stderr.contains("rejected the shared token"), "\(daemon.stderr)")
        daemon.signal(SIGTERM)
        _ = await daemon.waitForExit(.seconds(10))
        env.extra = [:]
        #expect(try await gatewayLines(env) == ["* home  \(url)  tokens: node,operator"])

        // One-off runs with another config: an invalid URL is one clear line, a valid one is used
        // for that run only; neither leaves a gateway behind or changes the active one.
        let bad = try env.scratch.write("bad.json5", "{ gateway: { url: 'http//nope:18789' } }")
        let o = try await env.run(["say", "--config", bad, "hello", "--out", env.scratch.sub("a.wav")])
        #expect(o.status == 1 && o.stderrLines.count == 1, "\(o)")
        #expect(o.stderr.contains("gateway.url \"http//nope:18789\" is not a gateway address"), "\(o)")
        let other = try env.scratch.write("other.json5", "{ gateway: { url: 'ws://127.0.0.1:1', token: 'x' } }")
        let o2 = try await env.run(["say", "--config", other, "hello", "--out", env.scratch.sub("b.wav")], timeout: .seconds(30))
        #expect(o2.stdout.contains("gateway not reachable"), "\(o2)")
        #expect(try await gatewayLines(env) == ["* home  \(url)  tokens: node,operator"])
    }

    @Test func `a running daemon picks up a new pairing: on SIGHUP, and when pair tells it`() async throws {
        let gateway = try await startGateway(auth: .token("reset-t"), autoApprove: true)
        defer { Task { await gateway.stop() } }
        let env = try CLIEnvironment()
        let url = await gateway.url
        let token = try env.scratch.write("token", "reset-t")
        let pair = try await env.run(["pair", "--url", url, "--token-file", token, "--timeout", "20"], timeout: .seconds(25))
        #expect(pair.status == 0, "\(pair)")
        let device = try #require(deviceId(pair.stdout))
        let daemon = try env.spawn(["--log-level", "debug", "run"])
        defer { daemon.signal(SIGKILL) }
        let (first, _) = try await waitFor(env, .seconds(20), connected)
        #expect(first, "\(daemon.stderr)")

        // The gateway forgets the device (`openclaw devices remove`): the daemon pauses, "pair again".
        func resetAndWaitForPause() async throws {
            await gateway.removeDevice(device)
            let (paused, last) = try await waitFor(env, .seconds(20)) { state($0, "node") == "paused" || state($0, "operator") == "paused" }
            #expect(paused, "no pause after the reset: \(last)")
        }
        try await resetAndWaitForPause()

        // 1. pair again where it cannot reach the daemon (another control socket), then SIGHUP.
        let elsewhere = try env.scratch.write("elsewhere.json5", "{ control: { socket: '\(env.scratch.sub("nobody.sock"))' } }")
        let again = try await env.run(["--config", elsewhere, "pair", "--url", url, "--token-file", token, "--timeout", "20"],
                                      timeout: .seconds(25))
        #expect(again.status == 0, "\(again)")
        let before = try await bothConnected(env)
        #expect(!before, "connected before SIGHUP: the test proves nothing")
        daemon.signal(SIGHUP)
        let (sighup, afterHup) = try await waitFor(env, .seconds(15), connected)
        #expect(sighup, "SIGHUP did not pick up the new pairing: \(afterHup)")

        // 2. Reset again; this time pair tells the daemon itself.
        try await resetAndWaitForPause()
        let third = try await env.run(["pair", "--url", url, "--token-file", token, "--timeout", "20"], timeout: .seconds(25))
        #expect(third.status == 0 && third.stdout.contains("The running daemon now uses it."), "\(third)")
        let (told, afterPair) = try await waitFor(env, .seconds(15), connected)
        #expect(told, "the daemon stayed paused after pair: \(afterPair)")
        #expect(daemon.isRunning)
    }

    @Test func `a setup code without an operator part pairs the node and says what is missing`() async throws {
        var c = LoopbackGateway.Configuration()
        c.auth = .token("op-t")
        c.autoApprove = true
        c.bootstrapHandsOverOperator = false
        let gateway = LoopbackGateway(configuration: c)
        try await gateway.start()
        defer { Task { await gateway.stop() } }
        let env = try CLIEnvironment()
        let url = await gateway.url
        let started = ContinuousClock.now
        let o = try await env.run(["pair", await gateway.makeSetupCode()], timeout: .seconds(30))
        #expect(ContinuousClock.now - started < .seconds(15), "\(o)")
        #expect(o.status == 1 && o.stderrLines.count == 1, "\(o)")
        #expect(o.stdout.contains("node: paired and connected"), "\(o)")
        let line = o.stderrLines.first ?? ""
        #expect(line.contains("pairing incomplete: node paired"), "\(line)")
        #expect(line.contains("no operator token"), "\(line)")
        #expect(line.contains("clawvoice pair --url \(url) --token-file FILE"), "\(line)")
        #expect(!o.stdout.contains("still waiting"), "\(o)")
        let name = "127.0.0.1:\(await gateway.port)"
        #expect(try await gatewayLines(env) == ["* \(name)  \(url)  tokens: node"])

        // What the line says to do completes it.
        let rest = try await env.run(["pair", "--url", url, "--token-file", try env.scratch.write("token", "op-t"), "--timeout", "20"],
                                     timeout: .seconds(25))
        #expect(rest.status == 0, "\(rest)")
        #expect(try await gatewayLines(env) == ["* \(name)  \(url)  tokens: node,operator"])
    }
}
