// TalkMachine: the push-to-talk commands (start, stop, cancel, once), the commands that wait for
// the microphone or the operator session, and what a cancel means while the turn is being
// delivered. Pure, like the rest of TalkMachine.

import Foundation
import GatewayProtocol

extension TalkMachine {
    // MARK: commands

    mutating func command_(_ command: Command, token: Int, freshId: String, session: String?, nowMs: Int64, out: inout [Action]) {
        if refusedInCall(command, token: token, freshId: freshId, out: &out) { return }
        switch command {
        case .start:
            switch phase {
            case .capturing(let c), .ending(let c), .delivering(let c, _):
                out.append(.answer(token: token, .captureId(c.id)))
            case .idle:
                if muted {
                    out.append(.answer(token: token, .failed(.muted)))
                } else if deferred.contains(where: { $0.command == .start || $0.command == .once }) {
                    out.append(.answer(token: token, .failed(.alreadyStarting)))
                } else {
                    begin(.start, token: token, freshId: freshId, session: session, nowMs: nowMs, out: &out)
                }
            }
        case .once:
            switch phase {
            case .capturing(let c), .ending(let c), .delivering(let c, _):
                out.append(.answer(token: token, .result(PTTResult(captureId: c.id, status: .busy))))
            case .idle:
                if muted {
                    out.append(.answer(token: token, .failed(.muted)))
                } else if let d = deferred.first(where: { $0.command == .start || $0.command == .once }) {
                    out.append(.answer(token: token, .result(PTTResult(captureId: d.freshId, status: .busy))))
                } else {
                    begin(.once, token: token, freshId: freshId, session: session, nowMs: nowMs, out: &out)
                }
            }
        case .stop:
            switch phase {
            case .idle:
                // Stopped before it could start: nothing was captured.
                endDeferred(token: token, freshId: freshId, status: .empty, out: &out)
            case .capturing(let c):
                waiters[c.id, default: []].append(token)
                end(c, reason: "stop", out: &out)
            case .ending(let c), .delivering(let c, _):
                waiters[c.id, default: []].append(token)
            }
        case .cancel:
            switch phase {
            case .idle:
                endDeferred(token: token, freshId: freshId, status: .cancelled, out: &out)
            case .capturing(let c), .ending(let c):
                discard(c, reason: "cancelled", out: &out)
                out.append(.answer(token: token, .result(PTTResult(captureId: c.id, status: .cancelled))))
            case .delivering(let c, let d):
                // The answer waits for the outbox: `cancelled` only if the turn really stays unsent.
                waiters[c.id, default: []].append(token)
                withdraw(c, d, reason: "cancelled", out: &out)
            }
        }
    }

    // MARK: cancellation while delivering

    /// The gateway gave up on a command. One still waiting for its parts ends unstarted; one
    /// waiting for a turn cancels that turn if no other command waits for it too (then it
    /// keeps waiting, and gets the turn's real result). An already answered one changes nothing.
    mutating func invokeEnded(token: Int, _ why: InvokeEnd, out: inout [Action]) {
        let reason = why == .disconnected ? "the node's gateway connection was lost" : "the gateway's invoke \(why.rawValue)"
        if let i = deferred.firstIndex(where: { $0.token == token }) {
            let d = deferred.remove(at: i)
            out.append(.answer(token: token, d.command == .once ? .result(PTTResult(captureId: d.freshId, status: .cancelled))
                                                                 : .failed(PTTError(code: "CANCELLED", message: reason))))
            out.append(.log(.info, "talk", "\(d.command) \(d.freshId) not started: \(reason)"))
            return
        }
        guard let c = phase.capture, waiters[c.id] == [token] else { return }
        switch phase {
        case .capturing, .ending: discard(c, reason: "cancelled: \(reason)", out: &out)
        case .delivering(_, let d): withdraw(c, d, reason: "cancelled: \(reason)", out: &out)
        case .idle: break
        }
    }

    /// A cancel while the turn is being written. The outbox is asked for it back, and the
    /// waiters are answered with what really happened: `cancelled` when it is taken back
    /// (or was never written), `queued` when chat.send already has it. Answering `cancelled`
    /// at once would tell the gateway a turn was dropped that then goes out with its reply spoken.
    mutating func withdraw(_ c: Capture, _ d: Delivery, reason: String, out: inout [Action]) {
        guard !d.withdrawing else { return }
        var d = d
        d.withdrawing = true
        phase = .delivering(c, d)
        out.append(.withdrawTurn(id: c.id, idempotencyKey: d.idempotencyKey))
        out.append(.log(.info, "talk", "capture \(c.id) \(reason) while its turn was being queued: taking it back"))
    }

    mutating func delivered(id: String, _ status: PTTStatus, key: String, nowMs: Int64, out: inout [Action]) {
        guard case .delivering(let c, let d) = phase, c.id == id else {
            // A turn no longer followed here: only its reply needs closing.
            if status != .queued, replies.removeValue(forKey: key) != nil { out.append(.closeReply(runId: key)) }
            if status == .notQueued { out.append(.cue(.error)) }
            return
        }
        if d.withdrawing {
            // Committed: the outbox's answer to withdrawTurn decides.
            if status == .queued { return }
            // Not written (failed, or refused because it was taken back first): nothing went out.
            taken(c, d, out: &out)
            return
        }
        if status == .notQueued {
            if replies.removeValue(forKey: key) != nil { out.append(.closeReply(runId: key)) }
            out.append(.cue(.error))
        }
        if case .wake = c.kind { lastWakeSendAtMs = nowMs }
        // The transcript was recorded with the delivery; resolve with it.
        resolve(id, PTTResult(captureId: id, transcript: d.transcript, status: status), out: &out)
    }

    mutating func withdrawn(id: String, removed: Bool, out: inout [Action]) {
        guard case .delivering(let c, let d) = phase, c.id == id, d.withdrawing else { return }
        if removed {
            taken(c, d, out: &out)
        } else {
            // Too late: chat.send has it. Say so; its reply is followed as any sent turn's.
            out.append(.log(.info, "talk", "capture \(id): the cancel came too late, its turn is already sent"))
            resolve(id, PTTResult(captureId: id, transcript: d.transcript, status: .queued), out: &out)
        }
    }

    /// The turn stays unsent: no reply to follow, every waiter hears `cancelled`.
    mutating func taken(_ c: Capture, _ d: Delivery, out: inout [Action]) {
        if replies.removeValue(forKey: d.idempotencyKey) != nil { out.append(.closeReply(runId: d.idempotencyKey)) }
        out.append(.log(.info, "talk", "capture \(c.id) cancelled: its turn was not sent"))
        resolve(c.id, PTTResult(captureId: c.id, status: .cancelled), out: &out)
    }

    /// A stop or cancel with nothing live: it ends a start that is still waiting for its parts
    /// (both answer with `status`), else it answers `idle` with a fresh id.
    mutating func endDeferred(token: Int, freshId: String, status: PTTStatus, out: inout [Action]) {
        guard let i = deferred.firstIndex(where: { $0.command == .start || $0.command == .once }) else {
            out.append(.answer(token: token, .result(PTTResult(captureId: freshId, status: .idle))))
            return
        }
        let d = deferred.remove(at: i)
        let r = PTTResult(captureId: d.freshId, status: status)
        out.append(.answer(token: d.token, d.command == .start ? .captureId(d.freshId) : .result(r)))
        out.append(.answer(token: token, .result(r)))
    }

    /// Why a capture cannot open now, or nil.
    func notReady() -> PTTError? {
        if !operatorConnected { return .gatewayNotConnected("reconnecting") }
        if case .unavailable(let why) = microphone { return .microphone(why) }
        return nil
    }

    mutating func begin(_ command: Command, token: Int, freshId: String, session: String?, nowMs: Int64, out: inout [Action]) {
        if notReady() != nil {
            // The microphone or the operator session may be a moment behind the node session.
            deferred.append((token, command, freshId, session, nowMs + settings.partsWaitMs))
            return
        }
        let once = command == .once
        // An invoked turn goes to the session the gateway stamped on it; others to the current one.
        open(id: freshId, kind: once ? .once : .hold, session: session ?? currentSession, nowMs: nowMs, leading: .preRoll, out: &out)
        if once { waiters[freshId, default: []].append(token) } else { out.append(.answer(token: token, .captureId(freshId))) }
    }

    mutating func retryDeferred(nowMs: Int64, out: inout [Action]) {
        guard !deferred.isEmpty, notReady() == nil, isIdle else { return }
        let d = deferred.removeFirst()
        begin(d.command, token: d.token, freshId: d.freshId, session: d.session, nowMs: nowMs, out: &out)
    }

    mutating func open(id: String, kind: Kind, session: String?, nowMs: Int64, leading: Leading, out: inout [Action]) {
        let capMs: Int, silenceMs: Int
        switch kind {
        case .hold: (capMs, silenceMs) = (settings.captureMaxMs, settings.silenceTimeoutMs)
        case .once: (capMs, silenceMs) = (settings.onceMaxMs, settings.silenceTimeoutMs)
        case .wake: (capMs, silenceMs) = (settings.wakeMaxCaptureMs, settings.wakeSilenceAfterSpeechMs)
        case .followUp: (capMs, silenceMs) = (settings.onceMaxMs, settings.silenceTimeoutMs)
        }
        var endpointer = Endpointer(silenceTimeoutMs: silenceMs, maxCaptureMs: capMs,
                                    voiceThreshold: settings.voiceDetector == .model ? settings.voiceThreshold : nil)
        if !kind.isHold, settings.voiceDetector == .model { endpointer.turnModel = settings.turnModel }
        let c = Capture(id: id, kind: kind, sessionKey: session, startedAtMs: nowMs, endpointer: endpointer,
                        capAtMs: nowMs + Int64(capMs) + settings.capSlackMs)
        phase = .capturing(c)
        // A new capture silences the assistant; no interruption is recorded (iPhone behaviour).
        out.append(.stopSpeech)
        out.append(.openCapture(id: id, sessionKey: session, leading: leading))
        out.append(.resetWake)
        let what: String
        switch kind {
        case .hold: what = ""
        case .once: what = " (once)"
        case .wake(let phrase, _): what = " (wake: \(phrase))"
        case .followUp: what = " (follow-up)"
        }
        out.append(.log(.info, "talk", "capture \(id) started\(what)"))
    }

    mutating func end(_ c: Capture, reason: String, out: inout [Action]) {
        phase = .ending(c)
        out.append(.finishCapture(id: c.id))
        out.append(.cue(.endOfListening))
        if reason != "stop" { out.append(.log(.info, "talk", "capture \(c.id) ends: \(reason)")) }
    }

    mutating func discard(_ c: Capture, reason: String, out: inout [Action]) {
        // An ending capture's relay result is still on its way: it is ignored when it comes.
        if case .ending = phase { abandoned.insert(c.id) }
        out.append(.cancelCapture(id: c.id))
        if case .wake = c.kind { out.append(.wakeOutcome("cancelled")) }
        phase = .idle
        resolveWaiters(c.id, PTTResult(captureId: c.id, status: .cancelled), out: &out)
        out.append(.log(.info, "talk", "capture \(c.id) \(reason)"))
    }

    mutating func resolve(_ id: String, _ result: PTTResult, out: inout [Action]) {
        if let c = phase.capture, c.id == id, case .wake = c.kind { out.append(.wakeOutcome(result.status.rawValue)) }
        if phase.captureId == id { phase = .idle }
        resolveWaiters(id, result, out: &out)
    }

    mutating func resolveWaiters(_ id: String, _ result: PTTResult, out: inout [Action]) {
        for t in waiters.removeValue(forKey: id) ?? [] { out.append(.answer(token: t, .result(result))) }
    }
}
