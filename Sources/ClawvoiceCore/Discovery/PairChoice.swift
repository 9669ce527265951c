// PairChoice: which discovered gateway `clawvoice pair` without a URL uses. Pure: the gateways
// found, the --name asked for and whether someone can be asked in, a decision out.

import Foundation

public enum PairChoice: Sendable, Equatable {
    /// Use this one; `reason` is the line that says so.
    case use(DiscoveredGateway, reason: String)
    /// Several and a terminal: offer them as a numbered list.
    case ask([DiscoveredGateway])
    /// Nothing to use; the one line that says why and what to do.
    case fail(String)

    public static func decide(found: [DiscoveredGateway], name: String?, interactive: Bool, domains: [String], timeoutMs: Int) -> PairChoice {
        let whereLooked = "on \(domains.joined(separator: " and ")) within \(Self.seconds(timeoutMs))"
        if let name {
            let hits = found.filter { $0.matches(name: name) }
            // The same instance name in two domains: local. comes first in `found`, and is nearer.
            if let first = hits.first {
                let also = hits.count > 1 ? " (also in \(hits.dropFirst().map(\.domain).joined(separator: ", ")))" : ""
                return .use(first, reason: "Using \(first.name) (\(first.domain)) at \(first.url)\(also)")
            }
            let seen = found.isEmpty ? "none answered" : "found: \(found.map { "\"\($0.name)\"" }.joined(separator: ", "))"
            return .fail("pair: no gateway named \"\(name)\" \(whereLooked) (\(seen)); check `clawvoice discover`, or give a setup code or --url")
        }
        switch found.count {
        case 0:
            return .fail("pair: no gateway found \(whereLooked); give a setup code (`openclaw qr --setup-code-only` on the gateway host) or --url ws://HOST:18789, or on Linux gateways enable discovery: openclaw plugins enable bonjour")
        case 1:
            let g = found[0]
            return .use(g, reason: "Found one gateway, \(g.name) (\(g.domain)) at \(g.url); using it")
        default:
            if interactive { return .ask(found) }
            let list = found.map { "\"\($0.name)\" \($0.url)" }.joined(separator: ", ")
            return .fail("pair: found \(found.count) gateways: \(list); pick one with --name NAME or give --url")
        }
    }

    /// A numbered answer ("2") to the list offered by `.ask`; nil when it is not one of them.
    public static func pick(_ answer: String, from offered: [DiscoveredGateway]) -> DiscoveredGateway? {
        let t = answer.trimmingCharacters(in: .whitespaces)
        if let n = Int(t), n >= 1, n <= offered.count { return offered[n - 1] }
        return offered.first { $0.matches(name: t) }
    }

    static func seconds(_ ms: Int) -> String {
        ms % 1000 == 0 ? "\(ms / 1000) s" : "\(Double(ms) / 1000) s"
    }
}
