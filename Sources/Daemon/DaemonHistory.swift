// The daemon's side of `clawvoice history` and `clawvoice listen`: refresh a session's history
// in the background, and toggle the ListenPlayer on a message of the cache.

import ClawvoiceCore
import Foundation
import GatewayClient
import GatewayCrypto
import GatewayProtocol
import NodeRuntime
import Store
import Talk

extension NodeDaemon {
    /// The session history and listen use when the request names none: the one Talk is on now
    /// (`clawvoice session use` changes it), else as `HistorySession` decides.
    func historySessionKey(_ explicit: String?) async -> String {
        if let k = explicit, !k.isEmpty { return k }
        if let k = await talk.sessionKey, !k.isEmpty { return k }
        return HistorySession.key(explicit: nil, config: config, store: store, gateway: link.record.name)
    }

    /// `{"cmd":"history-refresh","session":KEY}`: starts a refresh and answers at once.
    func historyRefresh(_ request: JSONValue) async -> JSONValue {
        let key = await historySessionKey(request["session"]?.stringValue)
        let connected = await link.operator.isConnected
        // Answers at once; the refresh outlives the request as a child of the gateway scope's group.
        if connected { currentScope.requestRefresh(sessionKey: key) }
        return ["ok": true, "sessionKey": .string(key), "connected": .bool(connected), "refreshing": .bool(connected)]
    }

    /// `{"cmd":"listen","messageId":ID}` or `{"cmd":"listen","last":true}`: toggles the ListenPlayer.
    func listenJSON(_ request: JSONValue) async -> JSONValue {
        let key = await historySessionKey(request["session"]?.stringValue)
        let message: CachedMessage
        if let id = request["messageId"]?.stringValue, !id.isEmpty {
            guard let hit = await transcripts.findMessage(id: id, sessionKey: key) else {
                return ["ok": false, "error": .string("no message '\(id)' in the history of \(key) (see `clawvoice history --ids`)")]
            }
            message = hit.message
        } else {
            guard let last = await transcripts.lastAssistantMessage(sessionKey: key) else {
                return ["ok": false, "error": .string("no assistant message in \(key) yet")]
            }
            message = last
        }
        let id = message.messageId ?? "\(key)#\(message.position)"
        guard !message.text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            return ["ok": false, "error": .string("message \(id) has no text to speak")]
        }
        switch await listen.toggle(messageId: id, text: message.text) {
        case .stopped(let stopped):
            return ["ok": true, "action": "stopped", "messageId": .string(stopped)]
        case .speaking(let started, let replaced):
            return ["ok": true, "action": "speaking", "messageId": .string(started), "chars": .number(Double(message.text.count)),
                    "replaced": replaced.map { .string($0) } ?? .null, "sessionKey": .string(key)]
        }
    }
}
