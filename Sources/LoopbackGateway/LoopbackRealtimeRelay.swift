// The loopback gateway's realtime relay (issue 23; talk-and-voice.md §2, protocol-drift-2026-12b.md
// §2.4, D8): talk.session.create {mode realtime, transport gateway-relay, brain agent-consult},
// PCM16 24 kHz in through talk.session.appendAudio, and speech answered with speech: each
// utterance it hears (voice ≥ 200 ms, then 400 ms quiet) comes back as `talk.event` audio in
// 20 ms frames (960 bytes), paced in real time, under one turnId; talk.session.cancelOutput by
// turnId stops it (applied, stale, idle); talk.session.close ends the session.

import Foundation
import GatewayProtocol
import WebSocketTransport

extension LoopbackGateway {
    /// One realtime relay session as the gateway saw it.
    public struct RealtimeRelayRecord: Sendable {
        public var sessionId: String
        public var sessionKey: String
        public var heardMs = 0
        public var heardVoiceMs = 0
        public var playedMs = 0
        public var utterances = 0
        public var cancels: [String] = []
        /// Per answered utterance: its last voiced append heard → the answer's first `audio` event
        /// sent (the relay's own share of a reply, its 400 ms endpoint included; clawvoice-bench).
        public var replyGapsMs: [Double] = []
        var lastVoiceAt: ContinuousClock.Instant?
        public var closed = false
        var owner: ConnectionID
        var voiceMs = 0
        var quietMs = 0
        var utterance: [Int16] = []
        var turn = 0
        /// The turn whose audio is going out now (nil: none).
        var speakingTurn: String?
    }

    public var realtimeRelayRecords: [RealtimeRelayRecord] { realtimeRelayOrder.compactMap { realtimeRelays[$0] } }

    /// Realtime relay requests; false when the method or session is not this relay's.
    func realtimeRelayMethod(_ req: RequestFrame, _ p: JSONValue, _ conn: Connection) -> Bool {
        guard configuration.realtimeRelay else { return false }
        switch req.method {
        case "talk.session.create":
            guard p["mode"]?.stringValue == "realtime" else { return false }
            if let e = schemaRefusal(req.method, p) ?? ownerRefusal(p) { fail(req.id, e, to: conn.id); return true }
            guard p["transport"]?.stringValue == "gateway-relay", p["brain"]?.stringValue == "agent-consult" else {
                fail(req.id, ErrorShape(code: "INVALID_REQUEST", message: "realtime requires transport gateway-relay and brain agent-consult"), to: conn.id)
                return true
            }
            let key = p["sessionKey"]?.stringValue ?? configuration.mainSessionKey
            let id = "rt-" + String(UUID().uuidString.prefix(8)).lowercased()
            realtimeRelays[id] = RealtimeRelayRecord(sessionId: id, sessionKey: key, owner: conn.id)
            realtimeRelayOrder.append(id)
            reply(req.id, ["sessionId": .string(id), "relaySessionId": .string(id), "mode": "realtime", "transport": "gateway-relay",
                           "brain": "agent-consult", "provider": "loopback",
                           "audio": ["inputEncoding": "pcm16", "inputSampleRateHz": 24_000, "outputEncoding": "pcm16", "outputSampleRateHz": 24_000],
                           "expiresAt": .number(Date().timeIntervalSince1970 + 1800)], to: conn.id)
            relayEvent(id, "ready", [:])
        case "talk.session.appendAudio", "talk.session.close", "talk.session.cancelOutput":
            guard let id = p["sessionId"]?.stringValue, var r = realtimeRelays[id] else { return false }
            guard !r.closed else { fail(req.id, ErrorShape(code: "INVALID_REQUEST", message: "unknown or closed talk session"), to: conn.id); return true }
            switch req.method {
            case "talk.session.close":
                r.closed = true
                r.speakingTurn = nil
                realtimeRelays[id] = r
                reply(req.id, ["ok": true], to: conn.id)
            case "talk.session.cancelOutput":
                let turn = p["turnId"]?.stringValue
                r.cancels.append(turn ?? "")
                let status: String
                if let speaking = r.speakingTurn { status = turn == nil || turn == speaking ? "applied" : "stale" } else { status = "idle" }
                if status == "applied" { r.speakingTurn = nil }
                realtimeRelays[id] = r
                reply(req.id, ["ok": true, "status": .string(status)], to: conn.id)
            default:
                guard let b64 = p["audioBase64"]?.stringValue, let data = Data(base64Encoded: b64), data.count % 2 == 0 else {
                    fail(req.id, ErrorShape(code: "INVALID_REQUEST", message: "audioBase64 missing or not PCM16"), to: conn.id)
                    return true
                }
                if let t = p["timestamp"], t.intValue == nil {
                    fail(req.id, ErrorShape(code: "INVALID_REQUEST", message: "timestamp must be an integer number of milliseconds"), to: conn.id)
                    return true
                }
                reply(req.id, ["ok": true], to: conn.id)
                hear(id, data.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) })
            }
        default:
            return false
        }
        return true
    }

    /// Counts what it hears; an utterance, once it ends, is played back as the next turn.
    private func hear(_ id: String, _ pcm: [Int16]) {
        guard var r = realtimeRelays[id], !pcm.isEmpty else { return }
        let ms = pcm.count / 24
        r.heardMs += ms
        let energy = pcm.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(pcm.count)
        if energy > 327.68 * 327.68 {
            r.heardVoiceMs += ms
            r.lastVoiceAt = .now
            r.voiceMs += ms
            r.quietMs = 0
            r.utterance += pcm
        } else if r.voiceMs >= 200 {
            r.quietMs += ms
            if r.quietMs >= 400 {
                r.utterances += 1
                r.turn += 1
                let turn = "turn-\(r.turn)"
                r.speakingTurn = turn
                let audio = r.utterance, since = r.lastVoiceAt
                r.voiceMs = 0; r.quietMs = 0; r.utterance = []
                realtimeRelays[id] = r
                spawn { await self.speak(id, turn: turn, audio, since: since) }
                return
            }
        } else {
            r.voiceMs = 0
            r.utterance = []
        }
        realtimeRelays[id] = r
    }

    /// 20 ms frames of 960 bytes, in real time, while the turn still owns the output.
    private func speak(_ id: String, turn: String, _ audio: [Int16], since: ContinuousClock.Instant?) async {
        relayEvent(id, "audioStarted", [:], turnId: turn)
        let clock = ContinuousClock()
        var next = clock.now
        for start in stride(from: 0, to: audio.count, by: 480) {
            guard let r = realtimeRelays[id], !r.closed, r.speakingTurn == turn else { return }
            let frame = Array(audio[start..<min(start + 480, audio.count)])
            let bytes = frame.withUnsafeBufferPointer { Data(buffer: $0) }
            relayEvent(id, "audio", ["audioBase64": .string(bytes.base64EncodedString())], turnId: turn)
            if start == 0, let since {
                let gap = ContinuousClock.now - since
                realtimeRelays[id]?.replyGapsMs.append(Double(gap.components.seconds) * 1000 + Double(gap.components.attoseconds) / 1e15)
            }
            realtimeRelays[id]?.playedMs += 20
            next += .milliseconds(20)
            try? await Task.sleep(until: next)
        }
        if realtimeRelays[id]?.speakingTurn == turn { realtimeRelays[id]?.speakingTurn = nil }
        relayEvent(id, "audioDone", ["status": "completed"], turnId: turn)
    }

    /// The gateway ends a relay session itself (`close`).
    public func closeRealtimeRelayFromGateway(sessionId: String) {
        guard realtimeRelays[sessionId] != nil else { return }
        relayEvent(sessionId, "close", ["reason": "gateway"])
        realtimeRelays[sessionId]?.closed = true
    }

    /// A relay event on `talk.event` to the session's owner: the payload type, `relaySessionId`,
    /// and the `talkEvent` envelope with the turn.
    private func relayEvent(_ id: String, _ type: String, _ fields: [String: JSONValue], turnId: String? = nil) {
        guard let r = realtimeRelays[id] else { return }
        var payload = fields
        payload["type"] = .string(type)
        payload["relaySessionId"] = .string(id)
        var envelope: [String: JSONValue] = ["id": .string(UUID().uuidString.lowercased()), "type": .string(type), "sessionId": .string(id),
                                             "seq": 0, "mode": "realtime", "transport": "gateway-relay", "brain": "agent-consult"]
        if let turnId { envelope["turnId"] = .string(turnId) }
        payload["talkEvent"] = .object(envelope)
        emit("talk.event", .object(payload), to: r.owner, seq: true)
    }
}
