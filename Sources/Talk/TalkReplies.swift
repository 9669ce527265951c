// The talk loop's reply executor: it owns the speaker as the talk turn uses it: the replies being
// followed (one ReplyStream per run), the feedback cues and the wake chime, Listen messages and
// spoken notifications. It carries out the machine's reply and speaker actions (`play`,
// `stopSpeech`) as child tasks of the loop and reports each clip's end back into the inbox; what
// plays when, and what silences what, is the machine's speaker sub-state (TalkMachine+Speaker.swift),
// whose generation is the only one: the executor checks it before a job plays, the players keep none.

import Audio
import ClawvoiceCore
import GatewayClient
import GatewayProtocol

final class ReplyExecutor {
    private let speech: SpeechOutput
    private let log: LogSink
    private let post: AsyncStream<TalkController.Item>.Continuation
    private let jobs: TalkJobs
    private var sounds: FeedbackSounds
    private var streams: [String: ReplyStream] = [:]
    private var startedReplies: Set<String> = []
    /// The chat event being handled (its `feedReply` action feeds it).
    var currentChat: ChatEvent?
    /// The machine's speaker generation as of the loop's last step, written before the step's
    /// actions are carried out. The executor keeps no generation of its own: a Listen message, a
    /// cue or the chime plays only while this is still the one its action carried, so one that
    /// reaches the speaker after a stop (a push-to-talk, the same Listen again) is dropped.
    private let machineGeneration = Locked(0)

    func machineStepped(speakerGeneration g: Int) { machineGeneration.withLock { $0 = g } }

    private func current(_ g: Int) -> @Sendable () -> Bool {
        let seen = machineGeneration
        return { seen.withLock { $0 } == g }
    }

    init(speech: SpeechOutput, log: LogSink, cues: [TalkCue: WakeChime], post: AsyncStream<TalkController.Item>.Continuation,
         jobs: TalkJobs) {
        self.speech = speech
        self.log = log
        self.post = post
        self.jobs = jobs
        sounds = FeedbackSounds(cues)
    }

    func setCues(_ cues: [TalkCue: WakeChime]) { sounds = FeedbackSounds(cues) }

    func speakerState() async -> SpeakerState { await speech.speakerState() }

    func stopSpeech() async { await speech.stop() }

    func follow(_ runId: String) -> ReplyStream {
        let stream = ReplyStream(runId: runId, speech: speech, route: .talkSpeak, log: log)
        streams[runId] = stream
        // The reply speaks as a child of the loop: it ends with its text, a stop, or the loop.
        jobs.add { await stream.run() }
        return stream
    }

    func feed(_ runId: String, emit: (String, [String: String?]) -> Void) async {
        guard let stream = streams[runId], let chat = currentChat else { return }
        if startedReplies.insert(runId).inserted { emit("replyStarted", ["runId": runId, "sessionKey": chat.sessionKey]) }
        await stream.feed(chat)
        if chat.state == .final || chat.state == .aborted || chat.state == .error {
            streams.removeValue(forKey: runId)
            reportWhenSpoken(stream, runId: runId)
            startedReplies.remove(runId)
            emit("replyFinished", ["runId": runId, "sessionKey": chat.sessionKey, "state": "\(chat.state)"])
        }
    }

    func close(_ runId: String, emit: (String, [String: String?]) -> Void) async {
        guard let stream = streams.removeValue(forKey: runId) else { return }
        if startedReplies.remove(runId) != nil { emit("replyFinished", ["runId": runId, "state": "closed"]) }
        await stream.close()
        reportWhenSpoken(stream, runId: runId)
    }

    func rekey(_ from: String, _ to: String) {
        if let s = streams.removeValue(forKey: from) { streams[to] = s }
    }

    /// Where the reply was when a barge-in stopped it, in ms of reply audio.
    func position(of reply: ReplyStream?) async -> Double { await reply?.positionMs ?? 0 }

    /// `generation`: the machine's, for the chime's end.
    func playChime(_ pcm: PCMBuffer?, generation: Int) {
        let (speech, post, current) = (self.speech, self.post, current(generation))
        jobs.add {
            if let pcm { _ = await speech.playCue(pcm, if: current) }
            post.yield(.input(.speaker(.ended(.chime, generation: generation))))
        }
    }

    /// A cue never cuts speech (one playback stream at a time): while the speaker plays it is skipped.
    func playCue(_ cue: TalkCue, generation: Int) {
        let pcm = sounds.sounds[cue]
        let (speech, post, current) = (self.speech, self.post, current(generation))
        jobs.add {
            if let pcm, await !speech.speakerState().playing { _ = await speech.playCue(pcm, if: current) }
            post.yield(.input(.speaker(.ended(.cue(cue), generation: generation))))
        }
    }

    /// Plays what the machine's speaker sub-state says, as a child of the loop; its end comes back as an item.
    func play(_ clip: TalkMachine.SpeakerClip, generation: Int, route: SpeechRoute) {
        let (speech, post, current) = (self.speech, self.post, current(generation))
        switch clip {
        case .listen(let id, let text):
            jobs.add {
                // Silences the message before (or a Talk reply) now rather than when the new clip arrives.
                let report = await speech.interrupt(with: text, route: .ttsSpeak, if: current)
                post.yield(.speaker(.listenEnded(messageId: id, generation: generation, report)))
            }
        case .notification(let notice):
            jobs.add {
                let delivery = await Self.speak(notice, speech: speech, route: route)
                post.yield(.speaker(.noticeEnded(id: notice.id, generation: generation, delivery)))
            }
        }
    }

    /// A notification's parts in order: an urgent one's title interrupts, every other part waits
    /// for the speaker to be free; a part cut off (a stop, push-to-talk, an urgent one) ends it.
    private static func speak(_ notice: TalkMachine.Notice, speech: SpeechOutput, route: SpeechRoute) async -> NoticeDelivery {
        var d = NoticeDelivery(speakerWasBusy: await speech.isSpeaking)
        for (index, part) in notice.parts.enumerated() {
            let report: SpeechReport
            if index == 0 && notice.urgent {
                report = await speech.interrupt(with: part, route: route)
            } else {
                // The body queues too: a reply that started after the title keeps the floor.
                report = await speech.speakWhenIdle(part, route: route)
            }
            d.report = report
            if report.outcome == .failed { break }
            d.spoken.append(part)
            if report.outcome == .stopped { break }
        }
        return d
    }

    private func reportWhenSpoken(_ stream: ReplyStream, runId: String) {
        let post = self.post
        jobs.add {
            await stream.done()
            post.yield(.replySpoken(runId: runId, await stream.spoken.last))
        }
    }
}
