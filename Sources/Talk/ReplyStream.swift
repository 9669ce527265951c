// Speaks one reply while it streams in: chat events → sentences → clips, the next sentence's
// clip fetched while the current one plays, so the first words are heard before the reply
// has finished. A stop ends it (the speaker's `stop()` ends its claim, or its task is cancelled);
// nothing late is played. It keeps no counter of its own: the talk machine's speaker sub-state
// is what numbers the clips. Its owner (the talk loop's reply executor) runs `run()` as a child
// task; the next sentence's clip is fetched by a child of that.

import Audio
import ClawvoiceCore
import Foundation
public import GatewayClient
public import GatewayProtocol

public actor ReplyStream {
    public let runId: String
    private let speech: SpeechOutput
    private let route: SpeechRoute
    private let log: LogSink
    private var splitter = SentenceSplitter()
    private var queue: [String] = []
    private var finished = false
    /// Wakes `run()` when text arrives or the reply is complete.
    private let work = WakeLatch()
    /// Text (or the end) has arrived: `run()` speaks, and `done()` waits for it.
    private var started = false
    private var ended = false
    private var endWaiters: [WakeLatch] = []
    /// Reports of what was spoken, in order, for tests and the bench.
    public private(set) var spoken: [SpeechReport] = []
    public private(set) var sentences: [String] = []
    public private(set) var firstAudioAt: ContinuousClock.Instant?
    /// Seconds of reply audio played so far (for "interrupted at X.Xs").
    public private(set) var playedMs: Double = 0
    private var currentStartedAt: ContinuousClock.Instant?

    public init(runId: String, speech: SpeechOutput, route: SpeechRoute = .talkSpeak, log: LogSink) {
        self.runId = runId
        self.speech = speech
        self.route = route
        self.log = log
    }

    /// A chat event of this run.
    public func feed(_ event: ChatEvent) async {
        guard event.runId == runId, !finished else { return }
        var new: [String] = []
        switch event.state {
        case .delta:
            if let d = event.deltaText, !event.replace { new = splitter.feed(d) }
            else if let m = event.messageText ?? event.deltaText { new = splitter.snapshot(m) }
        case .final:
            if let m = event.messageText { new = splitter.snapshot(m) }
            new += splitter.finish()
            finished = true
        case .aborted, .error:
            if let m = event.messageText { new = splitter.snapshot(m) }
            new += splitter.finish()
            finished = true
        case .status:
            break
        }
        await enqueue(new)
    }

    /// No more text will come (timeout): speak what is there.
    public func close() async {
        guard !finished else { return }
        finished = true
        await enqueue(splitter.finish())
    }

    private var directiveAdopted = false

    private func enqueue(_ new: [String]) async {
        if !directiveAdopted, let d = splitter.directive {
            // Persistent directives change the voice for later replies too; `once` ones only this reply.
            directiveAdopted = true
            await speech.adopt(d)
        }
        sentences += new
        queue += new
        if !queue.isEmpty || finished { started = true }
        work.signal()
    }

    private func next() async -> String? {
        while queue.isEmpty && !finished && !Task.isCancelled { await work.wait() }
        return queue.isEmpty ? nil : queue.removeFirst()
    }

    /// Waits until everything queued has been spoken (or the stream was stopped); at once when
    /// no text has arrived yet.
    public func done() async {
        while started && !ended && !Task.isCancelled {
            let latch = WakeLatch()
            endWaiters.append(latch)
            await latch.wait()
        }
    }

    private func end() {
        ended = true
        for latch in endWaiters { latch.signal() }
        endWaiters.removeAll()
    }

    /// Whether the reply's text is complete (final, aborted, error, or timed out).
    public var isFinished: Bool { finished }

    /// Speaks the reply as it streams in, from its first text to its end, a stop or the owner's
    /// cancellation.
    public func run() async {
        defer { end() }
        while !started && !Task.isCancelled { await work.wait() }
        guard started else { return }
        // One utterance from the first sentence to the last: queued announcements wait for the end,
        // and a stop ends its claim.
        let claim = await speech.beginUtterance()
        let (speech, route) = (self.speech, self.route)
        await withTaskGroup(of: SpeechOutput.Prepared.self) { prefetch in
            // Whether a child is fetching the next sentence's clip while the current one plays.
            var fetching = false
            while true {
                let prepared: SpeechOutput.Prepared
                if fetching, let p = await prefetch.next() { prepared = p } else {
                    guard let sentence = await next() else { break }
                    prepared = await speech.prepare(sentence, route: route, directive: splitter.directive)
                }
                fetching = false
                guard !claim.isStopped else { break }
                // Fetch the following sentence while this one plays.
                if let following = nextIfReady() {
                    let directive = splitter.directive
                    prefetch.addTask { await speech.prepare(following, route: route, directive: directive) }
                    fetching = true
                }
                if firstAudioAt == nil { firstAudioAt = ContinuousClock.now }
                currentStartedAt = ContinuousClock.now
                let report = await speech.play(prepared, claim: claim)
                if let start = currentStartedAt {
                    playedMs += (ContinuousClock.now - start) / .milliseconds(1)
                }
                currentStartedAt = nil
                spoken.append(report)
                if report.outcome == .stopped || report.outcome == .failed && report.engine == "none" { break }
                if !fetching, queue.isEmpty, finished { break }
                if !fetching, let sentence = await next() {
                    let directive = splitter.directive
                    prefetch.addTask { await speech.prepare(sentence, route: route, directive: directive) }
                    fetching = true
                } else if !fetching {
                    break
                }
            }
            prefetch.cancelAll()
            await speech.endUtterance(claim)
        }
    }

    private func nextIfReady() -> String? {
        queue.isEmpty ? nil : queue.removeFirst()
    }

    /// Where playback is now, in ms of reply audio, for the barge-in prefix.
    public var positionMs: Double {
        guard let start = currentStartedAt else { return playedMs }
        return playedMs + (ContinuousClock.now - start) / .milliseconds(1)
    }
}
