// TalkMachine: the end of a turn (the relay's result, the delivery, the reply followed),
// session changes and the timers. Pure, like the rest of TalkMachine.

import Foundation
import GatewayProtocol

extension TalkMachine {
    // MARK: results

    mutating func relayFinished(id: String, _ f: Finished, nowMs: Int64, out: inout [Action]) {
        if abandoned.remove(id) != nil { return }
        guard case .ending(let c) = phase, c.id == id else { return }
        switch f.outcome {
        case .transcript(let text?) where !text.isEmpty:
            var message = text
            if case .wake(let phrase, let triggers) = c.kind {
                // The trigger words are not part of the command; too little left is no command.
                message = WakeTranscript.command(from: text, triggers: [phrase] + triggers)
                guard message.count >= settings.wakeMinCommandCharacters else {
                    out.append(.log(.info, "talk", "wake capture \(id): nothing after the trigger in \"\(text)\""))
                    resolve(id, PTTResult(captureId: id, transcript: message, status: .empty), out: &out)
                    return
                }
            }
            deliver(c, message: message, transcript: message, voiceNote: false, nowMs: nowMs, out: &out)
        case .transcript:
            resolve(id, PTTResult(captureId: id, status: .empty), out: &out)
        case .unavailable(let why):
            // No transcription here or at the gateway: the voice note is the whole message.
            guard f.audioMs >= 200, f.hasVoiceNote else {
                resolve(id, PTTResult(captureId: id, status: .empty), out: &out)
                return
            }
            out.append(.log(.info, "talk", "sending capture \(id) as a voice note: \(why)"))
            deliver(c, message: "", transcript: nil, voiceNote: true, nowMs: nowMs, out: &out)
        }
    }

    mutating func deliver(_ c: Capture, message: String, transcript: String?, voiceNote: Bool, nowMs: Int64, out: inout [Action]) {
        var message = message
        if let prefix = pendingInterruption {
            // The iPhone's TalkPromptBuilder: tell the agent where it was cut off.
            message = message.isEmpty ? prefix : prefix + "\n\n" + message
            pendingInterruption = nil
        }
        // The idempotency key doubles as the run id until chat.send names another.
        let key = "turn-" + c.id.lowercased()
        // Follow the run before it is sent: its first deltas may arrive before the acknowledgement.
        follow(runId: key, nowMs: nowMs, out: &out)
        phase = .delivering(c, Delivery(idempotencyKey: key, transcript: transcript))
        out.append(.deliver(id: c.id, message: message, voiceNote: voiceNote, sessionKey: c.sessionKey ?? currentSession,
                            idempotencyKey: key))
    }

    mutating func follow(runId: String, nowMs: Int64, out: inout [Action]) {
        guard settings.speakReplies else { return }
        replies[runId] = nowMs + settings.replyTimeoutMs
        out.append(.followReply(runId: runId))
    }

    // MARK: sessions

    mutating func operator_(connected: Bool, main: String?, nowMs: Int64, out: inout [Action]) {
        defer { wasConnected = connected }
        operatorConnected = connected
        if wasConnected && !connected {
            interrupt(reason: "connection to the gateway lost", out: &out)
            return
        }
        if connected, let key = main {
            if let previous = mainSessionKey, previous != key, chosenSession == nil {
                interrupt(reason: "the gateway's main session changed to \(key)", out: &out)
            }
            mainSessionKey = key
        }
        if connected { retryDeferred(nowMs: nowMs, out: &out) }
    }

    /// A session switch, gateway switch or lost connection: cancel the capture, drop late results, stop speaking.
    mutating func interrupt(reason: String, out: inout [Action]) {
        generation += 1
        switch phase {
        case .capturing(let c), .ending(let c): discard(c, reason: "cancelled: \(reason)", out: &out)
        // A turn being written to the durable outbox is not the capture any more: it finishes
        // (it survives a lost connection by design) and its waiters get its real status. Its
        // reply is closed below with the others.
        case .delivering, .idle: break
        }
        for d in deferred {
            out.append(.answer(token: d.token, .failed(PTTError(code: "CANCELLED", message: reason))))
        }
        deferred.removeAll()
        out.append(contentsOf: closeAllReplies())
        out.append(.stopSpeech)
    }

    // MARK: time

    mutating func tick(nowMs: Int64, out: inout [Action]) {
        if case .capturing(let c) = phase, nowMs >= c.capAtMs {
            end(c, reason: "reached its time cap", out: &out)
        }
        let (due, waiting) = deferred.partitioned { $0.deadlineMs <= nowMs }
        deferred = waiting
        for d in due {
            let e = notReady() ?? .gatewayNotConnected("timed out")
            out.append(.answer(token: d.token, .failed(e)))
        }
        if !due.isEmpty { out.append(.cue(.error)) }
        for (runId, deadline) in replies where deadline <= nowMs {
            replies.removeValue(forKey: runId)
            out.append(.closeReply(runId: runId))
        }
    }
}
