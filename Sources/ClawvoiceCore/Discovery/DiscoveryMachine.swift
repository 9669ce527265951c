// DiscoveryMachine: the pure value that turns Avahi's browse and resolve events into the set of
// gateways (added / changed / removed) and decides when a one-shot listing is done. Time comes in
// as milliseconds; the executor (GatewayDiscovery) only carries out the actions.

/// One DNS-SD service as Avahi reports it: per interface and address family.
public struct ServiceKey: Hashable, Sendable, CustomStringConvertible {
    public var interface: Int32
    public var proto: Int32
    public var name: String
    public var type: String
    /// Normalised with a trailing dot.
    public var domain: String

    public init(interface: Int32, proto: Int32, name: String, type: String = DiscoveryNames.serviceType, domain: String) {
        self.interface = interface
        self.proto = proto
        self.name = name
        self.type = type
        self.domain = domain.hasSuffix(".") ? domain : domain + "."
    }

    /// The gateway this service belongs to: the same instance in the same domain, whatever the interface.
    public var gatewayID: GatewayID { GatewayID(name: name, domain: domain.lowercased()) }
    public var description: String { "\(name).\(type).\(domain) if\(interface)/\(proto)" }
}

public struct GatewayID: Hashable, Sendable {
    public var name: String
    public var domain: String
}

/// What a resolver found for one ServiceKey.
public struct Resolution: Sendable, Equatable {
    public var host: String
    public var address: String?
    public var port: Int
    public var txt: [String]
    public var interfaceName: String?

    public init(host: String, address: String?, port: Int, txt: [String], interfaceName: String? = nil) {
        self.host = host
        self.address = address
        self.port = port
        self.txt = txt
        self.interfaceName = interfaceName
    }
}

public struct DiscoveryMachine: Sendable {
    public enum Mode: Sendable, Equatable {
        /// List what answers, then finish: when every domain said "all for now" and no resolve is
        /// pending, or at the deadline, whichever comes first.
        case list(timeoutMs: Int64)
        /// Follow changes until stopped.
        case watch
    }

    public enum Input: Sendable, Equatable {
        case start(domains: [String])
        case browserNew(ServiceKey)
        case browserRemove(ServiceKey)
        case allForNow(domain: String)
        case browserFailed(domain: String, message: String)
        case resolved(ServiceKey, Resolution)
        case resolveFailed(ServiceKey, message: String)
        /// The daemon went away (stopped, crashed): nothing more will come.
        case daemonLost(message: String)
        case tick
    }

    public enum Finish: Sendable, Equatable {
        case settled, timedOut
        case failed(String)
    }

    public enum Action: Sendable, Equatable {
        case browse(domain: String)
        case resolve(ServiceKey)
        case stopResolving(ServiceKey)
        case added(DiscoveredGateway)
        case changed(DiscoveredGateway)
        case removed(DiscoveredGateway)
        /// A domain could not be browsed; the others go on.
        case warning(String)
        case finish(Finish)
    }

    public let mode: Mode
    private(set) var startedMs: Int64?
    private(set) var domains: [String] = []
    private(set) var settledDomains: Set<String> = []
    /// Every service the browsers report, with its resolution once it has one.
    private(set) var services: [ServiceKey: Resolution?] = [:]
    /// Resolvers started and not yet answered.
    private(set) var pending: Set<ServiceKey> = []
    /// What was last reported per gateway (added or changed), so changes and removals are told once.
    private(set) var shown: [GatewayID: DiscoveredGateway] = [:]
    private(set) var finished = false

    public init(mode: Mode) { self.mode = mode }

    /// The gateways known now, sorted by domain (local. first) then name.
    public var gateways: [DiscoveredGateway] {
        shown.values.sorted { a, b in
            if a.domain != b.domain { return a.domain == DiscoveryNames.localDomain || (b.domain != DiscoveryNames.localDomain && a.domain < b.domain) }
            return a.name.lowercased() < b.name.lowercased()
        }
    }

    public mutating func handle(_ input: Input, nowMs: Int64) -> [Action] {
        guard !finished else { return [] }
        var actions: [Action] = []
        switch input {
        case .start(let ds):
            startedMs = nowMs
            var seen = Set<String>()
            domains = ([DiscoveryNames.localDomain] + ds.compactMap { DiscoveryNames.normalizeDomain($0) })
                .filter { seen.insert($0.lowercased()).inserted }
            actions += domains.map { .browse(domain: $0) }
        case .browserNew(let key):
            guard services[key] == nil else { break }
            services[key] = .some(nil)
            pending.insert(key)
            actions.append(.resolve(key))
        case .browserRemove(let key):
            guard services.removeValue(forKey: key) != nil else { break }
            pending.remove(key)
            actions.append(.stopResolving(key))
            actions += reconcile(key.gatewayID)
        case .allForNow(let domain):
            settledDomains.insert(Self.norm(domain))
        case .browserFailed(let domain, let message):
            settledDomains.insert(Self.norm(domain))
            actions.append(.warning("cannot browse \(Self.norm(domain)): \(message)"))
        case .resolved(let key, let r):
            guard services[key] != nil else { break }  // removed meanwhile
            pending.remove(key)
            services[key] = .some(r)
            actions += reconcile(key.gatewayID)
        case .resolveFailed(let key, _):
            guard services[key] != nil else { break }
            pending.remove(key)
            // Keep the service (it may resolve later, Avahi keeps trying) but not its old answer.
            services[key] = .some(nil)
            actions += reconcile(key.gatewayID)
        case .daemonLost(let message):
            finished = true
            return [.finish(.failed(message))]
        case .tick:
            break
        }
        if case .list(let timeoutMs) = mode, let started = startedMs {
            let allSettled = domains.allSatisfy { settledDomains.contains($0.lowercased()) }
            if allSettled && pending.isEmpty {
                finished = true
                actions.append(.finish(.settled))
            } else if nowMs - started >= timeoutMs {
                finished = true
                actions.append(.finish(.timedOut))
            }
        }
        return actions
    }

    static func norm(_ domain: String) -> String {
        (domain.hasSuffix(".") ? domain : domain + ".").lowercased()
    }

    /// Rebuilds one gateway from its resolved services and says what changed.
    private mutating func reconcile(_ id: GatewayID) -> [Action] {
        let merged = Self.merge(services.compactMap { k, r in k.gatewayID == id ? r.map { (k, $0) } : nil })
        let before = shown[id]
        switch (before, merged) {
        case (nil, nil): return []
        case (nil, let g?): shown[id] = g; return [.added(g)]
        case (let b?, nil): shown[id] = nil; return [.removed(b)]
        case (let b?, let g?):
            guard b != g else { return [] }
            shown[id] = g
            return [.changed(g)]
        }
    }

    /// One gateway from its services' answers: addresses and interfaces united, host, port and TXT
    /// from the first answer in a stable order (IPv4 before IPv6, lower interface index first).
    static func merge(_ answers: [(ServiceKey, Resolution)]) -> DiscoveredGateway? {
        let sorted = answers.sorted { a, b in
            let a4 = !(a.1.address ?? "").contains(":"), b4 = !(b.1.address ?? "").contains(":")
            if a4 != b4 { return a4 }
            if a.0.interface != b.0.interface { return a.0.interface < b.0.interface }
            return (a.1.address ?? "") < (b.1.address ?? "")
        }
        guard let (key, first) = sorted.first else { return nil }
        var addresses: [String] = [], interfaces: [String] = []
        for (_, r) in sorted {
            if let a = r.address, !addresses.contains(a) { addresses.append(a) }
            if let i = r.interfaceName, !interfaces.contains(i) { interfaces.append(i) }
        }
        return DiscoveredGateway(name: DiscoveryNames.decodeEscapes(key.name), domain: key.domain,
                                 host: first.host.hasSuffix(".") ? first.host : first.host + ".",
                                 addresses: addresses, interfaces: interfaces, port: first.port, txt: GatewayTXT(first.txt))
    }
}
