// GatewayDiscovery: the executor that runs one browse, a `Service`. It connects an AvahiBrowser,
// feeds its events and a 100 ms tick into a DiscoveryMachine (one inbox), carries out the
// machine's actions and hands the gateway changes to the caller. `browse()` returns when the
// machine finishes (a listing); `run()` browses until its task is cancelled (--watch).

public import ClawvoiceCore
public import Foundation
public import GatewayProtocol

public struct GatewayDiscovery: Service {
    /// What a finished browse saw.
    public struct Result: Sendable {
        public var gateways: [DiscoveredGateway]
        public var finish: DiscoveryMachine.Finish
        public var domains: [String]
        public var warnings: [String]
    }

    public let mode: DiscoveryMachine.Mode
    public let wideArea: [String]
    let environment: [String: String]
    let onConnected: @Sendable () -> Void
    let onAction: @Sendable (DiscoveryMachine.Action) -> Void

    /// A browse of `_openclaw-gw._tcp` in local. and `wideArea` domains. `onAction` sees every added,
    /// changed and removed gateway and warning as it happens; `onConnected` runs once the daemon answered
    /// (progress lines go there, so a failure to connect is the only line).
    public init(mode: DiscoveryMachine.Mode, wideArea: [String], environment: [String: String] = ProcessInfo.processInfo.environment,
                onConnected: @escaping @Sendable () -> Void = {},
                onAction: @escaping @Sendable (DiscoveryMachine.Action) -> Void = { _ in }) {
        self.mode = mode
        self.wideArea = wideArea
        self.environment = environment
        self.onConnected = onConnected
        self.onAction = onAction
    }

    /// The domains a browse covers: local. plus the configured wide-area one, normalised.
    public static func domains(wideArea: [String?]) -> [String] {
        var seen = Set<String>()
        return ([DiscoveryNames.localDomain] + wideArea.compactMap { DiscoveryNames.normalizeDomain($0) })
            .filter { seen.insert($0.lowercased()).inserted }
    }

    /// One browse (see `init`), as the caller's code rather than a service.
    public static func run(mode: DiscoveryMachine.Mode, wideArea: [String], environment: [String: String] = ProcessInfo.processInfo.environment,
                           onConnected: @escaping @Sendable () -> Void = {},
                           onAction: @escaping @Sendable (DiscoveryMachine.Action) -> Void = { _ in }) async throws -> Result {
        try await GatewayDiscovery(mode: mode, wideArea: wideArea, environment: environment, onConnected: onConnected, onAction: onAction).browse()
    }

    /// The service: browses until the machine finishes or the task is cancelled (--watch).
    public func run() async throws { _ = try await browse() }

    /// Browses until the machine finishes (a listing) or the task is cancelled. Throws the
    /// one-line DiscoveryError when avahi-daemon cannot be reached (at start, or when it goes away).
    public func browse() async throws -> Result {
        let browser = try AvahiBrowser(environment: environment)
        onConnected()
        defer { browser.close() }
        // The machine's clock: a child that leaving this scope cancels and awaits.
        let inbox = browser.inbox
        async let ticking: Void = {
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(100))
                inbox.yield(.tick)
            }
        }()
        let clock = ContinuousClock()
        let t0 = clock.now
        func nowMs() -> Int64 { let d = clock.now - t0; return d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000 }

        var machine = DiscoveryMachine(mode: mode)
        var warnings: [String] = []
        var finish: DiscoveryMachine.Finish = .timedOut
        inbox.yield(.start(domains: wideArea))
        loop: for await input in browser.events {
            if Task.isCancelled { break }
            for action in machine.handle(input, nowMs: nowMs()) {
                switch action {
                case .browse(let domain): browser.browse(domain: domain)
                case .resolve(let key): browser.resolve(key)
                case .stopResolving(let key): browser.stopResolving(key)
                case .warning(let w): warnings.append(w); onAction(action)
                case .added, .changed, .removed: onAction(action)
                case .finish(let f):
                    finish = f
                    break loop
                }
            }
        }
        if case .failed(let message) = finish { throw DiscoveryError("cannot browse for gateways: \(message)") }
        return Result(gateways: machine.gateways, finish: finish, domains: Self.domains(wideArea: wideArea), warnings: warnings)
    }
}
