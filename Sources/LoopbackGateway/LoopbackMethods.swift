// The loopback gateway's methods after hello: role and scope gates, node.invoke.result,
// node.event, the echo agent behind chat.send, chat.history, voicewake, node.list.

import Foundation
import GatewayProtocol

extension LoopbackGateway {
    static let nodeMethods: Set<String> = ["node.invoke.result", "node.event", "skills.bins"]
    static let methods = ["node.invoke.result", "node.event", "chat.send", "chat.history", "chat.abort", "voicewake.get",
                          "voicewake.set", "voicewake.routing.get", "voicewake.routing.set", "node.list", "gateway.identity.get"]

    /// The scope each operator method needs; write implies read and talk.
    static func requiredScope(_ method: String) -> String? {
        switch method {
        case "chat.send", "chat.abort", "voicewake.set", "voicewake.routing.set", "node.invoke", "tts.speak": return "operator.write"
        case "talk.speak", "talk.session.create", "talk.session.appendAudio", "talk.session.close",
             "talk.client.create", "talk.client.close", "talk.session.cancelOutput": return "operator.talk"
        case "talk.catalog", "chat.history", "voicewake.get", "voicewake.routing.get", "node.list", "gateway.identity.get", "talk.config": return "operator.read"
        default: return nil
        }
    }

    static func hasScope(_ scopes: [String], _ needed: String) -> Bool {
        scopes.contains(needed) || scopes.contains("operator.admin")
            || (scopes.contains("operator.write") && (needed == "operator.read" || needed == "operator.talk"))
    }

    func method(_ req: RequestFrame, _ conn: Connection) {
        let role = conn.role ?? ""
        if Self.nodeMethods.contains(req.method) != (role == "node") {
            fail(req.id, ErrorShape(code: "INVALID_REQUEST", message: "unauthorized role: \(role)"), to: conn.id)
            return
        }
        if role == "operator", let needed = Self.requiredScope(req.method), !Self.hasScope(conn.scopes, needed) {
            fail(req.id, ErrorShape(code: "FORBIDDEN", message: "missing scope: \(needed)",
                                    details: ["code": "MISSING_SCOPE", "missingScope": .string(needed), "requiredScopes": [.string(needed)]]), to: conn.id)
            return
        }
        let p = req.params ?? .object([:])
        if realtimeRelayMethod(req, p, conn) || talkMethod(req, p, conn) || callMethod(req, p, conn) { return }
        switch req.method {
        case "node.invoke.result":
            invokeResult(req, p, conn)
        case "node.event":
            nodeEvent(req, p, conn)
        case "chat.send":
            chatSend(req, p, conn)
        case "chat.history":
            // Canonicalised like chat.send, so "main" reads the history "main" wrote to.
            let key = canonicalKey(p["sessionKey"]?.stringValue ?? configuration.mainSessionKey)
            let limit = Int(p["limit"]?.intValue ?? 200)
            reply(req.id, ["sessionKey": .string(key), "messages": .array(Array((history[key] ?? []).suffix(limit)))], to: conn.id)
        case "voicewake.get":
            reply(req.id, VoiceWakeTriggers(triggers: triggers).payload, to: conn.id)
        case "voicewake.set":
            let list = (p["triggers"]?.arrayValue ?? []).compactMap(\.stringValue)
                .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            setTriggers(list.isEmpty ? VoiceWakeTriggers.defaults : Array(list.prefix(32)))
            reply(req.id, VoiceWakeTriggers(triggers: triggers).payload, to: conn.id)
        case "voicewake.routing.get":
            reply(req.id, wakeRoutingPayload, to: conn.id)
        case "voicewake.routing.set":
            // {config:{routes:[…]}} or {routes:[…]}; each route needs a trigger and one target form.
            let routes = (p["config"]?["routes"] ?? p["routes"])?.arrayValue ?? []
            for r in routes {
                let t = r["target"]
                let forms = [t?["sessionKey"]?.stringValue != nil, t?["agentId"]?.stringValue != nil, t?["mode"]?.stringValue == "current"]
                guard let trigger = r["trigger"]?.stringValue, !trigger.trimmingCharacters(in: .whitespaces).isEmpty,
                      trigger.utf16.count <= 64, forms.filter({ $0 }).count == 1 else {
                    fail(req.id, ErrorShape(code: "INVALID_REQUEST", message: "invalid voicewake route: \(r)"), to: conn.id)
                    return
                }
            }
            guard routes.count <= 32 else {
                fail(req.id, ErrorShape(code: "INVALID_REQUEST", message: "too many voicewake routes (at most 32)"), to: conn.id)
                return
            }
            setWakeRoutes(routes)
            reply(req.id, wakeRoutingPayload, to: conn.id)
        case "node.list":
            let nodes: [JSONValue] = connections.values.filter { $0.helloDone && $0.role == "node" }.map {
                ["nodeId": .string($0.deviceId ?? ""), "platform": "linux", "connected": true, "paired": true]
            }
            reply(req.id, ["ts": .number(Date().timeIntervalSince1970 * 1000), "nodes": .array(nodes)], to: conn.id)
        case "gateway.identity.get":
            reply(req.id, ["deviceId": "loopback-gateway", "publicKey": ""], to: conn.id)
        case "chat.abort":
            reply(req.id, ["ok": true, "aborted": false], to: conn.id)
        default:
            fail(req.id, ErrorShape(code: "INVALID_REQUEST", message: "unknown method: \(req.method)"), to: conn.id)
        }
    }

    private func invokeResult(_ req: RequestFrame, _ p: JSONValue, _ conn: Connection) {
        guard let result = try? p.decode(NodeInvokeResult.self) else {
            fail(req.id, ErrorShape(code: "INVALID_REQUEST", message: "invalid node.invoke.result params"), to: conn.id)
            return
        }
        let allowed: Set<String> = ["id", "nodeId", "ok", "payload", "payloadJSON", "error"]
        if let extra = p.objectValue?.keys.first(where: { !allowed.contains($0) }) {
            fail(req.id, ErrorShape(code: "INVALID_REQUEST", message: "invalid node.invoke.result params: unexpected property \(extra)"), to: conn.id)
            return
        }
        guard result.nodeId == conn.deviceId else {
            fail(req.id, ErrorShape(code: "INVALID_REQUEST", message: "nodeId mismatch"), to: conn.id)
            return
        }
        if let waiter = takeInvokeWaiter(result.id) {
            waiter.resume(returning: result)
            reply(req.id, ["ok": true], to: conn.id)
        } else {
            reply(req.id, ["ok": true, "ignored": true], to: conn.id)
        }
    }

    private func nodeEvent(_ req: RequestFrame, _ p: JSONValue, _ conn: Connection) {
        guard let event = p["event"]?.stringValue else {
            fail(req.id, ErrorShape(code: "INVALID_REQUEST", message: "invalid node.event params: event required"), to: conn.id)
            return
        }
        let payload = p["payloadJSON"]?.stringValue.flatMap { try? JSONCoding.decode(JSONValue.self, from: Data($0.utf8)) } ?? p["payload"]
        var handled = false
        if event == "chat.subscribe" || event == "chat.unsubscribe", let key = payload?["sessionKey"]?.stringValue {
            subscribe(conn.id, key: canonicalKey(key), on: event == "chat.subscribe")
            handled = true
        }
        reply(req.id, ["ok": true, "event": .string(event), "handled": .bool(handled)], to: conn.id)
    }

    func canonicalKey(_ key: String) -> String {
        key.lowercased() == "main" ? configuration.mainSessionKey : key
    }

    private func chatSend(_ req: RequestFrame, _ p: JSONValue, _ conn: Connection) {
        guard let key = p["sessionKey"]?.stringValue, !key.isEmpty, key.count <= 512,
              let message = p["message"]?.stringValue,
              let idem = p["idempotencyKey"]?.stringValue, !idem.isEmpty else {
            fail(req.id, ErrorShape(code: "INVALID_REQUEST", message: "invalid chat.send params: sessionKey, message and idempotencyKey are required"), to: conn.id)
            return
        }
        let allowed: Set<String> = ["sessionKey", "message", "idempotencyKey", "agentId", "sessionId", "thinking", "deliver",
                                    "attachments", "timeoutMs", "queueMode", "fastMode", "replyToId"]
        if let extra = p.objectValue?.keys.first(where: { !allowed.contains($0) }) {
            fail(req.id, ErrorShape(code: "INVALID_REQUEST", message: "invalid chat.send params: unexpected property \(extra)"), to: conn.id)
            return
        }
        if let previous = chatSeen[idem] {
            // A retry of a turn we already have: same answer, no second message.
            reply(req.id, previous, to: conn.id)
            return
        }
        let sessionKey = canonicalKey(key)
        let runId = idem
        let response: JSONValue = ["runId": .string(runId), "status": "started"]
        chatSeen[idem] = response
        let now = Date().timeIntervalSince1970 * 1000
        appendHistory(sessionKey, ["role": "user", "content": [["type": "text", "text": .string(message)]],
                                   "timestamp": .number(now), "idempotencyKey": .string(idem)])
        reply(req.id, response, to: conn.id)
        let answer = "You said: \(message)"
        // The echo agent streams its answer after chat.send was answered.
        spawn { [delay = configuration.echoDeltaDelayMs] in
            await self.streamEcho(runId: runId, sessionKey: sessionKey, text: answer, delayMs: delay)
        }
    }

    func streamEcho(runId: String, sessionKey: String, text: String, delayMs: Int) async {
        // Words in a few deltas, as a model streams them, then the final snapshot.
        let words = text.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
        let chunk = max(1, words.count / 3)
        var sent = ""
        var seq: Int64 = 0
        var index = 0
        while index < words.count {
            let piece = words[index..<min(words.count, index + chunk)].joined(separator: " ")
            let delta = sent.isEmpty ? piece : " " + piece
            sent += delta
            index += chunk
            try? await Task.sleep(for: .milliseconds(delayMs))
            // D3: with `.firstOnly` only the run's first text frame carries the snapshot.
            let snapshot = configuration.deltaSnapshots == .every || seq == 0
            chatEvent(ChatEvent(runId: runId, sessionKey: sessionKey, seq: seq, state: .delta, deltaText: delta,
                                messageText: snapshot ? sent : nil))
            seq += 1
        }
        finishedRuns.insert(runId)
        appendHistory(sessionKey, ["role": "assistant", "content": [["type": "text", "text": .string(text)]],
                                   "timestamp": .number(Date().timeIntervalSince1970 * 1000), "runId": .string(runId)])
        chatEvent(ChatEvent(runId: runId, sessionKey: sessionKey, seq: seq, state: .final, messageText: text))
    }

    private func chatEvent(_ e: ChatEvent) {
        for c in connectionList() where c.helloDone {
            if c.role == "operator" && Self.hasScope(c.scopes, "operator.read") {
                emit("chat", e.payload, to: c.id, seq: true)
            } else if c.role == "node" && c.subscriptions.contains(e.sessionKey) {
                emit("chat", e.payload, to: c.id, seq: false)
            }
        }
    }
}
