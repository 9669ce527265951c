// DiscoveryMachine, input by input, time in milliseconds: no Avahi, no I/O.

import Testing
@testable import ClawvoiceCore

private let fp = String(repeating: "ab", count: 32)

private func key(_ name: String, iface: Int32 = 1, proto: Int32 = 0, domain: String = "local") -> ServiceKey {
    ServiceKey(interface: iface, proto: proto, name: name, domain: domain)
}

private func res(_ address: String, port: Int = 18789, txt: [String] = ["role=gateway"], iface: String? = "eth0",
                 host: String = "gw.local") -> Resolution {
    Resolution(host: host, address: address, port: port, txt: txt, interfaceName: iface)
}

private func added(_ actions: [DiscoveryMachine.Action]) -> [DiscoveredGateway] {
    actions.compactMap { if case .added(let g) = $0 { return g }; return nil }
}

private func finish(_ actions: [DiscoveryMachine.Action]) -> DiscoveryMachine.Finish? {
    actions.compactMap { if case .finish(let f) = $0 { return f }; return nil }.first
}

@Suite struct DiscoveryMachineTests {
    @Test func `start browses local and the wide-area domain, each once, normalised`() {
        var m = DiscoveryMachine(mode: .watch)
        let a = m.handle(.start(domains: ["openclaw.internal", "local", "OPENCLAW.INTERNAL."]), nowMs: 0)
        #expect(a == [.browse(domain: "local."), .browse(domain: "openclaw.internal.")])
    }

    @Test func `a new service is resolved, and shown only once it resolves`() {
        var m = DiscoveryMachine(mode: .watch)
        _ = m.handle(.start(domains: []), nowMs: 0)
        let k = key("Kitchen")
        #expect(m.handle(.browserNew(k), nowMs: 10) == [.resolve(k)])
        #expect(m.gateways.isEmpty)
        let a = m.handle(.resolved(k, res("192.168.1.20", txt: ["gatewayTls=1", "gatewayTlsSha256=\(fp.uppercased())"])), nowMs: 20)
        let g = try! #require(added(a).first)
        #expect(g.name == "Kitchen" && g.domain == "local." && g.addresses == ["192.168.1.20"] && g.port == 18789)
        #expect(g.tls && g.tlsFingerprint == fp && g.url == "wss://192.168.1.20:18789")
        #expect(g.host == "gw.local.")
    }

    @Test func `one gateway over two interfaces and both families is one entry; it goes when its last service goes`() {
        var m = DiscoveryMachine(mode: .watch)
        _ = m.handle(.start(domains: []), nowMs: 0)
        let v6 = key("Kitchen", iface: 2, proto: 1), v4 = key("Kitchen", iface: 3, proto: 0)
        _ = m.handle(.browserNew(v6), nowMs: 1)
        _ = m.handle(.browserNew(v4), nowMs: 2)
        #expect(added(m.handle(.resolved(v6, res("fd00::20", iface: "wlan0")), nowMs: 3)).count == 1)
        let a = m.handle(.resolved(v4, res("192.168.1.20", iface: "eth0")), nowMs: 4)
        guard case .changed(let g)? = a.first else { Issue.record("expected changed: \(a)"); return }
        // IPv4 first whatever the order they came in; the URL dials it.
        #expect(g.addresses == ["192.168.1.20", "fd00::20"])
        #expect(g.interfaces == ["eth0", "wlan0"])
        #expect(g.url == "ws://192.168.1.20:18789")
        #expect(m.gateways.count == 1)
        let r1 = m.handle(.browserRemove(v4), nowMs: 5)
        #expect(r1.contains(.stopResolving(v4)))
        #expect(!r1.contains { if case .removed = $0 { return true }; return false })
        let r2 = m.handle(.browserRemove(v6), nowMs: 6)
        #expect(r2.contains { if case .removed(let g) = $0 { return g.name == "Kitchen" }; return false })
        #expect(m.gateways.isEmpty)
    }

    @Test func `the same TXT again is no change; a new TXT is`() {
        var m = DiscoveryMachine(mode: .watch)
        _ = m.handle(.start(domains: []), nowMs: 0)
        let k = key("Kitchen")
        _ = m.handle(.browserNew(k), nowMs: 1)
        _ = m.handle(.resolved(k, res("10.0.0.2")), nowMs: 2)
        #expect(m.handle(.resolved(k, res("10.0.0.2")), nowMs: 3).isEmpty)
        let a = m.handle(.resolved(k, res("10.0.0.2", txt: ["role=gateway", "displayName=Den"])), nowMs: 4)
        guard case .changed(let g)? = a.first else { Issue.record("\(a)"); return }
        #expect(g.displayName == "Den")
    }

    @Test func `a removal before the resolve answers shows nothing, and the late answer is ignored`() {
        var m = DiscoveryMachine(mode: .watch)
        _ = m.handle(.start(domains: []), nowMs: 0)
        let k = key("Flaky")
        _ = m.handle(.browserNew(k), nowMs: 1)
        #expect(m.handle(.browserRemove(k), nowMs: 2) == [.stopResolving(k)])
        #expect(m.handle(.resolved(k, res("10.0.0.9")), nowMs: 3).isEmpty)
        #expect(m.gateways.isEmpty)
    }

    @Test func `a failed resolve hides what that service said`() {
        var m = DiscoveryMachine(mode: .watch)
        _ = m.handle(.start(domains: []), nowMs: 0)
        let k = key("Kitchen")
        _ = m.handle(.browserNew(k), nowMs: 1)
        _ = m.handle(.resolved(k, res("10.0.0.2")), nowMs: 2)
        let a = m.handle(.resolveFailed(k, message: "Timeout reached"), nowMs: 3)
        #expect(a.contains { if case .removed = $0 { return true }; return false })
    }

    @Test func `a listing finishes when every domain said all-for-now and nothing is resolving`() {
        var m = DiscoveryMachine(mode: .list(timeoutMs: 3000))
        _ = m.handle(.start(domains: ["openclaw.internal."]), nowMs: 0)
        let k = key("Kitchen")
        _ = m.handle(.browserNew(k), nowMs: 100)
        #expect(finish(m.handle(.allForNow(domain: "local"), nowMs: 900)) == nil)          // wide-area still out
        #expect(finish(m.handle(.allForNow(domain: "openclaw.internal"), nowMs: 950)) == nil)  // Kitchen resolving
        let a = m.handle(.resolved(k, res("10.0.0.2")), nowMs: 1000)
        #expect(added(a).count == 1)
        #expect(finish(a) == .settled)
        #expect(m.handle(.tick, nowMs: 1100).isEmpty)  // finished: nothing more
    }

    @Test func `a listing stops at its deadline with what resolved so far`() {
        var m = DiscoveryMachine(mode: .list(timeoutMs: 3000))
        _ = m.handle(.start(domains: []), nowMs: 0)
        _ = m.handle(.browserNew(key("Slow")), nowMs: 10)
        _ = m.handle(.allForNow(domain: "local."), nowMs: 800)
        #expect(finish(m.handle(.tick, nowMs: 2999)) == nil)
        #expect(finish(m.handle(.tick, nowMs: 3000)) == .timedOut)
        #expect(m.gateways.isEmpty)
    }

    @Test func `a domain that cannot be browsed warns and does not hold the listing up`() {
        var m = DiscoveryMachine(mode: .list(timeoutMs: 3000))
        _ = m.handle(.start(domains: ["openclaw.internal."]), nowMs: 0)
        _ = m.handle(.allForNow(domain: "local"), nowMs: 500)
        let a = m.handle(.browserFailed(domain: "openclaw.internal", message: "Not permitted"), nowMs: 600)
        #expect(a.contains(.warning("cannot browse openclaw.internal.: Not permitted")))
        #expect(finish(a) == .settled)
    }

    @Test func `watching never finishes by itself, but a lost daemon ends it`() {
        var m = DiscoveryMachine(mode: .watch)
        _ = m.handle(.start(domains: []), nowMs: 0)
        _ = m.handle(.allForNow(domain: "local"), nowMs: 500)
        #expect(finish(m.handle(.tick, nowMs: 3_600_000)) == nil)
        #expect(finish(m.handle(.daemonLost(message: "gone"), nowMs: 3_600_001)) == .failed("gone"))
    }

    @Test func `gateways sort local first, then by domain and name`() {
        var m = DiscoveryMachine(mode: .watch)
        _ = m.handle(.start(domains: ["a.example."]), nowMs: 0)
        for (n, d) in [("Zed", "local"), ("Wide", "a.example"), ("alpha", "local")] {
            let k = key(n, iface: -1, proto: -1, domain: d)
            _ = m.handle(.browserNew(k), nowMs: 1)
            _ = m.handle(.resolved(k, res("10.0.0.1", iface: nil)), nowMs: 2)
        }
        #expect(m.gateways.map(\.name) == ["alpha", "Zed", "Wide"])
    }
}

@Suite struct DiscoveredGatewayTests {
    @Test func `TXT keys as the spec lists them`() {
        let t = GatewayTXT(["role=gateway", "transport=gateway", "displayName=Kitchen\\032Hub", "lanHost=kitchen.local",
                            "gatewayPort=18789", "gatewayTls=1", "gatewayTlsSha256=SHA-256:\(fp.uppercased())",
                            "gatewayDirectReachable=1", "tailnetDns=kitchen.tail1234.ts.net", "sshPort=22", "cliPath=/usr/bin/openclaw",
                            "canvasPort=18793", "GATEWAYTLS=0"])
        #expect(t.role == "gateway" && t.transport == "gateway")
        #expect(t.displayName == "Kitchen Hub")
        #expect(t.lanHost == "kitchen.local" && t.gatewayPort == 18789)
        #expect(t.tls)  // the first of a key wins, case-insensitively
        #expect(t.tlsFingerprint == fp)
        #expect(t.directReachable && t.tailnetDns == "kitchen.tail1234.ts.net" && t.sshPort == 22 && t.cliPath == "/usr/bin/openclaw")
        #expect(t["canvasPort"] == "18793")
    }

    @Test func `a fingerprint that is not a SHA-256 is no fingerprint; no gatewayTls is plain ws`() {
        let t = GatewayTXT(["gatewayTlsSha256=abc", "gatewayPort=99999", "flag"])
        #expect(t.tlsFingerprint == nil && !t.tls && t.gatewayPort == nil)
        #expect(t["flag"] == "")
    }

    @Test func `escapes in instance names decode for display`() {
        #expect(DiscoveryNames.decodeEscapes("Kitchen\\032Gateway") == "Kitchen Gateway")
        #expect(DiscoveryNames.decodeEscapes("a\\.b\\\\c") == "a.b\\c")
        #expect(DiscoveryNames.decodeEscapes("caf\\195\\169") == "café")
        #expect(DiscoveryNames.decodeEscapes("plain") == "plain")
        #expect(DiscoveryNames.decodeEscapes("bad\\999") == "bad999")
    }

    @Test func `the URL dials the resolved address and SRV port, never the TXT hints`() {
        let txt = GatewayTXT(["lanHost=other.local", "gatewayPort=1234"])
        var g = DiscoveredGateway(name: "K", domain: "local.", host: "gw.local.", addresses: ["fd00::1"], interfaces: ["eth0"], port: 18789, txt: txt)
        #expect(g.url == "ws://[fd00::1]:18789")
        g.addresses = []
        #expect(g.url == "ws://gw.local:18789")
        g.addresses = ["fe80::1", "10.1.2.3"]
        #expect(g.url == "ws://10.1.2.3:18789")
    }
}

@Suite struct PairChoiceTests {
    private func gw(_ name: String, _ port: Int, domain: String = "local.", display: String? = nil) -> DiscoveredGateway {
        DiscoveredGateway(name: name, domain: domain, host: "h.local.", addresses: ["127.0.0.1"], interfaces: [], port: port,
                          txt: GatewayTXT(display.map { ["displayName=\($0)"] } ?? []))
    }

    @Test func `one found is used, and said so`() {
        guard case .use(let g, let why) = PairChoice.decide(found: [gw("Kitchen", 1)], name: nil, interactive: false,
                                                           domains: ["local."], timeoutMs: 3000) else { Issue.record("not used"); return }
        #expect(g.name == "Kitchen")
        #expect(why.contains("Found one gateway, Kitchen") && why.contains("ws://127.0.0.1:1"))
    }

    @Test func `several off a terminal are listed with the way to pick one; on a terminal they are offered`() {
        let found = [gw("Attic", 1), gw("Kitchen", 2)]
        guard case .fail(let line) = PairChoice.decide(found: found, name: nil, interactive: false, domains: ["local."], timeoutMs: 3000) else {
            Issue.record("expected a failure"); return
        }
        #expect(line.contains("found 2 gateways") && line.contains("\"Attic\" ws://127.0.0.1:1") && line.contains("--name NAME"))
        #expect(!line.contains("\n"))
        #expect(PairChoice.decide(found: found, name: nil, interactive: true, domains: ["local."], timeoutMs: 3000) == .ask(found))
        #expect(PairChoice.pick("2", from: found)?.name == "Kitchen")
        #expect(PairChoice.pick(" attic ", from: found)?.name == "Attic")
        #expect(PairChoice.pick("3", from: found) == nil && PairChoice.pick("", from: found) == nil)
    }

    @Test func `--name picks by instance or display name, local first`() {
        let found = [gw("Kitchen", 1), gw("Office", 2, display: "Work"), gw("Kitchen", 3, domain: "openclaw.internal.")]
        guard case .use(let g, let why) = PairChoice.decide(found: found, name: "kitchen", interactive: false,
                                                           domains: ["local.", "openclaw.internal."], timeoutMs: 3000) else { Issue.record(""); return }
        #expect(g.port == 1 && why.contains("also in openclaw.internal."))
        guard case .use(let w, _) = PairChoice.decide(found: found, name: "Work", interactive: true, domains: ["local."], timeoutMs: 3000) else {
            Issue.record(""); return
        }
        #expect(w.name == "Office")
    }

    @Test func `nothing found, or nothing by that name, says where it looked and what to do`() {
        guard case .fail(let none) = PairChoice.decide(found: [], name: nil, interactive: true, domains: ["local.", "openclaw.internal."], timeoutMs: 2500) else {
            Issue.record(""); return
        }
        #expect(none.contains("on local. and openclaw.internal. within 2.5 s") && none.contains("setup code") && none.contains("--url"))
        guard case .fail(let named) = PairChoice.decide(found: [gw("Attic", 1)], name: "Cellar", interactive: false, domains: ["local."], timeoutMs: 3000) else {
            Issue.record(""); return
        }
        #expect(named.contains("no gateway named \"Cellar\"") && named.contains("found: \"Attic\""))
    }
}
