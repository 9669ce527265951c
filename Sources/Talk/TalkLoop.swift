// The talk turn's loop: one inbox, one owner. `TalkController.run()` makes it and runs it; it is
// not Sendable and never leaves that task. Every command, microphone frame, gateway event,
// setting and executor result is an item of the inbox; the loop feeds each to TalkMachine and
// carries out the actions it returns through three executors, each owning one resource: the
// captures (relay uplinks, voice notes, the outbox write), the replies (the speaker) and the ears
// (echo canceller, voice, wake and stop detectors, pre-roll). Work that takes long runs as a child
// task of the loop and posts its result back into the inbox, so nothing races the machine and
// nothing re-enters it while it is suspended.

import Audio
import ClawvoiceCore
import Foundation
import GatewayClient
import GatewayProtocol
import WebSocketTransport

/// Child work of the loop, collected while an item is processed and started after it.
final class TalkJobs {
    private var list: [@Sendable () async -> Void] = []
    func add(_ job: @escaping @Sendable () async -> Void) { list.append(job) }
    func take() -> [@Sendable () async -> Void] {
        defer { list.removeAll() }
        return list
    }
}

final class TalkLoop {
    typealias Item = TalkController.Item

    let handle: TalkController
    let post: AsyncStream<Item>.Continuation
    let channel: any OperatorChannel
    let log: LogSink
    let clock: any TalkClock
    let onSessionChange: (@Sendable (String) -> Void)?
    let onMuteChange: (@Sendable (Bool) -> Void)?
    let jobs = TalkJobs()
    var machine: TalkMachine
    var config: TalkConfig
    let captures: CaptureExecutor
    let replies: ReplyExecutor
    let ears: Ears
    var answers: [Int: CheckedContinuation<TalkMachine.Answer, Never>] = [:]
    var armedAtMs: Int64?
    /// The speaker as the last frame found it (for the microphone's pace).
    var speakerPlaying = false
    /// The microphone's pace as last published.
    var pacing = MicrophonePacing.prompt
    var onEvent: (@Sendable (TalkEvent) -> Void)?
    var onEndCall: (@Sendable (String) -> Void)?
    var onStartCall: (@Sendable (String) -> Void)?
    var onCallFrame: (@Sendable (PCMBuffer) -> Void)?
    /// The last warning logged, for the `error` event of an error cue.
    var lastWarning: String?
    /// Who waits for the speaker (TalkLoop+Speaker.swift): a Listen message's end, by generation;
    /// a notification's, by id; and the route each notification asked for.
    var listenWaiters: [Int: [CheckedContinuation<SpeechReport?, Never>]] = [:]
    var noticeAnswers: [Int: CheckedContinuation<NoticeDelivery?, Never>] = [:]
    var noticeRoutes: [Int: SpeechRoute] = [:]

    init(_ p: TalkController.Parts, handle: TalkController) {
        self.handle = handle
        post = handle.post
        channel = p.channel
        log = p.log
        clock = p.clock
        onSessionChange = p.onSessionChange
        onMuteChange = p.onMuteChange
        config = p.config
        captures = CaptureExecutor(channel: p.channel, log: p.log, outbox: p.outbox, post: handle.post, jobs: jobs)
        replies = ReplyExecutor(speech: p.speech, log: p.log, cues: p.config.cues, post: handle.post, jobs: jobs)
        ears = Ears(config: p.config, echoReference: p.echoReference, log: p.log)
        machine = TalkMachine(settings: TalkController.settings(p.config, wake: nil, echo: ears.echoOn(p.config)),
                              chosenSession: p.config.sessionKey)
        // Idle and with nothing waiting, muting has nothing to end, and no one observes events yet.
        if p.config.startsMuted { _ = machine.handle(.setMuted(true, announce: false), nowMs: 0) }
    }

    /// Runs the inbox until the task is cancelled; executor jobs are its child tasks.
    func run() async {
        if ears.loadVoiceDetector(config) { applySettings() }
        await withDiscardingTaskGroup { group in
            for await item in handle.inbox {
                await process(item)
                for job in jobs.take() { group.addTask(operation: job) }
            }
            group.cancelAll()
        }
        releaseSpeakerWaiters()
        log.log(.debug, "talk", "talk loop ended (cancelled: \(Task.isCancelled))")
    }

    var nowMs: Int64 { clock.nowMs() }

    private func process(_ item: Item) async {
        switch item {
        case .input(let input):
            await step(input)
        case .command(let command, let session, let token, let cont):
            await sampleOperator()
            answers[token] = cont
            await step(.command(command, token: token, freshId: UUID().uuidString, session: session))
        case .frame(let raw, let at, let gap):
            if gap { ears.gap() }
            ears.stopFed = false
            let cleaned = ears.clean(raw, at: at, echo: machine.settings.echoCancelled, config: config)
            if machine.settings.echoCancelled && !ears.echoOn(config) { applySettings() }  // the canceller failed
            let heard = cleaned.uplink
            if machine.callMicrophoneOpen { onCallFrame?(heard) }
            // The machine decides on the uplink's frame; its wake and stop actions for this frame
            // run their heads on the linear path's copy of it (CleanedFrame.detector).
            let capturing: Bool
            if case .capturing = machine.phase { capturing = true } else { capturing = false }
            let voice = ears.voiceProbability(heard, followsGap: gap, muted: machine.muted, capturing: capturing, config: config)
            let speaker = await replies.speakerState()
            speakerPlaying = speaker.playing
            await step(.frame(heard, speaker: speaker, voice: voice), detectorFrame: cleaned.detector)
            ears.endOfFrame()
        case .frames(let frames):
            for f in frames { await process(.frame(f.pcm, at: f.at, followsGap: f.followsGap)) }
        case .event(let event):
            await gatewayEvent(event)
        case .setting(let setting):
            apply(setting)
        case .barrier(let c):
            publish()
            c.resume()
        case .probe(let p):
            p.answer()
        case .stopSpeaking(let c):
            let speaking = await replies.speakerState().playing
            await step(.stopSpeaking(speaking: speaking))
            publish()
            c.resume(returning: speaking)
        case .chime(let c):
            c.resume(returning: ears.chimeSound)
        case .captureDone(let id, let finished, let note, let timing):
            captures.done(id, note: note, audioMs: finished.audioMs)
            handle.published.withLock { $0.lastVoiceNote = note; $0.lastTiming = timing }
            await step(.relayFinished(id: id, finished))
            // A capture's buffers (its PCM, the uplink's pages, the voice note) are freed now: hand
            // the heap's free pages back, or turn after turn the allocator keeps them (issue 25).
            if captures.isEmpty { ProcessMemory.trim() }
        case .replySpoken(let runId, let report):
            await step(.speaker(.ended(.reply(runId: runId), generation: 0)))
            // A reply that spoke nothing is no reply heard: no follow-up after it.
            guard let report else { break }
            handle.published.withLock { $0.lastSpeech = report }
            await step(.replyDone(stopped: report.outcome == .stopped))
        case .speaker(let item):
            await speakerItem(item)
        case .timerFired:
            armedAtMs = nil
            await sampleOperator()
            await step(.tick)
        }
        publish()
    }

    /// The operator session's state as the channel sees it now, fed to the machine when it
    /// differs (the daemon also posts every change; tools and tests may not).
    private func sampleOperator() async {
        let connected = await channel.connected()
        let main = connected ? await channel.mainSessionKey() : nil
        if connected != machine.operatorConnected || (main != nil && main != machine.mainSessionKey) {
            await step(.operatorState(connected: connected, mainSessionKey: main))
        }
    }

    func publish() {
        let m = machine
        let (silence, wake) = (config.silenceTimeoutMs, ears.wakeStatus)
        let pacing = machine.microphonePacing(speakerPlaying: speakerPlaying)
        handle.published.withLock { s in
            switch m.phase {
            case .idle: s.phase = .idle
            case .capturing(let c): s.phase = .capturing(c.id)
            case .ending(let c), .delivering(let c, _): s.phase = .ending(c.id)
            }
            s.sessionKey = m.chosenSession
            s.pendingInterruption = m.pendingInterruption
            s.gatedFrames = m.gatedFrames
            s.bargeIns = m.bargeIns
            s.stopWords = m.stopWords
            s.silenceTimeoutMs = silence
            s.wake = wake
            s.wake?.muted = m.muted
            s.muted = m.muted
            s.pacing = pacing
            if case .listen(let id)? = m.speaker.listen?.what { s.listening = id } else { s.listening = nil }
            s.speaker = m.speaker.now
        }
        // After the snapshot (whose pace the capture thread reads), never under its lock.
        if pacing != self.pacing {
            self.pacing = pacing
            handle.pace(pacing)
        }
    }

    /// Feeds one input to the machine and carries out its actions; a wake detection in a frame
    /// is fed back before the next item, so no frame slips between the detection and its capture.
    /// `detectorFrame`: the linear canceller's copy of a frame input (nil: no echo cancellation),
    /// which that frame's `listen`/`listenForStop` actions hear instead of the uplink's frame.
    func step(_ first: TalkMachine.Input, detectorFrame: PCMBuffer? = nil) async {
        var pending = [first]
        while !pending.isEmpty {
            let input = pending.removeFirst()
            if case .wakeHeard = input { await sampleOperator() }
            let actions = machine.handle(input, nowMs: nowMs)
            replies.machineStepped(speakerGeneration: machine.speaker.generation)
            for action in actions {
                if let follow = await perform(action, detectorFrame: detectorFrame) { pending.append(follow) }
            }
        }
    }

    private func perform(_ action: TalkMachine.Action, detectorFrame: PCMBuffer?) async -> TalkMachine.Input? {
        switch action {
        case .answer(let token, let answer):
            publish()  // first: the caller's next status read must show what its command did
            answers.removeValue(forKey: token)?.resume(returning: answer)
        case .stopSpeech:
            await replies.stopSpeech()
        case .openCapture(let id, let sessionKey, let leading):
            await captures.open(id, sessionKey: sessionKey, leading: ears.leading(leading), config: config)
            var f = ["captureId": id, "trigger": leading == .wakeLookback ? "wake" : "ptt"]
            f["sessionKey"] = sessionKey ?? machine.currentSession
            emit("listeningStarted", f)
        case .appendFrame(let id, let frame):
            ears.wakeHeardLast = false
            await captures.append(id, frame)
        case .finishCapture(let id):
            captures.finish(id, config: config)
            emit("listeningStopped", ["captureId": id, "reason": "ended"])
        case .cancelCapture(let id):
            // A capture already ended (finishCapture) said listeningStopped then.
            if captures.cancel(id) { emit("listeningStopped", ["captureId": id, "reason": "cancelled"]) }
        case .deliver(let id, let message, let voiceNote, let sessionKey, let key):
            captures.deliver(id: id, message: message, voiceNote: voiceNote, sessionKey: sessionKey, idempotencyKey: key)
        case .withdrawTurn(let id, let key):
            captures.withdraw(id: id, idempotencyKey: key)
        case .followReply(let runId):
            let stream = replies.follow(runId)
            handle.published.withLock { $0.lastReply = stream }
        case .feedReply(let runId):
            await replies.feed(runId, emit: emit)
        case .closeReply(let runId):
            await replies.close(runId, emit: emit)
        case .rekeyReply(let from, let to):
            replies.rekey(from, to)
        case .listen(let frame, let listensForWake):
            guard let d = ears.listen(frame, forWake: listensForWake, detectorFrame: detectorFrame) else { break }
            emit("wake", ["phrase": d.phrase, "score": String(format: "%.2f", d.score)])
            return .wakeHeard(phrase: d.phrase, triggers: d.triggers, routedSession: d.routed, freshId: UUID().uuidString)
        case .listenForStop(let frame):
            guard let score = ears.listenForStop(frame, detectorFrame: detectorFrame) else { break }
            emit("stopWord", ["score": String(format: "%.2f", score)])
            return .stopWordHeard
        case .resetWake:
            ears.resetWake()
        case .wakeRelief(let logits):
            ears.wakeRelief(logits)
        case .playChime:
            replies.playChime(ears.wakeChime, generation: machine.speaker.cue?.generation ?? -1)
        case .measureBargeIn:
            return .bargeInPosition(ms: await replies.position(of: handle.published.withLock { $0.lastReply }))
        case .persistSession(let key):
            onSessionChange?(key)
        case .wakeOutcome(let outcome):
            ears.wakeOutcome(outcome)
        case .log(let level, let category, let message):
            log.log(level, category, message)
            if level >= .warning { lastWarning = message }
        case .wakeAt(let ms):
            armTimer(ms)
        case .mutedChanged(let on, _):
            onMuteChange?(on)
            emit(on ? "muted" : "unmuted")  // the sound, when announced, is the machine's `.cue` after this
        case .clearPreRoll:
            ears.clearPreRoll()
        case .play(let clip, let generation):
            play(clip, generation: generation)
        case .endCall(let reason):
            onEndCall?(reason)
        case .startCall(let phrase):
            if let onStartCall { onStartCall(phrase) } else { log.log(.warning, "wake", "\"\(phrase)\" starts a call, but calls are off: set talk.calls to true in the config and restart") }
        case .cue(let cue):
            replies.playCue(cue, generation: machine.speaker.cue?.generation ?? -1)
            if cue == .error { emit("error", ["message": lastWarning ?? "the turn could not start or be queued"]) }
        }
        return nil
    }

    func emit(_ name: String, _ fields: [String: String?] = [:]) {
        guard let onEvent else { return }
        onEvent(TalkEvent(name, fields.compactMapValues { $0 }))
    }

    /// One timer at a time: the machine's earliest deadline; a later one waits for the next wakeAt.
    private func armTimer(_ ms: Int64) {
        if let armed = armedAtMs, armed <= ms { return }
        armedAtMs = ms
        let (clock, post) = (self.clock, self.post)
        jobs.add {
            try? await clock.sleep(untilMs: ms)
            if !Task.isCancelled { post.yield(.timerFired) }
        }
    }

    // MARK: gateway events

    private func gatewayEvent(_ event: EventFrame) async {
        switch event.event {
        case GatewayEvent.talkEvent:
            guard let t = TalkTranscriptEvent(payload: event.payload) else { return }
            await captures.transcript(t)
        case GatewayEvent.chat:
            guard let c = ChatEvent(payload: event.payload) else { return }
            replies.currentChat = c
            await step(.chat(runId: c.runId, final: c.state == .final || c.state == .aborted || c.state == .error))
            replies.currentChat = nil
        case "voicewake.changed":
            if let t = VoiceWakeTriggers(payload: event.payload) { apply(.wakeTriggers(t.triggers)) }
        case "voicewake.routing.changed":
            apply(.wakeRouting(event.payload))
        default:
            break
        }
    }
}
