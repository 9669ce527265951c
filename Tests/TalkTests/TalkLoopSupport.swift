// The talk loop's embedded rig, as swift-nio's EmbeddedChannel is a handler's: a scripted
// operator channel (answers the relay, chat.send and talk.speak at once, delivers the relay's
// transcript as the gateway would), a recording speaker (keeps every clip; holds it "playing"
// until released or stopped) and a manual clock (timers fire when the test advances it). No
// PulseAudio, no sockets: a loop test runs in milliseconds.

import Audio
import ClawvoiceCore
import ClawvoiceTesting
import Foundation
import GatewayClient
import GatewayProtocol
import Synchronization
@testable import Talk

/// Time that moves only when the test says.
final class ManualTalkClock: TalkClock {
    private struct Sleeper { let id: Int; let at: Int64; let c: CheckedContinuation<Void, any Error> }
    private let state = Mutex<(now: Int64, next: Int, sleepers: [Sleeper])>((0, 0, []))

    func nowMs() -> Int64 { state.withLock { $0.now } }
    /// Timers waiting now.
    var sleepers: Int { state.withLock { $0.sleepers.count } }

    func sleep(untilMs ms: Int64) async throws {
        let id = state.withLock { s in s.next += 1; return s.next }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
                let due = state.withLock { s -> Bool in
                    if s.now >= ms { return true }
                    s.sleepers.append(Sleeper(id: id, at: ms, c: c))
                    return false
                }
                if due { c.resume() }
            }
        } onCancel: {
            let gone = state.withLock { s -> Sleeper? in
                guard let i = s.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return s.sleepers.remove(at: i)
            }
            gone?.c.resume(throwing: CancellationError())
        }
    }

    func advance(byMs d: Int64) {
        let due = state.withLock { s -> [Sleeper] in
            s.now += d
            let (due, rest) = (s.sleepers.filter { $0.at <= s.now }, s.sleepers.filter { $0.at > s.now })
            s.sleepers = rest
            return due
        }
        for s in due { s.c.resume() }
    }
}

/// A speaker that plays nothing and keeps every clip; `hold` keeps each clip playing until
/// `release()` (finished) or `stop()` (stopped).
final class RecordingSink: SpeechSink {
    private let state = Mutex<(clips: [PCMBuffer], stops: Int, hold: Bool, playing: [CheckedContinuation<Bool, Never>])>(([], 0, false, []))

    init(hold: Bool = false) { state.withLock { $0.hold = hold } }

    var clips: [PCMBuffer] { state.withLock { $0.clips } }
    var stops: Int { state.withLock { $0.stops } }

    func play(_ pcm: PCMBuffer) async throws -> Bool {
        // A cancelled player (the loop ending, e.g. after a failed expectation) is a stop.
        await withTaskCancellationHandler {
            await withCheckedContinuation { c in
                let now = state.withLock { s -> Bool in
                    s.clips.append(pcm)
                    if !s.hold || Task.isCancelled { return true }
                    s.playing.append(c)
                    return false
                }
                if now { c.resume(returning: !Task.isCancelled) }
            }
        } onCancel: {
            let cut = state.withLock { s in defer { s.playing = [] }; return s.playing }
            for c in cut { c.resume(returning: false) }
        }
    }

    func stop() async {
        let cut = state.withLock { s in defer { s.playing = []; s.stops += 1 }; return s.playing }
        for c in cut { c.resume(returning: false) }
    }

    func release() {
        let done = state.withLock { s in defer { s.playing = []; s.hold = false }; return s.playing }
        for c in done { c.resume(returning: true) }
    }
}

/// The operator session, scripted: connected, main session `agent:main:main`, a PCM16 relay at
/// 16 kHz whose final transcript is `transcript`, chat.send answering the turn's key as its run id.
final class ScriptedOperator: OperatorChannel {
    struct Request: Sendable { let method: String; let params: JSONValue? }
    private let state = Mutex<(requests: [Request], sessions: Int, transcript: String, talk: TalkController?)>(([], 0, "", nil))

    init(transcript: String = "turn on the lights") { state.withLock { $0.transcript = transcript } }

    /// Where the relay's transcript goes (the talk loop's gateway events).
    func attach(_ talk: TalkController) { state.withLock { $0.talk = talk } }
    var requests: [Request] { state.withLock { $0.requests } }
    func requests(_ method: String) -> [Request] { requests.filter { $0.method == method } }

    func connected() async -> Bool { true }
    func advertisedMethods() async -> [String] { [] }
    func mainSessionKey() async -> String? { "agent:main:main" }

    func request(_ method: String, params: JSONValue?, timeoutMs: Int64?) async throws -> JSONValue {
        let (n, transcript, talk) = state.withLock { s in
            s.requests.append(Request(method: method, params: params))
            if method == GatewayMethod.talkSessionCreate { s.sessions += 1 }
            return (s.sessions, s.transcript, s.talk)
        }
        switch method {
        case GatewayMethod.talkSessionCreate:
            return ["sessionId": .string("relay-\(n)"), "audio": ["inputEncoding": "pcm16", "inputSampleRateHz": 16_000]]
        case GatewayMethod.talkSessionClose:
            let sid = params?["sessionId"]?.stringValue
            talk?.handle(EventFrame(event: GatewayEvent.talkEvent,
                                    payload: TalkTranscriptEvent(sessionId: sid, text: transcript, isFinal: true).payload))
            return ["ok": true]
        case GatewayMethod.chatSend:
            return ["runId": params?["idempotencyKey"] ?? "run"]
        case GatewayMethod.talkSpeak:
            // Half a second of a 440 Hz tone at 24 kHz, as the gateway's pcm_24000.
            let samples = (0..<12_000).map { Int16(6000 * sin(2 * Double.pi * 440 * Double($0) / 24_000)) }
            let bytes = samples.flatMap { [UInt8(truncatingIfNeeded: $0), UInt8(truncatingIfNeeded: $0 >> 8)] }
            return try JSONValue(encoding: SpeakResult(audioBase64: Data(bytes).base64EncodedString(), provider: "scripted",
                                                       outputFormat: "pcm_24000"))
        default:
            return [:]
        }
    }
}

/// A talk loop on the embedded rig, running as a child of the test's task.
struct LoopRig {
    let channel: ScriptedOperator
    let sink: RecordingSink
    let clock = ManualTalkClock()
    let talk: TalkController
    let speech: SpeechOutput

    init(holdSpeech: Bool = false, transcript: String = "turn on the lights", configure: (inout TalkConfig) -> Void = { _ in }) {
        channel = ScriptedOperator(transcript: transcript)
        sink = RecordingSink(hold: holdSpeech)
        speech = SpeechOutput(channel: channel, sink: sink, config: SpeechConfig(), log: .silent)
        var c = TalkConfig()
        c.voiceDetector = .level
        c.preRollMs = 0
        configure(&c)
        talk = TalkController(channel: channel, speech: speech, config: c, log: .silent, clock: clock)
        channel.attach(talk)
    }

    /// Runs `body` with the loop running; the loop ends with it.
    func run<T: Sendable>(_ body: @Sendable (LoopRig) async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: Void.self) { group in
            let talk = self.talk
            group.addTask { await talk.run() }
            defer { group.cancelAll() }
            return try await body(self)
        }
    }

    /// `n` frames of 20 ms (a tone: the level rule hears speech) into the loop.
    func speak(frames n: Int) {
        for i in 0..<n {
            let samples = (0..<320).map { Int16(8000 * sin(2 * Double.pi * 300 * Double(i * 320 + $0) / 16_000)) }
            talk.micFrame(PCMBuffer(format: .voice, samples: samples))
        }
    }

    /// Waits (in real time, briefly) until `condition` holds. It returns as soon as it does: the
    /// 10 s are for a loaded machine, where a test can be stalled for seconds.
    func eventually(_ what: String, within: Duration = .seconds(10), _ condition: () async -> Bool) async throws {
        let deadline = ContinuousClock.now + within
        while ContinuousClock.now < deadline {
            if await condition() { return }
            try await Task.sleep(for: .milliseconds(1))
        }
        throw TestFailure("never: \(what)")
    }
}
