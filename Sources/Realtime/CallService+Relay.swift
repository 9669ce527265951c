// The gateway relay's media for CallService (§2.4; talk-and-voice.md §2.2): talk.session.create
// {mode realtime, transport gateway-relay, brain agent-consult, sessionKey}, the microphone as
// PCM16 24 kHz through talk.session.appendAudio (integer ms timestamps, at most 4 in flight: a
// saturated link drops frames rather than queue them), the relay's `audio` events back to 16 kHz
// for the speaker, its `close` event as the end of the call. Barge-in (D8): talking over the
// relay's answer (≥ 60 ms at -22 dBFS or more, once 250 ms of it played, 900 ms after the last)
// sends talk.session.cancelOutput with that answer's turnId, flushes the speaker and drops the
// turn's later audio. The microphone is echo-cancelled upstream against the call's own audio.

public import ClawvoiceCore
import Foundation
public import GatewayProtocol

extension CallService {
    func openRelay(_ id: String, _ target: CallMachine.Target) {
        spawn { [edges] in
            do {
                let r = try await edges.request("talk.session.create", CallRelay.createParams(target))
                guard let sid = r["sessionId"]?.stringValue ?? r["relaySessionId"]?.stringValue, !sid.isEmpty else {
                    throw CallMachine.Failure(code: "INVALID_RESULT", message: "talk.session.create returned no sessionId")
                }
                let audio = r["audio"]
                if let enc = audio?["inputEncoding"]?.stringValue, enc != "pcm16" || audio?["inputSampleRateHz"]?.intValue != 24_000 {
                    throw CallMachine.Failure(code: "INVALID_RESULT", message: "the relay asks for \(enc) at \(audio?["inputSampleRateHz"]?.intValue ?? 0) Hz, not PCM16 at 24 kHz")
                }
                await self.handle(.relayCreated(callId: id, .success(sid)))
            } catch {
                await self.handle(.relayCreated(callId: id, .failure(Self.failure(error))))
            }
        }
    }

    /// One capture frame into the relay, unless 4 appends are still unanswered.
    func relaySend(_ r: (callId: String, sessionId: String), _ pcm: [Int16]) {
        watchForBargeIn(r, pcm)
        guard relayInFlight < 4 else {
            relayDropped += 1
            if relayDropped == 1 || relayDropped % 50 == 0 { edges.log("call \(r.callId): relay saturated, \(relayDropped) frames dropped") }
            return
        }
        relayInFlight += 1
        let pcm24 = CallRelay.resample(pcm, from: sampleRate, to: 24_000)
        let bytes = pcm24.withUnsafeBufferPointer { Data(buffer: $0) }
        let params: JSONValue = ["sessionId": .string(r.sessionId), "audioBase64": .string(bytes.base64EncodedString()),
                                 "timestamp": .number(Double(nowMs))]
        spawn { [edges] in
            _ = try? await edges.request("talk.session.appendAudio", params)
            await self.appendAnswered()
        }
    }

    private func appendAnswered() { relayInFlight -= 1 }

    /// A relay event for the live call: audio to the speaker, `close` ends the call. True when it was one.
    func relayEvent(_ payload: JSONValue?) -> Bool {
        guard let p = payload, let sid = p["relaySessionId"]?.stringValue, let r = relay, r.sessionId == sid else { return false }
        switch p["type"]?.stringValue ?? p["talkEvent"]?["type"]?.stringValue {
        case "audio":
            guard let b64 = p["audioBase64"]?.stringValue, let data = Data(base64Encoded: b64) else { return true }
            let turn = p["talkEvent"]?["turnId"]?.stringValue ?? p["turnId"]?.stringValue
            if let turn, cancelledTurns.contains(turn) { return true }  // the fence: a cancelled turn stays silent
            if relayTurn != turn || nowMs - relayLastAudioMs > 500 { relayTurnStartMs = nowMs }
            relayTurn = turn
            relayLastAudioMs = nowMs
            let pcm24 = data.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
            received(r.callId, CallRelay.resample(pcm24, from: 24_000, to: sampleRate))
        case "close":
            handle(.talkEvent(CallTalkEvent(voiceSessionId: sid, type: "session.closed")))
        default: break
        }
        return true
    }
}

extension CallService {
    /// Talking over the relay's answer cancels it by its turnId.
    func watchForBargeIn(_ r: (callId: String, sessionId: String), _ pcm: [Int16]) {
        let now = nowMs
        let playing = relayTurn != nil && now - relayLastAudioMs < 200
        guard playing, now - relayTurnStartMs >= 250, now - lastBargeInMs >= 900, !pcm.isEmpty else { relayLoudMs = 0; return }
        let energy = pcm.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(pcm.count)
        guard energy >= 2_621.0 * 2_621.0 else { relayLoudMs = 0; return }  // RMS 0.08 of full scale, as the iOS relay client
        relayLoudMs += pcm.count * 1000 / sampleRate
        guard relayLoudMs >= 60, let turn = relayTurn else { return }
        relayLoudMs = 0
        lastBargeInMs = now
        cancelledTurns.insert(turn)
        relayTurn = nil
        status.bargeIns += 1
        edges.flushPlayback()
        edges.log("call \(r.callId): barge-in, cancelling the relay's turn \(turn)")
        let params: JSONValue = ["sessionId": .string(r.sessionId), "turnId": .string(turn), "reason": "barge-in"]
        spawn { [edges] in
            do {
                let result = try await edges.request("talk.session.cancelOutput", params)
                edges.log("call \(r.callId): cancelOutput \(turn): \(result["status"]?.stringValue ?? "?")")
            } catch { edges.log("call \(r.callId): cancelOutput \(turn) failed: \(error)") }
        }
    }
}

/// The relay's wire values and its one format conversion.
public enum CallRelay {
    public static func createParams(_ t: CallMachine.Target) -> JSONValue {
        var o: [String: JSONValue] = ["mode": "realtime", "transport": "gateway-relay", "brain": "agent-consult",
                                      "sessionKey": .string(t.sessionKey)]
        if let a = t.agentId { o["agentId"] = .string(a) }
        return .object(o)
    }

    /// Linear interpolation between rates (16 ↔ 24 kHz for speech; chunk edges are not carried over).
    public static func resample(_ x: [Int16], from: Int, to: Int) -> [Int16] {
        guard from != to, x.count > 1 else { return x }
        let n = x.count * to / from
        let step = Double(from) / Double(to)
        return (0..<n).map { i in
            let t = Double(i) * step
            let j = min(Int(t), x.count - 2)
            let f = t - Double(j)
            return Int16(clamping: Int((1 - f) * Double(x[j]) + f * Double(x[j + 1])))
        }
    }
}
