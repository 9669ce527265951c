// `clawvoice pair`: from a setup code or a URL to a paired gateway, showing each step.

import Foundation
import GatewayClient
import GatewayProtocol
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
    /// Tries each route in order and returns the first whose gateway sends connect.challenge.
    public static func probe(_ routes: [String], tlsFingerprint: String?, allowInsecure: Bool,
                             timeout: Duration = .seconds(4), say: @Sendable (String) -> Void) async -> String? {
        for route in routes {
            if await reachable(route, tlsFingerprint: tlsFingerprint, allowInsecure: allowInsecure, timeout: timeout, say: say) {
                say("  \(route): reachable")
                return route
            }
        }
        return nil
    }

    static func reachable(_ route: String, tlsFingerprint: String?, allowInsecure: Bool, timeout: Duration,
                          say: @Sendable (String) -> Void) async -> Bool {
        let client: WebSocketClient
        do {
            let url = try WebSocketURL(parsing: route)
            var o = WebSocketClientOptions()
            o.tlsPinSHA256 = tlsFingerprint
            o.allowInsecureRemote = allowInsecure
            client = try WebSocketClient(url: url, options: o)
        } catch {
            say("  \(route): \(error)")
            return false
        }
        client.connect()
        let result = await ConnectProbe.first(client, within: timeout, ended: "closed") { e -> String? in
            switch e {
            case .message(let m):
                let frame: GatewayFrame?
                switch m {
                case .text(let s): frame = try? GatewayFrame.decode(s)
                case .binary(let b): frame = try? GatewayFrame.decode(b)
                }
                if case .event(let ev)? = frame, ev.event == GatewayEvent.challenge { return "ok" }
                return nil
            case .failed(let err): return "\(err)"
            case .closed(let code, let reason): return "closed (\(code.map(String.init) ?? "-") \(reason))"
            case .opened: return nil
            }
        }
        client.close(code: 1000, reason: "probe")
        if result == "ok" { return true }
        say("  \(route): \(result ?? "no connect.challenge within \(timeout)")")
        return false
    }

    /// Runs the whole pairing: save the gateway, connect both roles, show approvals, wait.
    /// Returns the exit status: 0 when both roles are paired.
    public static func run(_ request: PairRequest, paths: RuntimePaths, config: ClawConfig, log: LogSink,
                           timing: ConnectionTiming = ConnectionTiming(), say: @escaping @Sendable (String) -> Void) async throws -> Int32 {
        let now = nowMs()
        var routes: [String]
        var record: GatewayRecord
        if let code = request.setupCode {
            let setup = try SetupCode.parse(code, nowMs: now)
            routes = setup.routes
            var pin = request.tlsFingerprint ?? setup.tlsFingerprint
            say("Setup code for \(setup.url)\(setup.routes.count > 1 ? " (\(setup.routes.count) routes)" : ""); probing…")
            var answered = await probe(routes, tlsFingerprint: pin, allowInsecure: request.allowInsecure, say: say)
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
                    answered = await probe([route], tlsFingerprint: pin, allowInsecure: request.allowInsecure, say: say)
                    break
                }
            }
            guard let route = answered else {
                throw CLI.Failure(description: "no route answered; is the gateway running and reachable from here? Tried: \(routes.joined(separator: ", "))")
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
            record = GatewayRecord(name: request.name ?? GatewayNaming.name(for: url), url: url, tlsFingerprint: pin,
                                   allowInsecure: request.allowInsecure, sharedToken: request.token, password: request.password,
                                   addedAtMs: now)
            routes = [url]
        } else {
            throw ConfigError("pair needs a setup code or --url")
        }
        _ = routes
        let store = try openStore(paths)
        let (identity, instanceId) = try store.loadOrCreateIdentity()
        if let old = try store.gateway(named: record.name) {
            record.addedAtMs = old.addedAtMs
            if old.url != record.url || record.bootstrapToken != nil {
                // A new route or a fresh setup code: old tokens may belong to another gateway.
                for role in SessionRole.allCases { try store.deleteToken(gateway: record.name, role: role.rawValue) }
            }
        }
        try store.upsertGateway(record)
        try store.setActiveGateway(name: record.name)
        say("Device \(identity.deviceId) (\(config.node.displayName)) → gateway \(record.name) at \(record.url)")

        // The sessions' own error lines would repeat, once per role, the one line pair ends with.
        let linkLog = LogSink(minimum: log.minimum) { level, component, message in
            if level == .error && component.hasPrefix("gateway[") { return }
            log.log(level, component, message)
        }
        let link = GatewayLink(record: record, store: store, identity: identity, instanceId: instanceId, config: config,
                               commands: NodeCommands.registry(), log: linkLog, timing: timing)
        let shown = Mutex<Set<String>>([])
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
        await link.start()
        let started = ContinuousClock.now
        let progress = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(30))
                if Task.isCancelled { break }
                let waited = ContinuousClock.now - started
                say("still waiting for approval (\(Int(waited.components.seconds)) s)…")
            }
        }
        let outcome = await link.waitForBoth(timeout: request.timeout)
        progress.cancel()
        await link.stop()
        switch outcome {
        case .success:
            say("Paired with \(record.name). The gateway may also list this node's commands for approval:")
            say("    openclaw nodes pending   then   openclaw nodes approve <id>")
            say("Start the node with `clawvoice run` (or `systemctl --user enable --now clawvoice`).")
            return 0
        case .failure(let s):
            if s.state == .paused {
                // The detail already says what to do (e.g. set the right token); nextStep is generic.
                throw CLI.Failure(description: "pairing stopped: \(s.detail)")
            }
            throw CLI.Failure(description: "pairing not finished after \(request.timeout.map { "\($0.components.seconds) s" } ?? "waiting"): \(s.role) is \(s.state.rawValue) (\(s.detail)); run `clawvoice pair` again after approving")
        }
    }
}
