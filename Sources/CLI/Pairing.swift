// `clawvoice pair`: from a setup code or a URL to a paired gateway, showing each step.

import Daemon
public import ClawvoiceCore
import Foundation
public import GatewayClient
import GatewayCrypto
import GatewayProtocol
public import NodeRuntime
import Store
import WebSocketTransport

/// What the user asked `pair` to do.
public struct PairRequest: Sendable {
    public var setupCode: String?
    public var url: String?
    public var token: String?
    public var password: String?
    public var name: String?
    public var tlsFingerprint: String?
    public var allowInsecure = false
    /// Give up after this long (nil: wait until approved or interrupted).
    public var timeout: Duration?
    /// Asks the user whether to trust (and pin) a certificate that does not verify; nil when
    /// nobody can be asked (not a terminal), and `pair` then ends showing how to pin it.
    public var confirmTrust: (@Sendable (String) -> Bool)?
    /// How the secret was given (`--token-file FILE`, …), repeated in a suggested command.
    public var secretFlag: String?
    public init() {}
}

public enum PairingFlow {
    /// Tries each route in order and returns the first whose gateway sends connect.challenge,
    /// or the one line per route saying why it did not.
    public static func probe(_ routes: [String], tlsFingerprint: String?, allowInsecure: Bool,
                             say: @Sendable (String) -> Void) async -> (route: String?, failures: [String]) {
        var failures: [String] = []
        for route in routes {
            if let why = await GatewayProbe.check(route, tlsFingerprint: tlsFingerprint, allowInsecure: allowInsecure) {
                if routes.count > 1 { say("  \(why)") }
                failures.append(why)
                continue
            }
            say("  \(route): reachable")
            return (route, failures)
        }
        return (nil, failures)
    }

    /// Runs the whole pairing: find a route that answers as a gateway, store it, connect both
    /// roles, show approvals, wait. Nothing is stored before a gateway answered; a try that ends
    /// with no role paired leaves the store as it was. Returns 0 when both roles are paired.
    public static func run(_ request: PairRequest, paths: RuntimePaths, config: ClawConfig, log: LogSink,
                           timing: ConnectionTiming = ConnectionTiming(), say: @escaping @Sendable (String) -> Void) async throws -> Int32 {
        let now = nowMs()
        var record: GatewayRecord
        if let code = request.setupCode {
            let setup = try SetupCode.parse(code, nowMs: now)
            let routes = setup.routes
            var pin = request.tlsFingerprint ?? setup.tlsFingerprint
            say("Setup code for \(setup.url)\(routes.count > 1 ? " (\(routes.count) routes)" : ""); probing…")
            var (answered, failures) = await probe(routes, tlsFingerprint: pin, allowInsecure: request.allowInsecure, say: say)
            if answered == nil && pin == nil {
                // A wss:// route whose certificate does not verify, and the code carries no pin:
                // show what to pin (never the code itself, it holds a bootstrap token), or ask.
                for route in routes where route.hasPrefix("wss://") {
                    guard case .untrustedCertificate(let host, let reason, let fingerprint)? =
                            await TLSTrust.firstFailure(route, allowInsecure: request.allowInsecure) else { continue }
                    guard let fingerprint, let confirm = request.confirmTrust,
                          confirm(TLSTrust.question(host: host, reason: reason, fingerprint: fingerprint)) else {
                        throw CLI.Failure(description: TLSTrust.refusal(host: host, reason: reason, fingerprint: fingerprint,
                                                                        setupCode: true, url: route, secretFlag: nil))
                    }
                    pin = fingerprint
                    say("Pinned the certificate of \(host): sha256 \(fingerprint)")
                    (answered, failures) = await probe([route], tlsFingerprint: pin, allowInsecure: request.allowInsecure, say: say)
                    break
                }
            }
            guard let route = answered else {
                throw CLI.Failure(description: "nothing was paired, no route answered as a gateway: " + failures.joined(separator: "; "))
            }
            record = GatewayRecord(name: request.name ?? GatewayNaming.name(for: route), url: route, tlsFingerprint: pin,
                                   allowInsecure: request.allowInsecure, bootstrapToken: setup.bootstrapToken,
                                   sharedToken: request.token, password: request.password, addedAtMs: now)
        } else if let url = request.url {
            let parsed = try WebSocketURL(parsing: url)
            if !parsed.secure && !parsed.isLoopback && !request.allowInsecure {
                throw ConfigError("refusing unencrypted ws:// to non-loopback host \(parsed.host): use wss:// (with --tls-fingerprint) or pass --allow-insecure")
            }
            var pin = request.tlsFingerprint
            if parsed.secure && pin == nil,
               case .untrustedCertificate(let host, let reason, let fingerprint)? = await TLSTrust.firstFailure(url, allowInsecure: request.allowInsecure) {
                // A self-signed gateway: retrying cannot help; say what to pin, or ask.
                guard let fingerprint, let confirm = request.confirmTrust,
                      confirm(TLSTrust.question(host: host, reason: reason, fingerprint: fingerprint)) else {
                    throw CLI.Failure(description: TLSTrust.refusal(host: host, reason: reason, fingerprint: fingerprint,
                                                                    url: url, secretFlag: request.secretFlag))
                }
                pin = fingerprint
                say("Pinned the certificate of \(host): sha256 \(fingerprint)")
            }
            // An address that cannot work ends here, in seconds, with what to fix.
            if let why = await GatewayProbe.check(url, tlsFingerprint: pin, allowInsecure: request.allowInsecure) {
                throw CLI.Failure(description: "nothing was paired: \(why)")
            }
            record = GatewayRecord(name: request.name ?? GatewayNaming.name(for: url), url: url, tlsFingerprint: pin,
                                   allowInsecure: request.allowInsecure, sharedToken: request.token, password: request.password,
                                   addedAtMs: now)
        } else {
            throw ConfigError("pair needs a setup code or --url")
        }
        let store = try openStore(paths)
        let (identity, instanceId) = try store.loadOrCreateIdentity()
        let old = try store.gateway(named: record.name)
        if let old {
            record.addedAtMs = old.addedAtMs
            record.isActive = old.isActive
            if old.url != record.url || record.bootstrapToken != nil {
                // A new route or a fresh setup code: old tokens may belong to another gateway.
                for role in SessionRole.allCases { try store.deleteToken(gateway: record.name, role: role.rawValue) }
            }
        }
        // Stored (the sessions keep its tokens there) but made active only once a role is paired.
        try store.upsertGateway(record)
        say("Device \(identity.deviceId) (\(config.node.displayName)) → gateway \(record.name) at \(record.url)")

        // The sessions' own error lines would repeat, once per role, the one line pair ends with;
        // their info lines repeat what pair prints on stdout (both come back with --log-level debug).
        let linkLog = LogSink(minimum: log.minimum) { level, component, message in
            if component.hasPrefix("gateway[") && (level == .error || (level == .info && log.minimum > .debug)) { return }
            log.log(level, component, message)
        }
        let link = GatewayLink(record: record, store: store, identity: identity, instanceId: instanceId, config: config,
                               commands: NodeCommands.registry(), log: linkLog, timing: timing)
        let shown = Locked<Set<String>>([])
        link.onStatus { s in
            let key = "\(s.role)|\(s.state.rawValue)|\(s.requestId ?? "")|\(s.code ?? "")"
            guard shown.withLock({ $0.insert(key).inserted }) else { return }
            switch s.state {
            case .pairing where s.requestId != nil:
                say("\(s.role): waiting for approval, request \(s.requestId!). On the gateway host run:")
                say("    openclaw devices approve \(s.requestId!)")
            case .pairing:
                say("\(s.role): \(s.detail)")
            case .connected:
                say("\(s.role): paired and connected")
            case .paused:
                break  // pair ends with this, once, on stderr
            case .waiting where s.code != nil:
                // A retried refusal with a name (OPERATOR_ACCESS_DENIED): say what the gateway said.
                say("\(s.role): \(s.detail)")
                if let next = s.nextStep { say("    \(next)") }
            case .waiting, .connecting, .stopped:
                break
            }
        }
        let started = ContinuousClock.now
        // Both sessions, and every 30 s what is still pending, as children of the wait.
        let outcome = await withTaskGroup(of: Void.self) { group in
            group.addTask { await link.run() }
            group.addTask {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(30))
                    if Task.isCancelled { break }
                    let waited = Int((ContinuousClock.now - started).components.seconds)
                    func view(_ s: SessionStatus?) -> PairProgress.SessionStatusView? {
                        s.map { PairProgress.SessionStatusView(state: $0.state.rawValue, detail: $0.detail, requestId: $0.requestId) }
                    }
                    if let line = PairProgress.line(node: view(link.status(.node)), operator: view(link.status(.operator)), waitedSeconds: waited) {
                        say(line)
                    }
                }
            }
            let outcome = await waitOrInterrupt(link, timeout: request.timeout)
            group.cancelAll()
            return outcome
        }
        let paired = SessionRole.allCases.filter { (try? store.token(gateway: record.name, role: $0.rawValue)) != nil }
        switch outcome {
        case .some(.success):
            try store.setActiveGateway(name: record.name)
            say("Paired with \(record.name). The gateway may also list this node's commands for approval:")
            say("    openclaw nodes pending   then   openclaw nodes approve <id>")
            if notifyDaemon(paths, reason: "paired with \(record.name)") {
                say("The running daemon now uses it.")
            } else {
                say("Start the node with `clawvoice run` (or `systemctl --user enable --now clawvoice`).")
            }
            return 0
        case .some(.failure(let s)) where !paired.isEmpty:
            // Part of it worked (a setup code that pairs only the node): keep that, say what is missing.
            try store.setActiveGateway(name: record.name)
            _ = notifyDaemon(paths, reason: "paired with \(record.name)")
            let have = paired.map(\.rawValue).joined(separator: " and ")
            throw CLI.Failure(description: "pairing incomplete: \(have) paired with \(record.name), but \(s.role) is not: \(s.detail)\(s.nextStep.map { "; \($0)" } ?? "")")
        case let other:
            restore(store, old: old, name: record.name)
            guard case .failure(let s)? = other else {
                throw CLI.Failure(description: "pairing interrupted; nothing was stored")
            }
            if s.state == .paused {
                // The detail already says what to do (e.g. set the right token); nextStep is generic.
                throw CLI.Failure(description: "nothing was paired: \(s.detail)\(s.nextStep.map { "; \($0)" } ?? "")")
            }
            throw CLI.Failure(description: "pairing not finished after \(request.timeout.map { "\($0.components.seconds) s" } ?? "waiting"): \(s.role) is \(s.state.rawValue) (\(s.detail)); run `clawvoice pair` again after approving")
        }
    }

    /// Both roles' outcome, or nil when SIGINT/SIGTERM came first (then pair cleans up and ends).
    private static func waitOrInterrupt(_ link: GatewayLink, timeout: Duration?) async -> Result<Void, SessionStatus>? {
        let signals = SignalStream([SIGINT, SIGTERM])
        defer { signals.cancel() }
        return await withTaskGroup(of: Result<Void, SessionStatus>?.self) { group in
            group.addTask { await link.waitForBoth(timeout: timeout) }
            group.addTask {
                for await _ in signals.stream { return nil }
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    /// After a try that paired nothing: the gateway as it was before, or gone if it was new.
    private static func restore(_ store: ClawStore, old: GatewayRecord?, name: String) {
        if let old { try? store.upsertGateway(old) } else { try? store.deleteGateway(name: name) }
    }

    /// Tells a running daemon to rebuild its gateway link from the store (as `gateways use`
    /// does), so a new pairing is used at once. False when no daemon answers.
    static func notifyDaemon(_ paths: RuntimePaths, reason: String) -> Bool {
        (try? ControlSocketClient.send(["cmd": "restart", "reason": .string(reason)], path: paths.controlSocket, timeoutSeconds: 5)) != nil
    }
}
