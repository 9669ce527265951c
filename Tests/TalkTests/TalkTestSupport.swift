// Helpers for the talk tests: a private PulseAudio of their own (so the audio module's
// server-restart tests cannot disturb them), a loopback gateway with an operator session,
// and signal comparisons.

import Audio
import ClawvoiceCore
import ClawvoiceTesting
import Foundation
import GatewayClient
import GatewayProtocol
import LoopbackGateway
import Store
import Talk
import Testing

/// Every talk suite that plays, records, or kills a PulseAudio nests in here. Each test case
/// gets a private server of its own (started when it first asks, stopped when it ends), so the
/// cases run side by side without sharing a microphone or a speaker.
@Suite(.privateTalkServer) struct TalkAudio {}

/// Gives each test case under it its own talk server: `TalkPulse.dir` names it for the case.
struct PrivateTalkServer: SuiteTrait, TestTrait, TestScoping {  // TestTrait too: a recursive suite trait must be one (swift-testing#1048)
    var isRecursive: Bool { true }

    func provideScope(for test: Test, testCase: Test.Case?,
                      performing function: @Sendable () async throws -> Void) async throws {
        guard testCase != nil else { return try await function() }
        // However wide swift-testing runs, at most a few servers at once: unlimited, a plain
        // `swift test --filter TalkTests` started ~80 PulseAudio servers and a load of 240.
        await TalkPulse.gate.enter()
        let outcome: Result<Void, any Error>
        do {
            let dir = TalkPulse.newDirectory()
            defer { TalkPulse.stop(dir) }
            try await TalkPulse.$current.withValue(dir) { try await function() }
            outcome = .success(())
        } catch { outcome = .failure(error) }
        await TalkPulse.gate.leave()
        try outcome.get()
    }
}

extension Trait where Self == PrivateTalkServer {
    static var privateTalkServer: Self { PrivateTalkServer() }
}

/// A counting gate for test cases (FIFO).
actor TestGate {
    private var free: Int
    private var waiting: [CheckedContinuation<Void, Never>] = []
    init(_ width: Int) { free = width }
    func enter() async {
        if free > 0 { free -= 1; return }
        await withCheckedContinuation { waiting.append($0) }
    }
    func leave() {
        if waiting.isEmpty { free += 1 } else { waiting.removeFirst().resume() }
    }
}

enum TalkPulse {
    /// How many talk test cases hold a server at once (CLAWVOICE_TALK_SERVERS, default 4).
    static let gate = TestGate(max(1, Int(ProcessInfo.processInfo.environment["CLAWVOICE_TALK_SERVERS"] ?? "") ?? 4))
    /// The server of the running test case (set by `PrivateTalkServer`).
    @TaskLocal static var current: String?
    private static let started = Locked<Set<String>>([])
    private static let counter = Locked(0)
    /// Short (a socket path has 108 bytes), per process, so two test runs never share one.
    private static let base: String = {
        let b = ProcessInfo.processInfo.environment["CLAWVOICE_TALK_PULSE_DIR"] ?? "/tmp/cvt-\(getpid())"
        atexit { TalkPulse.stopAll() }
        return b
    }()

    static func newDirectory() -> String {
        let n = counter.withLock { $0 += 1; return $0 }
        return "\(base)-\(n)"
    }

    static var dir: String {
        guard let current else { fatalError("TalkPulse is used outside a TalkAudio test case") }
        return current
    }
    static var server: String { "unix:\(dir)/native" }

    static func stop(_ dir: String) {
        guard started.withLock({ $0.remove(dir) }) != nil else { return }
        script("stop", dir)
        try? FileManager.default.removeItem(atPath: dir)
    }

    static func stopAll() {
        for d in started.withLock({ $0 }) { stop(d) }
    }

    static var repoRoot: String {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }

    @discardableResult
    private static func script(_ verb: String, _ dir: String) -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/bash")
        p.arguments = [repoRoot + "/tests/audio/pulse-server.sh", verb]
        var env = ProcessInfo.processInfo.environment
        env["CLAWVOICE_PULSE_DIR"] = dir
        p.environment = env
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        guard (try? p.run()) != nil else { return -1 }
        p.waitUntilExit()
        return p.terminationStatus
    }

    /// Starts (idempotently) this test case's PulseAudio, waiting off the cooperative pool.
    static func ensure() async throws {
        let dir = dir  // read here: the task-local value does not cross into the dispatch queue
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
            DispatchQueue.global().async {
                started.withLock { _ = $0.insert(dir) }
                let status = script("start", dir)
                if status == 0 { c.resume() } else {
                    c.resume(throwing: TestFailure("tests/audio/pulse-server.sh start failed (\(status))"))
                }
            }
        }
    }

    /// Kills this test case's server the hard way, as a crash would.
    static func kill() throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/bash")
        p.arguments = ["-c", "kill -9 $(cat '\(dir)/pulseaudio.pid') 2>/dev/null; sleep 0.2"]
        try p.run()
        p.waitUntilExit()
    }
}

final class Lines: Sendable {
    let all = Locked<[String]>([])
    var sink: LogSink { LogSink(minimum: .debug) { [all] l, c, m in all.withLock { $0.append("\(l.rawValue) \(c): \(m)") } } }
    func contains(_ s: String) -> Bool { all.withLock { $0.contains { $0.contains(s) } } }
}

/// A loopback gateway, an operator session to it and a TalkController on the private PulseAudio.
struct TalkRig {
    let gateway: LoopbackGateway
    let session: GatewaySession
    let audio: LiveAudio
    let speech: SpeechOutput
    let talk: TalkController
    let store: ClawStore
    let outbox: OutboxSender?
    let log: Lines
    let dir: String
    let pump: Task<Void, Never>
    let micPlayer: PulsePlayback
    let speakerTap: PulseConnection

    static func make(relay: LoopbackGateway.RelayMode = .oggOpus, silenceTimeoutMs: Int = 900, preRollMs: Int = 300,
                     speakReplies: Bool = true, source: String = "cv_mic.monitor", headset: Bool = false,
                     outbox: Bool = false, startOutbox: Bool = true, echoCancel: Bool = false, followUpMs: Int = 0,
                     voiceDetector: VoiceDetectorChoice = .model, onceMaxMs: Int = 12_000,
                     interruptOnSpeech: Bool = true, stopWordModels: String? = nil, stopWordSensitivity: Double = TalkConfig().stopWordSensitivity,
                     callWakeWord: String? = nil, configure: (inout LoopbackGateway.Configuration) -> Void = { _ in }) async throws -> TalkRig {
        try await TalkPulse.ensure()
        var gc = LoopbackGateway.Configuration()
        gc.autoApprove = true
        gc.auth = .token("t")
        gc.relay = relay
        gc.tickIntervalMs = 1000
        gc.echoDeltaDelayMs = 5
        configure(&gc)
        let g = LoopbackGateway(configuration: gc)
        try await g.start()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cv-talk-\(UUID().uuidString.prefix(8))").path
        let store = try ClawStore(directory: dir)
        let (identity, instanceId) = try store.loadOrCreateIdentity()
        let url = await g.url
        try store.upsertGateway(GatewayRecord(name: "lb", url: url, sharedToken: "t", isActive: true, addedAtMs: 0))
        let log = Lines()
        let (events, sink) = AsyncStream.makeStream(of: EventFrame.self)
        let session = GatewaySession(role: .operator, endpoint: GatewayEndpoint(name: "lb", url: url),
                                     credentials: GatewayCredentials(sharedToken: "t"), identity: identity, instanceId: instanceId,
                                     store: store, options: SessionOptions(displayName: "talk test", version: "test"),
                                     log: log.sink, onEvent: { sink.yield($0) })
        await session.start()
        _ = await session.waitUntilSettled(timeout: .seconds(10))
        let audio = LiveAudio(source: source, sink: "cv_speaker", server: TalkPulse.server, log: log.sink)
        let echo = echoCancel ? EchoReference() : nil
        let speech = SpeechOutput(channel: session, sink: PulseSpeechSink(playback: audio.playback, reference: echo),
                                  config: SpeechConfig(), log: log.sink)
        var tc = TalkConfig()
        tc.silenceTimeoutMs = silenceTimeoutMs
        tc.preRollMs = preRollMs
        tc.callWakeWord = callWakeWord
        tc.speakReplies = speakReplies
        tc.headset = headset
        tc.echoCancel = echoCancel ? true : false
        tc.followUpMs = followUpMs
        tc.voiceDetector = voiceDetector
        tc.modelsDirectory = TalkPulse.repoRoot + "/models"
        tc.onceMaxMs = onceMaxMs
        tc.interruptOnSpeech = interruptOnSpeech
        tc.stopWordModelsDirectory = stopWordModels
        tc.stopWordSensitivity = stopWordSensitivity
        tc.voiceNoteDirectory = dir + "/voice-notes"
        // Commands wait this long for parts that are still starting (3 s in the daemon).
        tc.partsWaitMs = 1_000
        let sender = outbox ? OutboxSender(store: store, gateway: "lb", channel: session, log: log.sink) : nil
        if let sender, startOutbox { await sender.start() }
        let talk = TalkController(channel: session, speech: speech, config: tc, log: log.sink, outbox: sender, echoReference: echo)
        let pump = Task {
            await withDiscardingTaskGroup { group in
                group.addTask { await talk.run() }
                group.addTask { for await e in events { talk.handle(e) } }
            }
        }
        audio.start(feeding: talk)
        let mic = PulseConnection(server: TalkPulse.server, clientName: "talk-test-mic")
        let tap = PulseConnection(server: TalkPulse.server, clientName: "talk-test-tap")
        return TalkRig(gateway: g, session: session, audio: audio, speech: speech, talk: talk, store: store, outbox: sender, log: log, dir: dir, pump: pump,
                       micPlayer: PulsePlayback(connection: mic, sink: "cv_mic"), speakerTap: tap)
    }

    /// Waits until the microphone delivers frames to the controller.
    func waitForMicrophone() async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if audio.captureStatus == "running" { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw TestFailure("capture never ran: \(audio.captureStatus)")
    }

    func shutdown() async {
        await outbox?.stop()
        audio.stop()
        pump.cancel()
        await session.stop()
        await gateway.stop()
        micPlayer.connection.close()
        speakerTap.close()
        try? FileManager.default.removeItem(atPath: dir)
    }
}

enum Signal {
    /// espeak-ng speech at 16 kHz mono.
    static func speech(_ text: String) throws -> PCMBuffer {
        let s = try SpeechSynthesizer.synthesize(text, settings: VoiceSettings())
        let r = try Resampler(from: s.format.sampleRateHz, to: 16_000, channels: 1)
        return PCMBuffer(format: .voice, samples: r.process(s.mono().samples) + r.flush())
    }

    static func to16k(_ p: PCMBuffer) throws -> [Int16] {
        let m = p.mono()
        if m.format.sampleRateHz == 16_000 { return m.samples }
        let r = try Resampler(from: m.format.sampleRateHz, to: 16_000, channels: 1)
        return r.process(m.samples) + r.flush()
    }

    /// First and last 10 ms windows louder than `threshold` RMS, in samples.
    static func activeSpan(_ s: [Int16], rate: Int = 16_000, threshold: Double = 0.01) -> (Int, Int)? {
        let w = rate / 100
        var first: Int?, last: Int?
        var i = 0
        while i + w <= s.count {
            var acc = 0.0
            for v in s[i..<i + w] { let d = Double(v) / 32768; acc += d * d }
            if (acc / Double(w)).squareRoot() > threshold { if first == nil { first = i }; last = i + w }
            i += w
        }
        guard let first, let last else { return nil }
        return (first, last)
    }

    /// Best normalised cross-correlation of `b` against `a` over lags up to `maxLag` samples.
    static func correlation(_ a: [Int16], _ b: [Int16], maxLag: Int) -> (Double, Int) {
        let n = min(a.count, b.count)
        guard n > 0 else { return (0, 0) }
        var best = (-1.0, 0)
        var lag = -maxLag
        while lag <= maxLag {
            var ab = 0.0, aa = 0.0, bb = 0.0
            var i = max(0, -lag)
            while i < n && i + lag < b.count {
                let x = Double(a[i]), y = Double(b[i + lag])
                ab += x * y; aa += x * x; bb += y * y
                i += 2  // every other sample: plenty for speech and twice as fast
            }
            let c = aa > 0 && bb > 0 ? ab / (aa * bb).squareRoot() : 0
            if c > best.0 { best = (c, lag) }
            lag += 4
        }
        return best
    }
}
