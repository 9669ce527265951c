// GatewaySession carries out its ConnectionMachine's actions: opening and tearing down the socket,
// the signed connect with the credentials it resolves, hello-ok (tokens kept, the shared secret
// forgotten once the device token works, the operator's Talk target resolved before "connected"),
// pairing, retries and the status every observer sees.

import ClawvoiceCore
import Dispatch
import Foundation
import GatewayCrypto
public import GatewayProtocol
import Store
import WebSocketTransport

extension GatewaySession {
    // MARK: actions

    func perform(_ actions: [ConnectionAction]) {
        for action in actions {
            switch action {
            case .openSocket:
                openSocket()
            case .sendConnect(let challenge, let version):
                sendConnect(challenge, version)
            case .closeSocket(let code, let reason):
                socket?.close(code: code, reason: reason)
                teardownSocket()
            case .connected(let h):
                connected(h)
            case .disconnected(let reason):
                log.log(.warning, component, "disconnected: \(reason)")
                failPending()
                cancelInvokes()
            case .deleteStoredToken:
                log.log(.warning, component, "the gateway rejected the stored device token; deleting it")
                try? store.deleteToken(gateway: endpoint.name, role: role.rawValue)
            case .pairingRequired(let req):
                pairingRequired(req)
            case .refused(let problem):
                if status.code != problem.code { log.log(.warning, component, "\(problem.summary); \(problem.nextStep)") }
                notice = problem
            case .retry(let ms, let reason):
                if let n = notice {
                    notice = nil
                    var s = SessionStatus(role: role.rawValue, gateway: endpoint.name, state: .waiting,
                                          detail: "\(n.summary); retrying in \(formatSeconds(ms))")
                    s.code = n.code
                    s.nextStep = n.nextStep
                    publish(s)
                } else if machine.isPairing || status.state == .pairing {
                    // Stay quiet while waiting for approval: the request id was already shown.
                    log.log(.debug, component, "pairing: next try in \(formatSeconds(ms))")
                } else {
                    log.log(.info, component, "\(reason); retrying in \(formatSeconds(ms))")
                    setStatus(.waiting, "\(reason); retrying in \(formatSeconds(ms))")
                }
            case .clientStalled(let ms):
                // Frames may be waiting unread; the machine has not counted this time against the gateway.
                log.log(ms >= 5_000 ? .warning : .info, component,
                        "this process did not run for \(formatSeconds(ms)) (machine overloaded or suspended?); the gateway's silence in that time is not held against it")
            case .paused(let problem):
                log.log(.error, component, problem.description)
                var s = SessionStatus(role: role.rawValue, gateway: endpoint.name, state: .paused, detail: problem.summary)
                s.nextStep = problem.nextStep
                publish(s)
            }
        }
        rearm()
    }

    func openSocket() {
        teardownSocket()
        if role == .operator, credentials.sharedToken == nil, credentials.password == nil,
           (try? store.token(gateway: endpoint.name, role: role.rawValue)) == nil {
            if credentials.bootstrapToken != nil {
                if (try? store.gateway(named: endpoint.name))?.bootstrapToken == nil,
                   (try? store.token(gateway: endpoint.name, role: SessionRole.node.rawValue)) != nil {
                    // The node redeemed the code and no operator token came with it: waiting cannot help.
                    perform(machine.handle(.blocked(ConnectionProblem(
                        code: "NO_OPERATOR_TOKEN",
                        summary: "the setup code paired the node only: the gateway handed over no operator token",
                        nextStep: "add the operator role with `clawvoice pair --url \(endpoint.url) --token-file FILE` (the gateway's shared token), or use a setup code from a gateway that includes operator access")),
                                               nowMs: nowMs))
                    return
                }
                // The setup code is single-use and belongs to the node; its handoff brings the operator token.
                setStatus(.pairing, "waiting for the node session to finish pairing")
                perform(machine.handle(.deferred(reason: "waiting for node pairing"), nowMs: nowMs))
                return
            }
        }
        generation += 1
        let gen = generation
        let url: WebSocketURL
        do {
            url = try WebSocketURL(parsing: endpoint.url)
        } catch {
            perform(machine.handle(.socketFailed(message: "bad gateway URL \(endpoint.url): \(error)", permanent: true), nowMs: nowMs))
            return
        }
        var wsOptions = WebSocketClientOptions()
        wsOptions.tlsPinSHA256 = endpoint.tlsFingerprint
        wsOptions.allowInsecureRemote = endpoint.allowInsecure
        wsOptions.maxMessageBytes = options.maxMessageBytes
        wsOptions.pingInterval = .seconds(options.pingIntervalSeconds)
        let client: WebSocketClient
        do {
            client = try WebSocketClient(url: url, options: wsOptions) { [inbox] event, _ in
                inbox?.yield(.socket(event, generation: gen))
            }
        } catch {
            perform(machine.handle(.socketFailed(message: "\(error)", permanent: true), nowMs: nowMs))
            return
        }
        socket = client
        if status.state != .pairing { setStatus(.connecting, "connecting to \(endpoint.url)") }
        client.connect()
    }

    func teardownSocket() {
        socket = nil
        connectRequestId = nil
    }

    /// The credential for this attempt, in the order of the newest official clients (the Linux
    /// app's `select_auth`, the Rust node host's `ConnectAuth::device_token`):
    /// 1. a setup code not redeemed yet, with no shared token or password → `auth.bootstrapToken`
    ///    (it wins over an old device token; spec §2.6 step 3);
    /// 2. the stored device token of this gateway and role → `auth.deviceToken`, alone: the shared
    ///    secret is not sent beside it, so revoking the device really locks it out;
    /// 3. else the shared token → `auth.token` and/or the password → `auth.password`.
    /// The signature binds `token ?? deviceToken ?? bootstrapToken`, i.e. whichever was sent.
    func resolveAuth() -> (ConnectAuth, usedBootstrap: Bool) {
        let stored = try? store.token(gateway: endpoint.name, role: role.rawValue)
        let auth = Self.auth(role: role, credentials: credentials, storedDeviceToken: stored?.token)
        return (auth, auth.bootstrapToken != nil)
    }

    /// The pure part of `resolveAuth`, for tests.
    public static func auth(role: SessionRole, credentials: GatewayCredentials, storedDeviceToken: String?) -> ConnectAuth {
        var auth = ConnectAuth()
        if role == .node, let bootstrap = credentials.bootstrapToken, credentials.sharedToken == nil, credentials.password == nil {
            auth.bootstrapToken = bootstrap
        } else if let stored = storedDeviceToken, !stored.isEmpty {
            auth.deviceToken = stored
        } else {
            auth.token = credentials.sharedToken
            auth.password = credentials.password
        }
        return auth
    }

    func sendConnect(_ challenge: ConnectChallenge, _ version: SignatureVersion) {
        let (auth, _) = resolveAuth()
        sentAuth = auth
        let isNode = role == .node
        let client = ClientInfo(id: isNode ? "node-host" : options.operatorClientId, displayName: options.displayName,
                                version: options.version, platform: SessionOptions.platform,
                                deviceFamily: SessionOptions.deviceFamily, modelIdentifier: options.modelIdentifier,
                                mode: isNode ? "node" : options.operatorClientMode, instanceId: instanceId)
        let scopes = isNode ? [] : options.operatorScopes
        let payload = DeviceAuthPayload.build(version: version == .v3 ? .v3 : .v2, deviceId: identity.deviceId,
                                              clientId: client.id, clientMode: client.mode, role: role.rawValue,
                                              scopes: scopes, signedAtMs: challenge.ts, token: auth.signatureToken,
                                              nonce: challenge.nonce, platform: client.platform,
                                              deviceFamily: client.deviceFamily)
        let signature: String
        do { signature = try identity.sign(payload) } catch {
            perform(machine.handle(.socketFailed(message: "could not sign the connect request: \(error)", permanent: true), nowMs: nowMs))
            return
        }
        let range = ConnectParams.protocolRange(for: role, protocolFallback: machine.protocolFallback)
        let params = ConnectParams(
            minProtocol: range.lowerBound, maxProtocol: range.upperBound, client: client,
            caps: isNode ? options.caps : nil, commands: isNode ? (commands?.declaredCommands ?? options.commands) : nil,
            permissions: isNode ? options.permissions : nil, role: role.rawValue, scopes: scopes,
            device: DeviceProof(id: identity.deviceId, publicKey: identity.publicKeyBase64URL, signature: signature,
                                signedAt: challenge.ts, nonce: challenge.nonce),
            auth: auth.isEmpty ? nil : auth, locale: options.locale, userAgent: "clawvoice/\(options.version)")
        let id = UUID().uuidString.lowercased()
        connectRequestId = id
        guard let p = try? JSONValue(encoding: params) else { return }
        send(.request(RequestFrame(id: id, method: GatewayMethod.connect, params: p)), generation: generation)
    }

    func connected(_ h: HelloOk) {
        hello = h
        lastSeq = nil
        connectedAtMs = Int64(Date().timeIntervalSince1970 * 1000)
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        if let token = h.auth.deviceToken {
            try? store.saveToken(gateway: endpoint.name, role: role.rawValue, token: token, scopes: h.auth.scopes, nowMs: now)
        }
        if !h.auth.deviceTokens.isEmpty && trustedForHandoff {
            for t in h.auth.deviceTokens where t.role == "node" || t.role == "operator" {
                let scopes = t.role == "node" ? [] : t.scopes.filter {
                    ["operator.admin", "operator.approvals", "operator.questions", "operator.read", "operator.talk.secrets",
                     "operator.write", "operator.talk"].contains($0)
                }
                try? store.saveToken(gateway: endpoint.name, role: t.role, token: t.deviceToken, scopes: scopes, nowMs: now)
            }
        }
        if credentials.bootstrapToken != nil, role == .node, h.auth.deviceToken != nil {
            // Single use and short-lived: keep it no longer than pairing needs it.
            try? store.clearBootstrapToken(gateway: endpoint.name)
            credentials.bootstrapToken = nil
        }
        forgetSharedSecretIfDone()
        log.log(.info, component, "connected (gateway \(h.serverVersion), protocol \(h.protocolVersion), tick \(formatSeconds(Int64(h.tickIntervalMs))))")
        talkResolution = nil
        notice = nil
        guard role == .operator, options.resolveTalkTarget else {
            targetPending = false
            if !options.resolveTalkTarget, let key = h.mainSessionKey { try? store.setMainSessionKey(gateway: endpoint.name, key: key) }
            publishConnected(h)
            return
        }
        // The default Talk target first (issue 26, D2), so "connected" comes with the session
        // turns will name. A gateway without talk.config (or that refuses it) leaves the defaults.
        targetPending = true
        let asks = h.methods.isEmpty || h.methods.contains("talk.config")
        let answer = asks ? try? send("talk.config", params: ["includeSecrets": false], timeoutMs: 5_000) : nil
        let gen = generation
        jobs.append { [self] in  // the talk.config answer arrives after hello-ok is handled; a newer socket's generation drops it
            let config = try? await answer?.value()
            await finishTalkTarget(h, config: config, generation: gen)
        }
    }

    func finishTalkTarget(_ h: HelloOk, config: JSONValue?, generation gen: Int) {
        guard gen == generation, machine.phase == .connected else { return }
        let r = TalkTarget.resolve(talkConfig: config, mainSessionKey: h.mainSessionKey, capabilities: h.capabilities)
        talkResolution = r
        targetPending = false
        switch r {
        case .resolved(let t):
            log.log(.info, component, "Talk target \(t.sessionKey) (from \(t.source.rawValue)\(t.gatewayTakesAgentId ? ", gateway takes agentId" : ""))")
        case .invalid(let why):
            log.log(.warning, component, "Talk target: \(why); turns go to the gateway's main session \(h.mainSessionKey ?? "main")")
        }
        if let key = defaultSessionKey() { try? store.setMainSessionKey(gateway: endpoint.name, key: key) }
        publishConnected(h)
    }

    func publishConnected(_ h: HelloOk) {
        var s = SessionStatus(role: role.rawValue, gateway: endpoint.name, state: .connected,
                              detail: "connected to \(endpoint.url)\(h.protocolVersion == 3 ? " (protocol 3, degraded)" : "")")
        s.serverVersion = h.serverVersion
        s.mainSessionKey = defaultSessionKey()
        s.connectedAtMs = connectedAtMs
        s.protocolVersion = h.protocolVersion
        let limits = SessionLimits.lines(role: role, hello: h, target: talkTarget())
        s.limits = limits.isEmpty ? nil : limits
        publish(s)
    }

    /// Once this role got in with its device token and the other role has one too, the shared
    /// gateway token and password have done their job: they leave SQLite and this session's memory,
    /// unless the user asked to keep them (`gateway.keepSharedSecret`). Proving the device token
    /// first means a failed token can never strand the node without its way back in.
    func forgetSharedSecretIfDone() {
        guard !options.keepSharedSecret, sentAuth.deviceToken != nil,
              credentials.sharedToken != nil || credentials.password != nil else { return }
        let other: SessionRole = role == .node ? .operator : .node
        guard (try? store.token(gateway: endpoint.name, role: other.rawValue)) != nil else { return }
        credentials.sharedToken = nil
        credentials.password = nil
        do {
            if try store.clearSharedSecret(gateway: endpoint.name) {
                log.log(.info, component, "signed in with the device token; the shared gateway secret is no longer stored (set gateway.keepSharedSecret to keep it)")
            }
        } catch {
            log.log(.warning, component, "could not remove the shared gateway secret from the store: \(error)")
        }
    }

    var trustedForHandoff: Bool {
        guard let url = try? WebSocketURL(parsing: endpoint.url) else { return false }
        return url.secure || url.isLoopback || endpoint.allowInsecure
    }

    func pairingRequired(_ req: PairingRequest) {
        let first = status.state != .pairing || status.requestId != req.requestId
        var s = SessionStatus(role: role.rawValue, gateway: endpoint.name, state: .pairing,
                              detail: "waiting for approval on the gateway (\(req.reason ?? "not-paired"))")
        s.requestId = req.requestId
        if let id = req.requestId {
            s.nextStep = "on the gateway host run: openclaw devices approve \(id)"
        } else {
            s.nextStep = "on the gateway host run: openclaw devices list, then openclaw devices approve <requestId>"
        }
        if first {
            log.log(.warning, component, "pairing required (\(req.reason ?? "not-paired")), request \(req.requestId ?? "?"); \(s.nextStep ?? "")")
        }
        publish(s)
    }

    func setStatus(_ state: SessionStatus.State, _ detail: String) {
        var s = SessionStatus(role: role.rawValue, gateway: endpoint.name, state: state, detail: detail)
        if state == .pairing { s.requestId = status.requestId; s.nextStep = status.nextStep }
        publish(s)
    }

    func publish(_ s: SessionStatus) {
        guard s != status else { return }
        status = s
        onStatus(s)
        if settled { releaseWaiters() }
    }

    func failPending() {
        let all = pending
        pending.removeAll()
        deadlines.removeAll()
        for (_, c) in all { c.resolve(.failure(GatewayRequestError.disconnected)) }
    }

    func cancelInvokes() {
        for (_, i) in invokes { i.signal.end(.disconnected); i.stop.finish() }
        invokes.removeAll()
    }

}
