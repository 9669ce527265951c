// The players keep no counter of their own (the talk machine's speaker sub-state numbers the
// clips): a stop ends every call in flight, so a clip that arrives after it is never played and
// nothing falls back to espeak-ng; a newer `speak` ends the older one on its way; a streamed
// reply's claim ends with a stop. And the mute sound goes through the machine's cue. Without
// PulseAudio: a channel that holds talk.speak until the test lets it answer, a recording sink.

import Audio
import ClawvoiceCore
import ClawvoiceTesting
import Foundation
import GatewayClient
import GatewayProtocol
import Synchronization
import Testing
@testable import Talk

/// An operator channel whose talk.speak answers only when the test says: a clip (a 440 Hz tone)
/// or a gateway error (which, unstopped, falls back to espeak-ng).
final class HeldSpeakChannel: OperatorChannel {
    private let state = Mutex<(asked: [String], waiting: [CheckedContinuation<Bool, Never>])>(([], []))

    var asked: [String] { state.withLock { $0.asked } }
    var waiting: Int { state.withLock { $0.waiting.count } }

    func connected() async -> Bool { true }
    func advertisedMethods() async -> [String] { [] }
    func mainSessionKey() async -> String? { "agent:main:main" }

    /// Answers every talk.speak waiting now: with a clip (`clip`) or an error.
    func answer(clip: Bool) {
        let waiting = state.withLock { s in defer { s.waiting = [] }; return s.waiting }
        for c in waiting { c.resume(returning: clip) }
    }

    func request(_ method: String, params: JSONValue?, timeoutMs: Int64?) async throws -> JSONValue {
        guard method == GatewayMethod.talkSpeak else { return [:] }
        let clip = await withCheckedContinuation { c in
            state.withLock { $0.asked.append(params?["text"]?.stringValue ?? ""); $0.waiting.append(c) }
        }
        guard clip else {
            throw GatewayRequestError.failed(ErrorShape(code: "UNAVAILABLE", message: "tts provider down"))
        }
        let samples = (0..<12_000).map { Int16(6000 * sin(2 * Double.pi * 440 * Double($0) / 24_000)) }
        let bytes = samples.flatMap { [UInt8(truncatingIfNeeded: $0), UInt8(truncatingIfNeeded: $0 >> 8)] }
        return try JSONValue(encoding: SpeakResult(audioBase64: Data(bytes).base64EncodedString(), provider: "held",
                                                   outputFormat: "pcm_24000"))
    }
}

@Suite struct SpeakerStopTests {
    func waitFor(_ what: String, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(5)
        while !condition() {
            guard ContinuousClock.now < deadline else { throw TestFailure("never: \(what)") }
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    @Test(arguments: [true, false])
    func `a stop while the clip is on its way: the late clip never plays, nothing falls back`(clip: Bool) async throws {
        let (channel, sink) = (HeldSpeakChannel(), RecordingSink())
        let speech = SpeechOutput(channel: channel, sink: sink, config: SpeechConfig(), log: .silent)
        let speaking = Task { await speech.speak("Late words.", route: .talkSpeak) }
        try await waitFor("talk.speak asked") { channel.waiting == 1 }
        await speech.stop()
        channel.answer(clip: clip)
        let report = await speaking.value
        #expect(report.outcome == .stopped && report.engine != "espeak-ng", "\(report)")
        #expect(sink.clips.isEmpty, "nothing played after the stop")
        // The player is not stuck: the next call speaks.
        let next = Task { await speech.speak("Next.", route: .talkSpeak) }
        try await waitFor("the next talk.speak") { channel.waiting == 1 }
        channel.answer(clip: true)
        #expect(await next.value.outcome == .finished)
        #expect(sink.clips.count == 1)
    }

    @Test func `a newer speak ends the one still on its way`() async throws {
        let (channel, sink) = (HeldSpeakChannel(), RecordingSink())
        let speech = SpeechOutput(channel: channel, sink: sink, config: SpeechConfig(), log: .silent)
        let older = Task { await speech.speak("Older.", route: .talkSpeak) }
        try await waitFor("the older talk.speak") { channel.waiting == 1 }
        let newer = Task { await speech.speak("Newer.", route: .talkSpeak) }
        try await waitFor("the newer talk.speak") { channel.waiting == 2 }
        channel.answer(clip: true)
        #expect(await older.value.outcome == .stopped)
        #expect(await newer.value.outcome == .finished)
        #expect(sink.clips.count == 1, "only the newer one played")
    }

    @Test func `a stop ends a streamed reply: its clips on their way never play`() async throws {
        let (channel, sink) = (HeldSpeakChannel(), RecordingSink())
        let speech = SpeechOutput(channel: channel, sink: sink, config: SpeechConfig(), log: .silent)
        let stream = ReplyStream(runId: "r1", speech: speech, log: .silent)
        let running = Task { await stream.run() }
        await stream.feed(ChatEvent(runId: "r1", sessionKey: "agent:main:main", seq: 1, state: .final,
                                    messageText: "First sentence here. Second sentence there."))
        try await waitFor("the first sentence's clip asked") { channel.waiting == 1 }
        await speech.stop()
        channel.answer(clip: true)
        await running.value
        await stream.done()
        #expect(sink.clips.isEmpty, "the reply's late clip did not play")
        #expect(channel.asked == ["First sentence here."], "no further sentence was fetched after the stop")
        #expect(await stream.spoken.isEmpty, "nothing of it was heard")
    }

    @Test func `a Listen message or cue that reaches the speaker after the machine moved on stops, fetches and plays nothing`() async throws {
        let (channel, sink) = (HeldSpeakChannel(), RecordingSink())
        let speech = SpeechOutput(channel: channel, sink: sink, config: SpeechConfig(), log: .silent)
        let speaking = Task { await speech.speak("Still speaking.", route: .talkSpeak) }
        try await waitFor("talk.speak asked") { channel.waiting == 1 }
        let late = await speech.interrupt(with: "Too late.", route: .talkSpeak, if: { false })
        #expect(late.outcome == .stopped && late.engine == "none", "\(late)")
        #expect(sink.stops == 0 && channel.asked == ["Still speaking."], "it neither stopped the speaker nor fetched")
        #expect(await !speech.playCue(PCMBuffer(format: .voice, samples: [Int16](repeating: 100, count: 320)), if: { false }))
        #expect(sink.clips.isEmpty)
        channel.answer(clip: true)
        #expect(await speaking.value.outcome == .finished, "what was speaking goes on")
        // Still current: it interrupts and speaks.
        let now = Task { await speech.interrupt(with: "In time.", route: .talkSpeak, if: { true }) }
        try await waitFor("its talk.speak") { channel.waiting == 1 }
        #expect(sink.stops == 1)
        channel.answer(clip: true)
        #expect(await now.value.outcome == .finished && sink.clips.count == 2)
    }

    @Test func `mute and unmute play their sound through the machine's cue`() async throws {
        let rig = LoopRig(holdSpeech: true) { $0.cues = [.mute: .generated, .unmute: .generated] }
        try await rig.run { rig in
            await rig.talk.setMuted(true)
            try await rig.eventually("the mute sound playing") { rig.sink.clips.count == 1 }
            await rig.talk.barrier()
            #expect(rig.talk.speakerPlaying == .cue(.mute), "the speaker sub-state holds the cue")
            rig.sink.release()
            try await rig.eventually("the cue's end") { rig.talk.speakerPlaying == .nothing }
            await rig.talk.setMuted(false, announce: false)
            await rig.talk.setMuted(true, announce: false)
            await rig.talk.barrier()
            #expect(rig.sink.clips.count == 1, "no sound when not announced")
            await rig.talk.setMuted(false)
            try await rig.eventually("the unmute sound") { rig.sink.clips.count == 2 }
        }
    }
}
