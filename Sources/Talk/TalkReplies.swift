// The talk loop's reply executor: it owns the speaker as the talk turn uses it: the replies being
// followed (one ReplyStream per run), the feedback cues and the wake chime. It carries out the
// machine's reply and speaker actions and reports a reply's end back into the inbox.

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
            reportWhenSpoken(stream)
            startedReplies.remove(runId)
            emit("replyFinished", ["runId": runId, "sessionKey": chat.sessionKey, "state": "\(chat.state)"])
        }
    }

    func close(_ runId: String, emit: (String, [String: String?]) -> Void) async {
        guard let stream = streams.removeValue(forKey: runId) else { return }
        if startedReplies.remove(runId) != nil { emit("replyFinished", ["runId": runId, "state": "closed"]) }
        await stream.close()
        reportWhenSpoken(stream)
    }

    func rekey(_ from: String, _ to: String) {
        if let s = streams.removeValue(forKey: from) { streams[to] = s }
    }

    /// Where the reply was when a barge-in stopped it, in ms of reply audio.
    func position(of reply: ReplyStream?) async -> Double { await reply?.positionMs ?? 0 }

    func playChime(_ pcm: PCMBuffer) {
        let speech = self.speech
        jobs.add { _ = await speech.playCue(pcm) }
    }

    /// A cue never cuts speech (one playback stream at a time): while the speaker plays it is skipped.
    func playCue(_ cue: TalkCue) {
        guard let pcm = sounds.sounds[cue] else { return }
        let speech = self.speech
        jobs.add {
            guard await !speech.speakerState().playing else { return }
            _ = await speech.playCue(pcm)
        }
    }

    private func reportWhenSpoken(_ stream: ReplyStream) {
        let post = self.post
        jobs.add {
            await stream.done()
            if let last = await stream.spoken.last { post.yield(.replySpoken(last)) }
        }
    }
}
