// `clawvoice discover` and `pair` without a URL against a real avahi-daemon and dbus-daemon in a
// network namespace of their own (tests/discovery/avahi-netns.sh), with avahi-publish standing in
// for the gateway's bonjour plugin and tests/discovery/dns-stub.py serving the wide-area zone.

import ClawvoiceTesting
import Foundation
import Testing
import LoopbackGateway
@testable import CLI
@testable import Daemon
@testable import NodeRuntime
#if canImport(Glibc)
import Glibc
#endif

/// One private D-Bus + Avahi in its own namespace; stopped (processes and directory) by stop() or deinit.
final class AvahiNamespace: @unchecked Sendable {
    static let script = repositoryRoot().appendingPathComponent("tests/discovery/avahi-netns.sh").path
    let dir: String
    /// The private bus, for clients outside the namespace (its socket is a path in /tmp).
    let bus: String
    private let lock = NSLock()
    private var publishers: [String: Process] = [:]
    private var stopped = false

    struct StartError: Error, CustomStringConvertible { var description: String }

    /// Starts the servers; throws (and so fails the test) when they cannot start.
    init(busOnly: Bool = false) throws {
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("avahi-start-\(UUID().uuidString).txt")
        let err = FileManager.default.temporaryDirectory.appendingPathComponent("avahi-start-\(UUID().uuidString).err")
        FileManager.default.createFile(atPath: out.path, contents: nil)
        FileManager.default.createFile(atPath: err.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: out); try? FileManager.default.removeItem(at: err) }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/bash")
        p.arguments = [Self.script, "start"] + (busOnly ? ["--bus-only"] : [])
        // Files, not pipes: the servers it leaves running must not hold our end open.
        p.standardOutput = try FileHandle(forWritingTo: out)
        p.standardError = try FileHandle(forWritingTo: err)
        p.standardInput = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        let text = (try? String(contentsOf: out, encoding: .utf8)) ?? ""
        var vars: [String: String] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("export ") {
            let kv = line.dropFirst(7).split(separator: "=", maxSplits: 1).map(String.init)
            if kv.count == 2 { vars[kv[0]] = kv[1] }
        }
        guard p.terminationStatus == 0, let d = vars["CLAWVOICE_AVAHI_DIR"], let b = vars["CLAWVOICE_AVAHI_BUS"] else {
            throw StartError(description: "avahi-netns.sh start failed (exit \(p.terminationStatus)): \((try? String(contentsOf: err, encoding: .utf8)) ?? "")")
        }
        dir = d
        bus = b
    }

    deinit { stop() }

    func stop() {
        lock.lock()
        let all = publishers.values
        publishers = [:]
        let was = stopped
        stopped = true
        lock.unlock()
        for p in all where p.isRunning { kill(p.processIdentifier, SIGKILL); p.waitUntilExit() }
        guard !was else { return }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/bash")
        p.arguments = [Self.script, "stop"]
        p.environment = ["CLAWVOICE_AVAHI_DIR": dir, "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin:/usr/sbin:/sbin"]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try? p.run()
        p.waitUntilExit()
    }

    var environment: [String: String] {
        ["CLAWVOICE_AVAHI_DIR": dir, "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin:/usr/sbin:/sbin"]
    }

    /// `avahi-publish -s NAME _openclaw-gw._tcp PORT TXT…` inside the namespace, until unpublish;
    /// returns once avahi-daemon says the name is established.
    func publish(_ name: String, port: Int, txt: [String]) async throws {
        let out = "\(dir)/publish-\(UUID().uuidString.prefix(8)).txt"
        FileManager.default.createFile(atPath: out, contents: nil)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/bash")
        p.arguments = [Self.script, "exec", "avahi-publish", "-s", name, "_openclaw-gw._tcp", String(port)] + txt
        p.environment = environment
        let h = try FileHandle(forWritingTo: URL(fileURLWithPath: out))
        p.standardOutput = h
        p.standardError = h
        p.standardInput = FileHandle.nullDevice
        try p.run()
        try? h.close()
        lock.withLock { publishers[name] = p }
        let up = await eventually(.seconds(10)) {
            ((try? String(contentsOfFile: out, encoding: .utf8)) ?? "").contains("Established under name") || !p.isRunning
        }
        let said = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
        guard up, said.contains("Established") else { throw StartError(description: "avahi-publish \(name) did not establish: \(said)") }
    }

    func unpublish(_ name: String) {
        lock.lock(); let p = publishers.removeValue(forKey: name); lock.unlock()
        guard let p else { return }
        // SIGKILL: Foundation.Process starts children with SIGTERM blocked. avahi-daemon withdraws
        // the service as soon as the publisher's bus connection drops.
        kill(p.processIdentifier, SIGKILL)
        p.waitUntilExit()
    }

    /// Kills avahi-daemon (the bus stays), as a crash or `systemctl stop avahi-daemon` would.
    func killDaemon() throws {
        let text = try String(contentsOfFile: "\(dir)/avahi.pid", encoding: .utf8)
        guard let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) else { throw StartError(description: "no avahi.pid: \(text)") }
        kill(pid, SIGKILL)
    }

    /// The wide-area zone dns-stub.py serves (read on every query).
    func setWideArea(_ instances: [[String: Any]]) throws {
        let data = try JSONSerialization.data(withJSONObject: ["instances": instances])
        try data.write(to: URL(fileURLWithPath: "\(dir)/wide-area.json"))
    }

    var dnsQueries: String { (try? String(contentsOfFile: "\(dir)/dns-queries.log", encoding: .utf8)) ?? "" }
}

extension CLIEnvironment {
    /// clawvoice inside the namespace (nsenter, DBUS_SYSTEM_BUS_ADDRESS on the private bus).
    func spawn(in ns: AvahiNamespace, _ args: [String]) throws -> Spawned {
        var env = variables
        for (k, v) in ns.environment { env[k] = v }
        return try Spawned([AvahiNamespace.script, "exec", try ExecutableLookup.require().path] + args, env: env, in: scratch,
                           executable: URL(fileURLWithPath: "/bin/bash"))
    }

    func run(in ns: AvahiNamespace, _ args: [String], timeout: Duration = .seconds(20)) async throws -> Outcome {
        let p = try spawn(in: ns, args)
        let status = await p.waitForExit(timeout)
        return Outcome(status: status, stdout: p.stdout, stderr: p.stderr)
    }
}

private let fingerprint = String(repeating: "3f", count: 32)

private let kitchenTXT = ["role=gateway", "transport=gateway", "displayName=Kitchen Hub", "lanHost=kitchen.local",
                          "gatewayPort=18789", "gatewayTls=1", "gatewayTlsSha256=sha256:\(fingerprint.uppercased())",
                          "gatewayDirectReachable=1"]

/// The loopback gateway the pair tests publish as "Kitchen" (token t-kitchen), and its port.
private func kitchenGateway() async throws -> (LoopbackGateway, Int) {
    let gateway = try await startGateway(auth: .token("t-kitchen"), autoApprove: true)
    let url = await gateway.url
    return (gateway, try #require(Int(url.split(separator: ":").last ?? ""), "\(url)"))
}

private func jsonArray(_ text: String) -> [[String: Any]]? {
    guard let d = text.data(using: .utf8) else { return nil }
    return (try? JSONSerialization.jsonObject(with: d)) as? [[String: Any]]
}

private func jsonLines(_ text: String) -> [[String: Any]] {
    text.split(separator: "\n").compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] }
}

@Suite(.serialized) struct DiscoveryCLITests {
    @Test func `discover lists a published gateway with name, addresses, port, TLS and fingerprint`() async throws {
        let ns = try AvahiNamespace()
        defer { ns.stop() }
        try await ns.publish("Kitchen Gateway", port: 18789, txt: kitchenTXT)
        let env = try CLIEnvironment()

        let j = try await env.run(in: ns, ["discover", "--json"])
        #expect(j.status == 0, "\(j)")
        let list = try #require(jsonArray(j.stdout), "not a JSON array: \(j)")
        #expect(list.count == 1, "\(j)")
        let g = try #require(list.first)
        #expect(g["name"] as? String == "Kitchen Gateway")
        #expect(g["displayName"] as? String == "Kitchen Hub")
        #expect(g["domain"] as? String == "local.")
        #expect(g["host"] as? String == "clawvoice-test.local.")
        #expect(g["addresses"] as? [String] == ["127.0.0.1"])
        #expect(g["interfaces"] as? [String] == ["lo"])
        #expect(g["port"] as? Int == 18789)
        #expect(g["tls"] as? Bool == true)
        #expect(g["tlsFingerprint"] as? String == fingerprint, "normalised to 64 lowercase hex: \(g)")
        #expect(g["url"] as? String == "wss://127.0.0.1:18789")
        #expect((g["txt"] as? [String: String])?["lanHost"] == "kitchen.local")

        let h = try await env.run(in: ns, ["discover"])
        #expect(h.status == 0, "\(h)")
        for needle in ["Kitchen Gateway \"Kitchen Hub\" (local.)", "127.0.0.1", "18789", "TLS:         yes",
                       "sha256 \(fingerprint)", "wss://127.0.0.1:18789", "clawvoice pair --name 'Kitchen Gateway'"] {
            #expect(h.stdout.contains(needle), "missing \(needle): \(h)")
        }
        #expect(h.stderr.contains("Looking for OpenClaw gateways on local."), "progress: \(h)")
    }

    @Test func `discover --watch sees a gateway appear and disappear, and ends when the daemon goes`() async throws {
        let ns = try AvahiNamespace()
        defer { ns.stop() }
        let env = try CLIEnvironment()
        let watch = try env.spawn(in: ns, ["discover", "--watch", "--json"])
        defer { watch.signal(SIGKILL) }
        // Watching before the gateway exists: what shows up is the live add, not a first listing.
        let watching = await eventually(.seconds(10)) { !watch.isRunning || FileManager.default.fileExists(atPath: "\(ns.dir)/bus/system_bus_socket") }
        #expect(watching)
        try await Task.sleep(for: .milliseconds(500))
        try await ns.publish("Attic Gateway", port: 18800, txt: ["role=gateway", "displayName=Attic"])
        let appeared = await eventually(.seconds(10)) {
            jsonLines(watch.stdout).contains { $0["event"] as? String == "added" && ($0["gateway"] as? [String: Any])?["name"] as? String == "Attic Gateway" }
        }
        #expect(appeared, "no added line: \(watch.stdout) \(watch.stderr)")
        ns.unpublish("Attic Gateway")
        let gone = await eventually(.seconds(10)) {
            jsonLines(watch.stdout).contains { $0["event"] as? String == "removed" && ($0["gateway"] as? [String: Any])?["name"] as? String == "Attic Gateway" }
        }
        #expect(gone, "no removed line: \(watch.stdout) \(watch.stderr)")
        #expect(watch.isRunning, "--watch keeps going: \(watch.stderr)")
        let added = jsonLines(watch.stdout).first { $0["event"] as? String == "added" }
        #expect((added?["gateway"] as? [String: Any])?["url"] as? String == "ws://127.0.0.1:18800")
        // The daemon going away ends the watch with one line that says how to bring it back.
        try ns.killDaemon()
        let status = await watch.waitForExit(.seconds(10))
        #expect(status == 1, "\(watch.stdout) \(watch.stderr)")
        let lines = watch.stderr.split(separator: "\n")
        #expect(lines.count == 1 && watch.stderr.contains("avahi-daemon went away") && watch.stderr.contains("systemctl restart avahi-daemon"),
                "\(watch.stderr)")
    }

    @Test func `the configured wide-area domain is browsed over unicast DNS as well as local`() async throws {
        let ns = try AvahiNamespace()
        defer { ns.stop() }
        try await ns.publish("Kitchen Gateway", port: 18789, txt: kitchenTXT)
        try ns.setWideArea([["name": "Office Gateway", "port": 18790, "host": "gw-wan", "address": "127.0.0.1",
                             "txt": ["role=gateway", "displayName=Office", "gatewayTls=1", "gatewayTlsSha256=\(String(repeating: "a1", count: 32))"]]])
        let env = try CLIEnvironment()
        let config = try env.scratch.write("config.json5", "{ discovery: { wideAreaDomain: \"openclaw.internal.\" } }")
        let o = try await env.run(in: ns, ["--config", config, "discover", "--json"])
        #expect(o.status == 0, "\(o)")
        #expect(ns.dnsQueries.contains("_openclaw-gw._tcp.openclaw.internal. PTR"), "the browse never asked the zone: \(ns.dnsQueries)")
        let list = try #require(jsonArray(o.stdout), "\(o)")
        #expect(list.map { $0["name"] as? String } == ["Kitchen Gateway", "Office Gateway"], "local first: \(o)")
        let office = try #require(list.last)
        #expect(office["domain"] as? String == "openclaw.internal.")
        #expect(office["host"] as? String == "gw-wan.openclaw.internal.")
        #expect(office["addresses"] as? [String] == ["127.0.0.1"])
        #expect(office["url"] as? String == "wss://127.0.0.1:18790")
        #expect(office["tlsFingerprint"] as? String == String(repeating: "a1", count: 32))
        #expect(office["displayName"] as? String == "Office")
    }

    @Test func `pair offers what it found, and --name pairs with the right one`() async throws {
        let (gateway, port) = try await kitchenGateway()
        defer { Task { await gateway.stop() } }

        let ns = try AvahiNamespace()
        defer { ns.stop() }
        // The loopback gateway listens on the host's 127.0.0.1; clawvoice pair runs outside the
        // namespace and reaches avahi-daemon through the private bus's socket, so the address it
        // resolves (127.0.0.1 on the namespace's lo) and the port lead to the loopback gateway.
        try await ns.publish("Kitchen", port: port, txt: ["role=gateway", "displayName=Kitchen"])
        try await ns.publish("Attic", port: 9, txt: ["role=gateway"])
        var env = try CLIEnvironment()
        env.extra["DBUS_SYSTEM_BUS_ADDRESS"] = ns.bus

        // Off a terminal, two found: listed, and asked for --name or a URL; nothing saved.
        let two = try await env.run(["pair", "--token-file", try env.scratch.write("token", "t-kitchen"), "--timeout", "10"])
        #expect(two.status == 1, "\(two)")
        #expect(two.stderrLines.count == 1 && two.stderr.contains("found 2 gateways"), "\(two)")
        #expect(two.stderr.contains("\"Kitchen\" ws://127.0.0.1:\(port)") && two.stderr.contains("\"Attic\" ws://127.0.0.1:9"), "\(two)")
        #expect(two.stderr.contains("--name NAME"), "\(two)")

        let named = try await env.run(["pair", "--name", "Kitchen", "--token-file", try env.scratch.write("token", "t-kitchen"), "--timeout", "20"], timeout: .seconds(30))
        #expect(named.status == 0, "\(named)")
        #expect(named.stdout.contains("Using Kitchen (local.) at ws://127.0.0.1:\(port)"), "\(named)")
        #expect(named.stdout.contains("node: paired and connected") && named.stdout.contains("operator: paired and connected"), "\(named)")
        let list = try await env.run(["gateways"])
        #expect(list.stdout.contains("Kitchen") && list.stdout.contains("ws://127.0.0.1:\(port)"), "\(list)")
        #expect(!list.stdout.contains("Attic"), "\(list)")

        // One left: used, and said so.
        ns.unpublish("Attic")
        // Withdrawn when the publisher's bus connection drops; wait until a listing shows it gone.
        let withdrawn = try await eventually(.seconds(15)) {
            jsonArray(try await env.run(in: ns, ["discover", "--json"]).stdout)?.count == 1
        }
        #expect(withdrawn, "Attic is still listed")
        let one = try await env.run(["pair", "--token-file", try env.scratch.write("token", "t-kitchen"), "--timeout", "20"], timeout: .seconds(30))
        #expect(one.status == 0, "\(one)")
        #expect(one.stdout.contains("Found one gateway, Kitchen (local.) at ws://127.0.0.1:\(port); using it"), "\(one)")
    }

    @Test func `on a terminal pair offers a numbered choice and pairs with the one picked`() async throws {
        let (gateway, port) = try await kitchenGateway()
        defer { Task { await gateway.stop() } }
        let ns = try AvahiNamespace()
        defer { ns.stop() }
        try await ns.publish("Kitchen", port: port, txt: ["role=gateway"])
        try await ns.publish("Attic", port: 9, txt: ["role=gateway"])
        var env = try CLIEnvironment()
        env.extra["DBUS_SYSTEM_BUS_ADDRESS"] = ns.bus

        // script(1) gives pair a pseudo-terminal; the answers go in through its standard input.
        let out = env.scratch.sub("tty.txt")
        FileManager.default.createFile(atPath: out, contents: nil)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/script")
        p.arguments = ["-qec", "\(try ExecutableLookup.require().path) pair --token-file \(try env.scratch.write("token", "t-kitchen")) --timeout 20", "/dev/null"]
        p.environment = env.variables
        let input = Pipe()
        p.standardInput = input
        let h = try FileHandle(forWritingTo: URL(fileURLWithPath: out))
        p.standardOutput = h
        p.standardError = h
        try p.run()
        try? h.close()
        defer { if p.isRunning { kill(p.processIdentifier, SIGKILL) } }
        func text() -> String { (try? String(contentsOfFile: out, encoding: .utf8)) ?? "" }
        let asked = await eventually(.seconds(15)) { text().contains("Pair with which one? [1-2]") || !p.isRunning }
        #expect(asked, "no numbered choice: \(text())")
        #expect(text().contains("1) Attic (local.) ws://127.0.0.1:9") && text().contains("2) Kitchen (local.) ws://127.0.0.1:\(port)"), "\(text())")
        // A wrong answer is asked again; then the second one.
        input.fileHandleForWriting.write(Data("7\n".utf8))
        let again = await eventually(.seconds(5)) { text().contains("'7' is not one of 1-2") }
        #expect(again, "\(text())")
        input.fileHandleForWriting.write(Data("2\n".utf8))
        let done = await eventually(.seconds(25)) { !p.isRunning }
        #expect(done && p.terminationStatus == 0, "\(text())")
        #expect(text().contains("gateway Kitchen at ws://127.0.0.1:\(port)"), "\(text())")
        #expect(text().contains("node: paired and connected") && text().contains("operator: paired and connected"), "\(text())")
        try? input.fileHandleForWriting.close()
    }

    @Test func `without avahi-daemon, or without a bus, discover and pair say so in one line with the fix`() async throws {
        let ns = try AvahiNamespace(busOnly: true)
        defer { ns.stop() }
        let env = try CLIEnvironment()
        let o = try await env.run(in: ns, ["discover"])
        #expect(o.status == 1, "\(o)")
        #expect(o.stderrLines.count == 1, "\(o)")
        #expect(o.stderr.hasPrefix("clawvoice: ") && o.stderr.contains("avahi-daemon is not running"), "\(o)")
        #expect(o.stderr.contains("sudo systemctl enable --now avahi-daemon"), "\(o)")

        var noBus = try CLIEnvironment()
        noBus.extra["DBUS_SYSTEM_BUS_ADDRESS"] = "unix:path=\(noBus.scratch.sub("no-bus"))"
        let p = try await noBus.run(["pair", "--name", "Kitchen"])
        #expect(p.status == 1 && p.stderrLines.count == 1, "\(p)")
        #expect(p.stderr.contains("the D-Bus system bus is not running") && p.stderr.contains("systemctl enable --now dbus avahi-daemon"), "\(p)")
        #expect(!p.stdout.contains("looking for gateways"), "no progress before the error: \(p)")
    }
}

@Suite struct DiscoveryConfigTests {
    @Test func `discovery.wideAreaDomain and timeoutMs are read, checked, and the env names a domain too`() throws {
        let c = try ClawConfig.parse("{ discovery: { wideAreaDomain: \"openclaw.internal.\", timeoutMs: 1500 } }", file: "t.json5")
        #expect(c.discovery.wideAreaDomain == "openclaw.internal." && c.discovery.timeoutMs == 1500)
        #expect(ClawConfig().discovery == ClawConfig.Discovery(wideAreaDomain: nil, timeoutMs: 3000))
        #expect(throws: ConfigError.self) { try ClawConfig.parse("{ discovery: { wideAreaDomain: \"open claw\" } }", file: "t.json5") }
        #expect(throws: ConfigError.self) { try ClawConfig.parse("{ discovery: { timeoutMs: 5 } }", file: "t.json5") }
        let scratch = try Scratch()
        let (fromEnv, _) = try RuntimePaths.load(configFlag: nil, environment: ["HOME": scratch.path, "XDG_CONFIG_HOME": scratch.sub("cfg"),
                                                                               "CLAWVOICE_WIDE_AREA_DOMAIN": "corp.example."])
        #expect(fromEnv.discovery.wideAreaDomain == "corp.example.")
    }
}
