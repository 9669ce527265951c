// Speaks one reply while it streams in: chat events → sentences → clips, the next sentence's
// clip fetched while the current one plays, so the first words are heard before the reply
// has finished. A stop (generation change) ends it; nothing late is played.

import Audio
import ClawvoiceCore
import Foundation
import GatewayClient
import GatewayProtocol

public actor ReplyStream {
    public let runId: String
    private let speech: SpeechOutput
    private let route: SpeechRoute
    private let log: LogSink
    private var splitter = SentenceSplitter()
    private var queue: [String] = []
    private var finished = false
    private var waiter: CheckedContinuation<Void, Never>?
    private var worker: Task<Void, Never>?
    private var generation: Int?
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
    public func feed(_ event: ChatEvent) {
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
        enqueue(new)
    }

    /// No more text will come (timeout): speak what is there.
    public func close() {
        guard !finished else { return }
        enqueue(splitter.finish())
        finished = true
        wake()
    }

    private var directiveAdopted = false

    private func enqueue(_ new: [String]) {
        if !directiveAdopted, let d = splitter.directive {
            // Persistent directives change the voice for later replies too; `once` ones only this reply.
            directiveAdopted = true
            let speech = self.speech
            // Unstructured: a persistent voice directive applies beside the reply (issue 27 item 4).
            Task { await speech.adopt(d) }
        }
        sentences += new
        queue += new
        if worker == nil && (!queue.isEmpty || finished) {
            // Unstructured: the reply's speaker worker lives as long as the reply (issue 27 item 4).
            worker = Task { await self.run() }
        }
        wake()
    }

    private func wake() {
        let w = waiter
        waiter = nil
        w?.resume()
    }

    private func next() async -> String? {
        while queue.isEmpty && !finished {
            await withCheckedContinuation { waiter = $0 }
        }
        return queue.isEmpty ? nil : queue.removeFirst()
    }

    /// Waits until everything queued has been spoken (or the stream was stopped).
    public func done() async { await worker?.value }

    /// Whether the reply's text is complete (final, aborted, error, or timed out).
    public var isFinished: Bool { finished }

    private func run() async {
        let gen = await speech.currentGeneration
        generation = gen
        // One utterance from the first sentence to the last: queued announcements wait for the end.
        await speech.beginUtterance()
        var prefetch: Task<SpeechOutput.Prepared, Never>?
        while true {
            let prepared: SpeechOutput.Prepared
            if let p = prefetch { prepared = await p.value } else {
                guard let sentence = await next() else { break }
                prepared = await speech.prepare(sentence, route: route, directive: splitter.directive)
            }
            prefetch = nil
            guard await speech.currentGeneration == gen else { break }
            // Fetch the following sentence while this one plays.
            if let following = await nextIfReady() {
                let directive = splitter.directive
                // Unstructured: prefetch of the next sentence, cancelled with the reply (issue 27 item 4).
                prefetch = Task { await self.speech.prepare(following, route: self.route, directive: directive) }
            }
            if firstAudioAt == nil { firstAudioAt = ContinuousClock.now }
            currentStartedAt = ContinuousClock.now
            let report = await speech.play(prepared, generation: gen)
            if let start = currentStartedAt {
                playedMs += (ContinuousClock.now - start) / .milliseconds(1)
            }
            currentStartedAt = nil
            spoken.append(report)
            if report.outcome == .stopped || report.outcome == .failed && report.engine == "none" { break }
            if prefetch == nil, queue.isEmpty, finished { break }
            if prefetch == nil, let sentence = await next() {
                // Unstructured: prefetch of the next sentence, cancelled with the reply (issue 27 item 4).
                prefetch = Task { await self.speech.prepare(sentence, route: self.route, directive: self.splitter.directive) }
            } else if prefetch == nil {
                break
            }
        }
        prefetch?.cancel()
        await speech.endUtterance()
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
