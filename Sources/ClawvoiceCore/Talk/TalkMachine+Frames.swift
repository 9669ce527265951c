// TalkMachine: microphone frames (the capture's endpointer, the loudspeaker gate, barge-in, the
// stop word), mute, and the wake word heard. Pure, like the rest of TalkMachine.

import Foundation
import GatewayProtocol

extension TalkMachine {
    // MARK: frames

    mutating func frame_(_ frame: PCMBuffer, speaker: SpeakerState, voice: Double?, nowMs: Int64, out: inout [Action]) {
        // Muted: nothing hears the frame (no capture, pre-roll, wake or barge-in).
        speakingNow = false
        heardSpeaker = speaker
        // During a call the microphone belongs to the call: no capture, wake or barge-in here.
        if muted || call != nil { return }
        switch phase {
        case .capturing(var c):
            // On a loudspeaker the wake chime reaches the microphone: the endpointer hears silence instead.
            // (So does the reply's tail before a follow-up.)
            let unsolicited: Bool
            switch c.kind { case .wake, .followUp: unsolicited = true; default: unsolicited = false }
            let chimeAudible = unsolicited && !settings.headset && !settings.echoCancelled && speaker.audible(tailMs: settings.speakerTailMs)
            let heard = chimeAudible ? PCMBuffer(format: frame.format, samples: [Int16](repeating: 0, count: frame.samples.count)) : frame
            var event = c.endpointer.feed(heard, voice: chimeAudible ? voice.map { _ in 0 } : voice)
            if case .wake = c.kind, event == nil, !c.endpointer.speechHeard,
               c.endpointer.elapsedMilliseconds >= Double(settings.wakeTriggerOnlyMs) {
                event = .endOfUtterance(reason: .silence)  // only the trigger was heard
            }
            phase = .capturing(c)
            out.append(.appendFrame(id: c.id, frame))
            if case .followUp = c.kind, !c.endpointer.speechHeard,
               c.endpointer.elapsedMilliseconds >= Double(settings.followUpMs) {
                discard(c, reason: "follow-up: nothing was said", out: &out)  // no turn, no answer
                return
            }
            if case .endOfUtterance(let reason)? = event, !c.kind.isHold || reason == .maxDuration {
                // `once` and wake end on silence after speech; a held capture only at its hard cap.
                end(c, reason: "\(reason)", out: &out)
            }
        case .ending, .delivering:
            out.append(.listen(frame, wake: false))  // pre-roll only: no wake until the turn is out
        case .idle:
            let clean = settings.headset || settings.echoCancelled
            let audible = speaker.audible(tailMs: clean ? 0 : settings.speakerTailMs)
            if audible {
                if clean {
                    speakingNow = true
                    if settings.stopWordEnabled { out.append(.listenForStop(frame)) }
                    if settings.interruptOnSpeech { bargeIn(frame, speaker: speaker, nowMs: nowMs, out: &out) }
                } else {
                    // Loudspeaker: the microphone hears the assistant; keep that out of pre-roll and wake.
                    gatedFrames += 1
                    return
                }
            } else {
                bargeVoiceMs = 0
            }
            let listens = wakeListens(speaking: audible, nowMs: nowMs)
            // Relief while the node speaks and for the echo's tail after: a trigger begun over
            // the reply and finished after a barge-in stopped it is still one word.
            let over = listens && settings.wakeReliefOverSpeech > 0 && settings.echoCancelled && !settings.headset
                && speaker.audible(tailMs: settings.wakeReliefTailMs)
            let afterBargeIn = bargedInAtMs.map { nowMs - $0 <= Int64(settings.wakeReliefTailMs) } ?? false
            let relief = over ? (afterBargeIn ? settings.wakeReliefAfterBargeIn : settings.wakeReliefOverSpeech) : 0
            if relief != wakeRelief { wakeRelief = relief; out.append(.wakeRelief(relief)) }
            out.append(.listen(frame, wake: listens))
        }
    }

    /// Whether a detection of `phrase` is the node's own voice: on an echo-cancelled loudspeaker,
    /// the clip playing (or just played) says it about now (OwnWords). A headset's microphone
    /// does not hear the node.
    mutating func ownWord(_ phrase: String, out: inout [Action]) -> Bool {
        guard settings.echoCancelled, !settings.headset, OwnWords.saying(phrase, speaker: heardSpeaker) else { return false }
        ownWordsIgnored += 1
        out.append(.log(.info, "talk", "heard \"\(phrase)\" while the node itself was saying it: ignored"))
        return true
    }

    /// Whether the wake detector hears this idle frame.
    func wakeListens(speaking: Bool, nowMs: Int64) -> Bool {
        guard settings.wakeEnabled, deferred.isEmpty else { return false }
        if speaking && !((settings.headset || settings.echoCancelled) && settings.interruptOnSpeech) { return false }
        if let t = lastWakeSendAtMs, nowMs - t < settings.wakeDebounceMs { return false }
        return true
    }

    /// Sustained voice while the assistant speaks into a headset stops it, and the next prompt says where.
    mutating func bargeIn(_ frame: PCMBuffer, speaker: SpeakerState, nowMs: Int64, out: inout [Action]) {
        let dbfs = 20 * log10(max(frame.rms, 1e-5))
        let ms = Int(frame.durationMilliseconds.rounded())
        let bar = settings.headset ? settings.bargeInLevelDbfs : settings.echoBargeInLevelDbfs
        let settlingNow = speaker.playing && (speaker.msIntoClip.map { $0 < settings.echoSettleMs } ?? false)
        let began = bargeVoiceMs == 0
        bargeVoiceMs = dbfs >= bar ? bargeVoiceMs + ms : max(0, bargeVoiceMs - ms)
        if began { bargeRunSettling = bargeVoiceMs > 0 && settlingNow }
        let settling = settlingNow || bargeRunSettling
        let needed = settings.headset ? settings.bargeInMs : (settling ? settings.echoSettleBargeInMs : settings.echoBargeInMs)
        guard bargeVoiceMs >= needed else { return }
        bargeVoiceMs = 0
        bargeIns += 1
        bargedInAtMs = nowMs
        speakingNow = false
        stopSpeaking(reason: nil, measure: true, out: &out)
    }

    /// A barge-in's effect (also `clawvoice stop`): the replies being followed are closed, the
    /// speaker stops, and, when it was playing, the next prompt says where it was cut.
    /// A capture in progress is left alone.
    mutating func stopSpeaking(reason: String?, measure: Bool, out: inout [Action]) {
        generation += 1
        if measure { out.append(.measureBargeIn) }
        out.append(contentsOf: closeAllReplies())
        out.append(.stopSpeech)
        if let reason { out.append(.log(.info, "talk", "\(reason): speech stopped")) }
    }

    mutating func setMuted(_ on: Bool, announce: Bool, out: inout [Action]) {
        guard on != muted else { return }
        muted = on
        if on {
            // The capture in progress and the commands waiting for the microphone end now.
            switch phase {
            case .capturing(let c), .ending(let c): discard(c, reason: "cancelled: muted", out: &out)
            case .delivering, .idle: break  // a turn being queued finishes (see interrupt)
            }
            for d in deferred { out.append(.answer(token: d.token, .failed(.muted))) }
            deferred.removeAll()
            bargeVoiceMs = 0
            out.append(.clearPreRoll)
            out.append(.resetWake)
        }
        out.append(.mutedChanged(on, announce: announce))
        // Its sound is a cue like the others: the speaker sub-state records it, the loop plays it.
        if announce { out.append(.cue(on ? .mute : .unmute)) }
        out.append(.log(.info, "talk", on ? "muted: microphone and wake word off" : "unmuted"))
    }

    mutating func closeAllReplies() -> [Action] {
        let runs = replies.keys.sorted()
        replies.removeAll()
        return runs.map { .closeReply(runId: $0) }
    }

    // MARK: wake

    mutating func wake_(phrase: String, triggers: [String], routed: String?, freshId: String, nowMs: Int64, out: inout [Action]) {
        guard isIdle, deferred.isEmpty, !muted, call == nil else {
            out.append(.wakeOutcome("busy"))
            return
        }
        if ownWord(phrase, out: &out) { out.append(.wakeOutcome("ignored: the node was saying it")); return }
        if callWakeStarts(phrase: phrase, out: &out) { return }
        if let e = notReady() {
            out.append(.cue(.error))
            out.append(.wakeOutcome("failed: \(e)"))
            out.append(.resetWake)
            out.append(.log(.warning, "wake", "no capture after \"\(phrase)\": \(e)"))
            return
        }
        out.append(.wakeOutcome("capturing"))
        open(id: freshId, kind: .wake(phrase: phrase, triggers: triggers), session: routed ?? currentSession,
             nowMs: nowMs, leading: .wakeLookback, out: &out)
        out.append(.playChime)
    }
}
