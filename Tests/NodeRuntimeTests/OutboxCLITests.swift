import ClawvoiceTesting
import Foundation
import GatewayProtocol
import LoopbackGateway
import CLI
import Daemon
import NodeRuntime
import Store
import Testing
#if canImport(Glibc)
import Glibc
#endif

// `clawvoice send` and `clawvoice outbox list|retry|drop` as a user runs them: the real
// executable, its own state dir, a loopback gateway, with and without a daemon.

private func loopback() async throws -> LoopbackGateway {
    var c = LoopbackGateway.Configuration()
    c.auth = .token("cli-token")
    c.autoApprove = true
    c.echoDeltaDelayMs = 1
    let g = LoopbackGateway(configuration: c)
    try await g.start()
    return g
}

/// An environment pointed at `gateway` through the config's environment overrides.
private func environment(for gateway: LoopbackGateway) async throws -> CLIEnvironment {
    var env = try CLIEnvironment()
    env.extra["CLAWVOICE_GATEWAY_URL"] = await gateway.url
    env.extra["CLAWVOICE_GATEWAY_TOKEN"] = "cli-token"
    return env
}

private func expectOneLine(_ o: Outcome, sourceLocation: SourceLocation = #_sourceLocation) -> String {
    #expect(o.status != nil && o.status != 0, "expected a failure: \(o)", sourceLocation: sourceLocation)
    #expect(o.stderrLines.count == 1 && o.stderrLines.first?.hasPrefix("clawvoice: ") == true, "\(o)", sourceLocation: sourceLocation)
    return o.stderrLines.first ?? ""
}

@Suite struct `Outbox from the command line` {
    @Test(arguments: ["outbox", "send"])
    func `has help`(_ command: String) async throws {
        let o = try await CLIEnvironment().run([command, "--help"])
        #expect(o.status == 0 && o.stdout.contains("Usage: clawvoice \(command)"), "\(o)")
    }

    @Test func `without a daemon, send queues and list, retry and drop work on the file`() async throws {
        let gateway = try await loopback()
        defer { Task { await gateway.stop() } }
        let env = try await environment(for: gateway)

        let sent = try await env.run(["send", "turn on the kitchen lights please"])
        #expect(sent.status == 0, "\(sent)")
        #expect(sent.stdout.contains("Queued turn 1 for 127.0.0.1:"), "\(sent)")
        #expect(sent.stdout.contains("no daemon is running"), "\(sent)")
        _ = try await env.run(["send", "and the hallway", "--session", "agent:main:house"])

        let list = try await env.run(["outbox", "list"])
        #expect(list.status == 0, "\(list)")
        #expect(list.stdout.contains("2 turns waiting for 127.0.0.1:"), "\(list)")
        #expect(list.stdout.contains("1  queued") && list.stdout.contains("\"turn on the kitchen lights please\""), "\(list)")
        #expect(list.stdout.contains("agent:main:house  \"and the hallway\""), "\(list)")

        let json = try await env.run(["outbox", "--json"])
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
        #expect(rows.map { $0["seq"] as? Double } == [1, 2])
        #expect(rows.first?["state"] as? String == "pending")

        let retried = try await env.run(["outbox", "retry", "1"])
        #expect(retried.status == 0 && retried.stdout.contains("Turn 1 (\"turn on the kitchen lights please\") will be sent again"), "\(retried)")
        let dropped = try await env.run(["outbox", "drop", "2"])
        #expect(dropped.status == 0 && dropped.stdout.contains("Dropped turn 2"), "\(dropped)")
        #expect(try await env.run(["outbox"]).stdout.contains("1 turn waiting"))

        #expect(expectOneLine(try await env.run(["outbox", "drop", "2"])).contains("no turn 2 in the outbox"))
        #expect(expectOneLine(try await env.run(["outbox", "retry", "x"])).contains("needs the turn's number"))
        #expect(expectOneLine(try await env.run(["outbox", "frob"])).contains("unknown action 'frob'"))
        #expect(expectOneLine(try await env.run(["send"])).contains("send needs the text"))
    }

    @Test func `the 51st send is refused with one line and nothing is written`() async throws {
        let gateway = try await loopback()
        defer { Task { await gateway.stop() } }
        let env = try await environment(for: gateway)
        #expect(try await env.run(["send", "first"]).status == 0)
        let store = try ClawStore(directory: env.stateDir)
        let name = GatewayNaming.name(for: await gateway.url)
        for i in 1..<50 {
            try store.enqueueOutbox(gateway: name, sessionKey: "main", message: "filler \(i)", idempotencyKey: "k\(i)", nowMs: 0)
        }
        let line = expectOneLine(try await env.run(["send", "one too many"]))
        #expect(line == "clawvoice: 50 turns are already waiting for \(name); `clawvoice outbox list` shows them, `clawvoice outbox drop N` removes one")
        #expect(try store.outboxCount(gateway: name) == 50)
    }

    @Test func `the running daemon sends a typed turn within a second and status counts the queue`() async throws {
        let gateway = try await loopback()
        defer { Task { await gateway.stop() } }
        let env = try await environment(for: gateway)
        let daemon = try env.spawn(["run"])
        defer { daemon.signal(SIGKILL) }
        let up = await eventually(.seconds(20)) {
            guard let o = try? await env.run(["status", "--json"], timeout: .seconds(5)), o.status == 0,
                  let status = try? JSONSerialization.jsonObject(with: Data(o.stdout.utf8)) as? [String: Any],
                  let sessions = status["sessions"] as? [String: Any] else { return false }
            return (sessions["operator"] as? [String: Any])?["state"] as? String == "connected"
        }
        #expect(up, "daemon did not come up: \(daemon.stderr)")

        let sent = try await env.run(["send", "typed while the daemon runs"])
        #expect(sent.stdout.contains("the running daemon sends it within a second"), "\(sent)")
        let delivered = await eventually(.seconds(5)) {
            await gateway.requests(method: "chat.send").contains { $0.params?["message"]?.stringValue == "typed while the daemon runs" }
        }
        #expect(delivered, "\(daemon.stderr)")
        let emptied = await eventually(.seconds(5)) {
            (try? await env.run(["status", "--json"]))?.stdout.contains(#""outbox":0"#) == true
        }
        #expect(emptied)
        #expect(try await env.run(["outbox", "list"]).stdout.contains("the outbox is empty"))
        daemon.signal(SIGTERM)
        _ = await daemon.waitForExit(.seconds(10))
    }
}
