// `clawvoice discover` (list or --watch the gateways Avahi finds) and the discovery step of
// `clawvoice pair` without a URL (offer what was found, or pick --name). Formatting is here; the
// browse is the Discovery module's.

import ClawvoiceCore
import Discovery
import Foundation
import GatewayCrypto
import GatewayProtocol
import NodeRuntime
import Daemon
#if canImport(Glibc)
import Glibc
#endif

enum DiscoverCommand {
    static let command = CLI.Command(name: "discover", abstract: "List the OpenClaw gateways Avahi finds on the network (live with --watch).",
                usage: "clawvoice discover [--watch] [--json] [--timeout SECONDS] [--domain DOMAIN]",
                details: """
                Browses _openclaw-gw._tcp through avahi-daemon on local. (mDNS) and on the wide-area DNS-SD domain
                in discovery.wideAreaDomain (or CLAWVOICE_WIDE_AREA_DOMAIN, or --domain), e.g. openclaw.internal.
                Shows each gateway's name, host, addresses, port, TLS and advertised fingerprint (TXT hints,
                unauthenticated), the URL pair would use (the resolved address and SRV port) and the pair command.
                Waits until every domain has answered or the timeout (discovery.timeoutMs, default 3 s) passes.
                Needs avahi-daemon running (Debian: sudo apt install avahi-daemon).

                Options:
                  --watch            keep browsing: one line per gateway added (+), changed (~) or gone (-), until Ctrl-C
                  --json             a JSON array (with --watch: one {"event", "gateway"} object per line)
                  --timeout SECONDS  how long to wait for answers
                  --domain DOMAIN    also browse this wide-area domain
                """, flags: ["--watch": false, "--json": false, "--timeout": true, "--domain": true], maxPositionals: 0)

    static func domains(_ p: CLI.Parsed, config: ClawConfig) -> [String] {
        GatewayDiscovery.domains(wideArea: [config.discovery.wideAreaDomain, p.flags["--domain"]])
    }

    static func timeoutMs(_ p: CLI.Parsed, config: ClawConfig) throws -> Int {
        guard let t = p.flags["--timeout"] else { return config.discovery.timeoutMs }
        guard let s = Double(t), s > 0, s <= 600 else { throw CLI.UsageError(description: "\(p.command.name): --timeout needs a number of seconds (up to 600)") }
        return Int(s * 1000)
    }

    static func run(_ p: CLI.Parsed, config: ClawConfig, environment: [String: String], say: @escaping @Sendable (String) -> Void) async throws -> Int32 {
        let json = p.flags["--json"] != nil
        let ds = domains(p, config: config)
        let wide = ds.filter { $0 != DiscoveryNames.localDomain }
        if p.flags["--watch"] != nil {
            // Lines as things change, until Ctrl-C (or the daemon goes away: one error line, exit 1).
            try await GatewayDiscovery(mode: .watch, wideArea: wide, environment: environment, onConnected: {
                if !json { note("Watching for OpenClaw gateways on \(ds.joined(separator: " and ")); Ctrl-C stops") }
            }) { action in
                switch action {
                case .added(let g): say(json ? event("added", g) : "+ \(oneLine(g))")
                case .changed(let g): say(json ? event("changed", g) : "~ \(oneLine(g))")
                case .removed(let g): say(json ? event("removed", g) : "- \(g.name) (\(g.domain)) gone")
                case .warning(let w): note(w)
                default: break
                }
            }.run()
            return 0
        }
        let ms = try timeoutMs(p, config: config)
        let result = try await GatewayDiscovery.run(mode: .list(timeoutMs: Int64(ms)), wideArea: wide, environment: environment, onConnected: {
            if !json { note("Looking for OpenClaw gateways on \(ds.joined(separator: " and ")) (up to \(Double(ms) / 1000) s)…") }
        }) { action in
            if !json, case .added(let g) = action { note("  found \(g.name) (\(g.domain))") }
            if case .warning(let w) = action { note(w) }
        }
        if json {
            say(JSONValue.array(result.gateways.map(jsonValue)).description)
            return 0
        }
        if result.gateways.isEmpty {
            say("No gateway answered on \(ds.joined(separator: " and ")) within \(Double(ms) / 1000) s.")
            say("On the gateway host (Linux): openclaw plugins enable bonjour; or pair with a setup code: openclaw qr --setup-code-only")
            return 0
        }
        for (i, g) in result.gateways.enumerated() {
            if i > 0 { say("") }
            for line in block(g) { say(line) }
        }
        return 0
    }

    /// Progress and warnings on stderr, so stdout is only the listing.
    static func note(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

    static func oneLine(_ g: DiscoveredGateway) -> String {
        var s = "\(g.name) (\(g.domain)) \(g.url)"
        if g.tls { s += g.tlsFingerprint.map { " TLS sha256 \($0)" } ?? " TLS" }
        return s
    }

    static func block(_ g: DiscoveredGateway) -> [String] {
        var lines = ["\(g.name)\(g.displayName != g.name ? " \"\(g.displayName)\"" : "") (\(g.domain))"]
        lines.append("  host:        \(g.host)\(g.interfaces.isEmpty ? "" : " on \(g.interfaces.joined(separator: ", "))")")
        lines.append("  addresses:   \(g.addresses.isEmpty ? "-" : g.addresses.joined(separator: ", "))")
        lines.append("  port:        \(g.port)")
        lines.append("  TLS:         \(g.tls ? "yes" : "no")")
        lines.append("  fingerprint: \(g.tlsFingerprint.map { "sha256 \($0) (advertised, unverified)" } ?? "-")")
        lines.append("  url:         \(g.url)")
        var extra: [String] = []
        if let h = g.txt.lanHost { extra.append("lanHost \(h)") }
        if let t = g.txt.tailnetDns { extra.append("tailnetDns \(t)") }
        if let p = g.txt.gatewayPort, p != g.port { extra.append("gatewayPort \(p)") }
        if !extra.isEmpty { lines.append("  also:        \(extra.joined(separator: ", "))") }
        lines.append("  pair:        clawvoice pair --name \(shellQuoted(g.name))")
        return lines
    }

    static func shellQuoted(_ s: String) -> String {
        s.allSatisfy { $0.isLetter || $0.isNumber || "-_.".contains($0) } ? s : "'" + s.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    static func jsonValue(_ g: DiscoveredGateway) -> JSONValue {
        var o: [String: JSONValue] = [
            "name": .string(g.name), "displayName": .string(g.displayName), "domain": .string(g.domain), "host": .string(g.host),
            "addresses": .array(g.addresses.map { .string($0) }), "interfaces": .array(g.interfaces.map { .string($0) }),
            "port": .number(Double(g.port)), "tls": .bool(g.tls), "tlsFingerprint": g.tlsFingerprint.map { .string($0) } ?? .null,
            "url": .string(g.url),
            "txt": .object(g.txt.entries.mapValues { .string($0) }),
        ]
        if let p = g.txt.gatewayPort { o["gatewayPort"] = .number(Double(p)) }
        return .object(o)
    }

    static func event(_ name: String, _ g: DiscoveredGateway) -> String {
        JSONValue.object(["event": .string(name), "gateway": jsonValue(g)]).description
    }

    /// pair without a setup code or URL: browse, then use the one found, the one named, or ask.
    static func choose(_ p: CLI.Parsed, config: ClawConfig, environment: [String: String], say: @escaping @Sendable (String) -> Void) async throws -> DiscoveredGateway {
        let ds = domains(p, config: config)
        let ms = try timeoutMs(p, config: config, discovery: true)
        let interactive = isatty(0) == 1 && isatty(1) == 1
        let result = try await GatewayDiscovery.run(mode: .list(timeoutMs: Int64(ms)), wideArea: ds.filter { $0 != DiscoveryNames.localDomain },
                                                    environment: environment, onConnected: {
            say("No setup code or --url: looking for gateways on \(ds.joined(separator: " and ")) (up to \(Double(ms) / 1000) s)…")
        })
        switch PairChoice.decide(found: result.gateways, name: p.flags["--name"], interactive: interactive, domains: ds, timeoutMs: ms) {
        case .use(let g, let reason):
            say(reason)
            return g
        case .fail(let line):
            throw CLI.Failure(description: line)
        case .ask(let offered):
            for (i, g) in offered.enumerated() { say("  \(i + 1)) \(oneLine(g))") }
            while true {
                FileHandle.standardOutput.write(Data("Pair with which one? [1-\(offered.count)] ".utf8))
                guard let answer = readLine(strippingNewline: true) else { throw CLI.Failure(description: "pair: no gateway chosen") }
                if let g = PairChoice.pick(answer, from: offered) { return g }
                say("  \(answer.isEmpty ? "nothing" : "'\(answer)'") is not one of 1-\(offered.count) or a name")
            }
        }
    }

    /// pair's --timeout is how long it waits for approval; its browse uses the config's timeout.
    static func timeoutMs(_ p: CLI.Parsed, config: ClawConfig, discovery: Bool) throws -> Int {
        discovery && p.command.name == "pair" ? config.discovery.timeoutMs : try timeoutMs(p, config: config)
    }
}
