// What tests and the demo do to the loopback gateway: approve, revoke and remove devices, make
// setup codes, read what it recorded, make it misbehave (faults, stalls, drops, raw frames),
// invoke node commands and cancel them, and change the wake triggers and routes.

import Foundation
public import GatewayProtocol
import WebSocketTransport

extension LoopbackGateway {
    // MARK: test and demo controls

    public func pendingPairings() -> [PendingPairing] { pending.values.sorted { $0.requestId < $1.requestId } }

    public func approve(_ requestId: String) -> Bool {
        guard let p = pending.removeValue(forKey: requestId), devices[p.deviceId] != nil else { return false }
        devices[p.deviceId]!.roles[p.role] = p.scopes
        log("approved \(p.role) for device \(p.deviceId.prefix(12))… (\(requestId))")
        return true
    }

    public func approveAll() { for id in pending.keys { _ = approve(id) } }

    public func reject(_ requestId: String) { pending.removeValue(forKey: requestId) }

    /// Revokes a device's token for a role: its next connect gets AUTH_DEVICE_TOKEN_MISMATCH.
    public func revokeToken(deviceId: String, role: String) {
        guard let t = devices[deviceId]?.tokens.removeValue(forKey: role) else { return }
        devices[deviceId]!.revoked.insert(t)
    }

    public func isPaired(deviceId: String, role: String) -> Bool { devices[deviceId]?.roles[role] != nil }

    /// A single-use bootstrap token and the setup code that carries it.
    public func makeSetupCode(expiresInMs: Int64 = 600_000) -> String {
        let token = "bt_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        bootstrapTokens.insert(token)
        let payload: JSONValue = ["url": .string(url), "bootstrapToken": .string(token),
                                  "expiresAtMs": .number(Double(Int64(Date().timeIntervalSince1970 * 1000) + expiresInMs))]
        return Base64URL.encode(Array((try? JSONCoding.encode(payload)) ?? Data()))
    }

    /// Requests the node's clients made after hello, in order, optionally of one method.
    public func requests(method: String? = nil) -> [RequestFrame] {
        recorded.map(\.frame).filter { method == nil || $0.method == method }
    }

    public func connectedRoles() -> [String] {
        connections.values.filter(\.helloDone).compactMap(\.role).sorted()
    }

    public func connectionCount() -> Int { connections.count }

    /// Every connect request received, in order (including rejected ones).
    public func connectAttempts() -> [ConnectAttempt] { connectAttemptLog }

    /// Answers the next connects with these errors, one each, before any other check (for the
    /// shapes a real gateway sends that the loopback would not produce by itself).
    public func failNextConnects(with errors: [ErrorShape]) { forcedConnectErrors += errors }

    /// Removes a device altogether (`openclaw devices remove`): its tokens stop working and it is no longer paired.
    public func removeDevice(_ deviceId: String) {
        guard let d = devices.removeValue(forKey: deviceId) else { return }
        for c in connections.values where c.deviceId == deviceId { server?.close(c.id, code: 1008, reason: "device removed") }
        revokedAfterRemoval.formUnion(d.tokens.values)
    }

    /// Answers the next `count` connects with `UNAVAILABLE` "gateway starting" and close 1013.
    public func simulateStartup(connects count: Int, retryAfterMs: Int64) {
        startingConnects = count
        startingRetryAfterMs = retryAfterMs
    }

    /// Makes talk.speak and tts.speak misbehave (or behave again with `.none`).
    public func setAudioFault(_ fault: AudioFault) { audioFault = fault }

    /// The next relay sessions report these texts instead of the audio's length and level.
    public func supplyTranscript(_ text: String) { nextTranscripts.append(text) }

    /// Relay sessions in the order they were created.
    public func relayRecords() -> [RelayRecord] { relayOrder.compactMap { relays[$0] } }
    public func relayRecord(_ id: String) -> RelayRecord? { relays[id] }

    /// Total time the loopback spent on its own work (clips, transcripts), for the bench to subtract.
    public func serviceTimes() -> Double { serviceMs }

    /// Whether the echo agent has sent the `final` event of this run.
    public func isRunFinished(_ runId: String) -> Bool { finishedRuns.contains(runId) }

    /// (method, params) of every talk.speak / tts.speak call.
    public func speakCalls() -> [(String, JSONValue)] { speakRequests }

    /// Stops (or resumes) every frame the gateway would send on its own, as a hung gateway does.
    public func stallTicks(_ stalled: Bool) { ticksStalled = stalled }

    /// Cuts every connection without a close frame.
    public func dropAll() { for id in connections.keys { server?.drop(id) } }

    /// Sends raw text (malformed JSON, unknown frame types, out-of-order responses) to every connection.
    public func sendRaw(_ text: String, role: String? = nil) {
        for c in connections.values where role == nil || c.role == role {
            server?.send(.text(text), to: c.id)
        }
    }

    public func sendRawBinary(_ bytes: [UInt8], role: String? = nil) {
        for c in connections.values where role == nil || c.role == role {
            server?.send(.binary(bytes), to: c.id)
        }
    }

    /// Asks the connected node to run a command and waits for its result.
    /// `sessionKey` picks the top-level key's form (nil: the configured `invokeSessionKey`).
    public func invoke(command: String, paramsJSON: String? = nil, timeoutMs: Int64? = 30_000,
                       deviceId: String? = nil, sessionKey: InvokeSessionKeyForm? = nil,
                       wait: Duration = .seconds(20)) async throws -> NodeInvokeResult {
        guard let node = connections.values.first(where: { $0.helloDone && $0.role == "node" && (deviceId == nil || $0.deviceId == deviceId) }),
              let nodeId = node.deviceId else { throw LoopbackError.noNode }
        let id = UUID().uuidString.lowercased()
        let session: InvokeSessionKey
        switch sessionKey ?? configuration.invokeSessionKey {
        case .mainSession: session = .value(configuration.mainSessionKey)
        case .key(let k): session = .value(k)
        case .null: session = .null
        case .omitted: session = .omitted
        }
        let request = NodeInvokeRequest(id: id, nodeId: nodeId, command: command, paramsJSON: paramsJSON,
                                        timeoutMs: timeoutMs, idempotencyKey: UUID().uuidString, session: session)
        var payload = request.payload
        if paramsJSON == nil, case .object(var o) = payload { o["paramsJSON"] = .null; payload = .object(o) }
        lastInvoke = id
        sendEvent("node.invoke.request", payload, to: node.id, seq: false)
        return try await withCheckedThrowingContinuation { cont in
            invokeWaiters[id] = cont
            spawn { [weak self] in  // the invoke's timeout, as the gateway's own timer
                try? await Task.sleep(for: wait)
                if !Task.isCancelled { await self?.timeoutInvoke(id) }
            }
        }
    }

    /// The id of the most recent invoke sent to a node.
    public func lastInvokeId() -> String? { lastInvoke }

    /// Sends `node.invoke.cancel` with the newest (`invokeId`) or the older (`id`) key.
    public func cancelInvoke(_ id: String, legacyKey: Bool = false) {
        for c in connections.values where c.helloDone && c.role == "node" {
            sendEvent("node.invoke.cancel", legacyKey ? ["id": .string(id), "nodeId": .string(c.deviceId ?? "")]
                                                      : ["invokeId": .string(id), "nodeId": .string(c.deviceId ?? "")], to: c.id, seq: false)
        }
    }

    public func setTriggers(_ list: [String]) {
        triggers = list
        broadcast("voicewake.changed", VoiceWakeTriggers(triggers: list).payload, roles: ["node", "operator"])
    }

    /// Replaces the wake routes (`[{trigger, target:{sessionKey}|{agentId}|{mode:"current"}}]`)
    /// and sends `voicewake.routing.changed` to every node and operator, as voicewake.routing.set does.
    public func setWakeRoutes(_ routes: [JSONValue]) {
        wakeRoutes = Array(routes.prefix(32))
        wakeRoutesUpdatedAtMs = Int64(Date().timeIntervalSince1970 * 1000)
        broadcast("voicewake.routing.changed", wakeRoutingPayload, roles: ["node", "operator"])
    }

    var wakeRoutingPayload: JSONValue {
        ["config": ["version": 1, "defaultTarget": ["mode": "current"], "routes": .array(wakeRoutes),
                    "updatedAtMs": .number(Double(wakeRoutesUpdatedAtMs))]]
    }

    func takeInvokeWaiter(_ id: String) -> CheckedContinuation<NodeInvokeResult, any Error>? {
        invokeWaiters.removeValue(forKey: id)
    }

    func appendHistory(_ key: String, _ message: JSONValue) { history[key, default: []].append(message) }

    func subscribe(_ id: ConnectionID, key: String, on: Bool) {
        if on { connections[id]?.subscriptions.insert(key) } else { connections[id]?.subscriptions.remove(key) }
    }

    func connectionList() -> [Connection] { Array(connections.values) }

    func emit(_ name: String, _ payload: JSONValue, to id: ConnectionID, seq: Bool) { sendEvent(name, payload, to: id, seq: seq) }

    func timeoutInvoke(_ id: String) {
        invokeWaiters.removeValue(forKey: id)?.resume(throwing: LoopbackError.invokeTimedOut)
    }

}
