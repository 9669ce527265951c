// clawvoice-bench: speed figures for the audio pipeline, each beside a baseline measured in
// the same process (these machines are shared and noisy; ratios travel, milliseconds less so).
//
//   swift run -c release clawvoice-bench [--json] [--rounds N] [--wake-only] [--echo-only] [--minutes N]
//   swift run -c release clawvoice-bench --vad [--sentences N]        (VoiceFigures.swift)
//   swift run -c release clawvoice-bench --endpoint [--sentences N]
//   swift run -c release clawvoice-bench --live-only [--rounds N]     (the live latency figures alone)
//   swift run -c release clawvoice-bench --echo-only [--minutes N] [--recording FILE]   (EchoFigure.swift)
//   swift run -c release clawvoice-bench --echo-check FILE…                          (EchoCheck.swift)
//   swift run -c release clawvoice-bench --calls [--rounds N]     (CallFigures.swift, CallBench.swift)
//   swift run -c release clawvoice-bench --wake-over-reply [--tries N]   (WakeOverReplyFigure.swift)
//
// Figures: Opus framing of speech through our uplink pipeline vs a bare libopus encode loop;
// talk.ptt.start → first captured frame; stop → last uplink call; clip arrival → first sample
// at the sink monitor; espeak-ng text → first sample; stop request → silence at the monitor.
// Audio runs on a private PulseAudio with null sinks, the gateway is the loopback one.

import Audio
import COpus
import ClawvoiceCore
import ClawvoiceTesting
import Foundation
import GatewayClient
import GatewayProtocol
import LoopbackGateway
import NodeRuntime
import Store
import Talk
import WakeWord

let args = CommandLine.arguments.dropFirst()
switch BenchUsage.check(Array(args)) {
case .run: break
case .help:
    print(BenchUsage.text)
    exit(0)
case .usage(let why):
    FileHandle.standardError.write(Data("clawvoice-bench: \(why)\n\n\(BenchUsage.text)\n".utf8))
    exit(2)
}

// On a CPU newer than OpenBLAS's table, use the kernels it has (as the clawvoice executable does).
BLASKernels.reexecIfGeneric()

let json = args.contains("--json")
let rounds = args.firstIndex(of: "--rounds").flatMap { i in args.dropFirst(i - args.startIndex + 1).first.flatMap { Int($0) } } ?? 5

func ms(_ d: Duration) -> Double { Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15 }
func median(_ xs: [Double]) -> Double { let s = xs.sorted(); return s.isEmpty ? .nan : s[s.count / 2] }
func note(_ s: String) { if !json { FileHandle.standardError.write(Data((s + "\n").utf8)) } }

struct Figure: Codable {
    var name: String
    var value: Double
    var unit: String
    var baseline: Double?
    var ratio: Double?
    var detail: String
}
var figures: [Figure] = []

// `--vad`, `--endpoint`: the voice detector's and the endpointer's tables (pure compute, no audio server).
let sentencesArg = args.firstIndex(of: "--sentences").flatMap { i in args.dropFirst(i - args.startIndex + 1).first.flatMap { Int($0) } }
if let i = args.firstIndex(of: "--turn-features") {
    do { try turnFeatures(list: args.dropFirst(i - args.startIndex + 1).first ?? "") } catch {
        FileHandle.standardError.write(Data("clawvoice-bench: \(error)\n".utf8))
        exit(1)
    }
    exit(0)
}
if args.contains("--vad") || args.contains("--endpoint") || args.contains("--tune") {
    do {
        if args.contains("--tune") { try tuneGate(sentences: sentencesArg ?? 160) }
        if args.contains("--vad") { try vadTable(sentencesPerVoice: sentencesArg ?? 40) }
        if args.contains("--endpoint") {
            // With --json: the figures on stdout, one JSON object a line, the tables on stderr.
            let toStderr: (String) -> Void = { FileHandle.standardError.write(Data(($0 + "\n").utf8)) }
            let fs = try endpointTable(sentences: sentencesArg ?? 300, print: json ? toStderr : { Swift.print($0) })
            if json { for f in fs { print(try JSONCoding.string(try JSONValue(encoding: f))) } }
        }
    } catch {
        FileHandle.standardError.write(Data("clawvoice-bench: \(error)\n".utf8))
        exit(1)
    }
    exit(0)
}

// `--idle [--seconds N] [--ptt-cycles N]`: a real daemon's idle cost (and, with --ptt-cycles,
// its memory over push-to-talk turns), alone (DaemonFigures.swift); `--ptt-only --ptt-cycles N`: the turns alone. The whole run has both,
// with 1,000 cycles unless --ptt-cycles says otherwise.
let idleSeconds = args.firstIndex(of: "--seconds").flatMap { i in args.dropFirst(i - args.startIndex + 1).first.flatMap { Double($0) } } ?? 30
let pttCycles = args.firstIndex(of: "--ptt-cycles").flatMap { i in args.dropFirst(i - args.startIndex + 1).first.flatMap { Int($0) } }
/// The figures as the run asked: one JSON object each, or a line each (value and baseline with
/// `digits` and `baselineDigits` decimals) and its detail.
func printFigures(_ fs: [Figure], digits: Int = 3, baselineDigits: Int = 3) throws {
    for f in fs {
        if json { print(try JSONCoding.string(try JSONValue(encoding: f))); continue }
        let baseline = f.baseline.map { String(format: "%.\(baselineDigits)f", $0) } ?? "-"
        print("\(f.name): \(String(format: "%.\(digits)f", f.value)) \(f.unit); baseline \(baseline); ratio \(f.ratio.map { String(format: "%.3f", $0) } ?? "-")\n  \(f.detail)")
    }
}

/// A mode measured on a private PulseAudio of its own: prints its figures and exits 0, or says
/// what failed and exits 1; the server is stopped either way.
func measureOnPrivatePulse(digits: Int = 3, baselineDigits: Int = 3, _ measure: (PrivatePulseServer) async throws -> [Figure]) async throws -> Never {
    let pulse = try await PrivatePulseServer()
    let fs: [Figure]
    do { fs = try await measure(pulse) } catch {
        FileHandle.standardError.write(Data("clawvoice-bench: \(error)\n".utf8))
        pulse.stop()
        exit(1)
    }
    try printFigures(fs, digits: digits, baselineDigits: baselineDigits)
    pulse.stop()
    exit(0)
}

if args.contains("--idle") || args.contains("--ptt-only") {
    try await measureOnPrivatePulse { pulse in
        var fs: [Figure] = []
        if args.contains("--idle") { fs += try await idleFigures(seconds: idleSeconds, pulse: pulse) }
        if let n = pttCycles { fs += try await pttCycleFigures(cycles: n, pulse: pulse) }
        return fs
    }
}

// `--wake-over-reply [--tries N]`: a trigger over a real daemon's reply (WakeOverReplyFigure.swift).
if args.contains("--wake-over-reply") {
    let tries = args.firstIndex(of: "--tries").flatMap { i in args.dropFirst(i - args.startIndex + 1).first.flatMap { Int($0) } } ?? 9
    try await measureOnPrivatePulse(digits: 0, baselineDigits: 0) { try await wakeOverReplyFigures(tries: tries, pulse: $0) }
}

// `--own-words [--tries N]`: replies that say the trigger and "stop" themselves (OwnWordsFigure.swift).
if args.contains("--own-words") {
    let tries = args.firstIndex(of: "--tries").flatMap { i in args.dropFirst(i - args.startIndex + 1).first.flatMap { Int($0) } } ?? 8
    try await measureOnPrivatePulse(digits: 0, baselineDigits: 0) { try await ownWordsFigures(tries: tries, pulse: $0) }
}

// `--calls [--rounds N]`: a realtime call's figures per path (CallFigures.swift, CallBench.swift).
if args.contains("--calls") {
    try await measureOnPrivatePulse(digits: 1, baselineDigits: 0) { try await callFigures(rounds: rounds, pulse: $0) }
}

// `--wake-only`: just the wake figure (used by models/README.md's measurement).
if args.contains("--wake-only") {
    try printFigures(wakeFigures())
    exit(0)
}

// `--echo-only [--minutes N] [--recording FILE]`: just the echo figures (README's, with
// --minutes 10). `--recording`: replay the room recording kept in FILE (JSON), or record it
// there first: the same echo again, to compare the cancellers' settings without re-recording.
let echoMinutes = args.firstIndex(of: "--minutes").flatMap { i in args.dropFirst(i - args.startIndex + 1).first.flatMap { Double($0) } } ?? 1
let echoRecording = args.firstIndex(of: "--recording").flatMap { i in args.dropFirst(i - args.startIndex + 1).first }
if args.contains("--echo-only") {
    try printFigures(try await echoFigures(minutes: echoMinutes, keptIn: echoRecording), digits: 2, baselineDigits: 2)
    exit(0)
}

// `--echo-check FILE…`: EchoRoomTests' figures on recordings kept by `--echo-only --recording`.
if let i = args.firstIndex(of: "--echo-check") {
    try echoCheck(files: Array(args[(i + 1)...]))
    exit(0)
}

// MARK: 1. Opus framing: our uplink pipeline (libopus packets muxed into Ogg pages, 20 ms frames
// in, ~100 ms pages out) vs a bare opus_encode loop over the same audio.

let speechText = "The quick brown fox jumps over the lazy dog. Voice nodes should answer quickly and clearly, every time."
let raw = try SpeechSynthesizer.synthesize(speechText + " " + speechText + " " + speechText, settings: VoiceSettings())
let speech = try Resampler.convert(raw.mono(), toRateHz: 16_000)
let frameCount = speech.samples.count / 320
note("speech: \(String(format: "%.1f", speech.durationMilliseconds / 1000)) s, \(frameCount) frames")

func bareLibopus() -> (Duration, Int) {
    var error: Int32 = 0
    let enc = opus_encoder_create(16_000, 1, OPUS_APPLICATION_VOIP, &error)!
    defer { opus_encoder_destroy(enc) }
    _ = cv_opus_set_bitrate(enc, 20_000)
    _ = cv_opus_set_complexity(enc, 5)
    var out = [UInt8](repeating: 0, count: 1500)
    var total = 0
    let start = ContinuousClock.now
    speech.samples.withUnsafeBufferPointer { pcm in
        for f in 0..<frameCount {
            total += Int(opus_encode(enc, pcm.baseAddress! + f * 320, 320, &out, Int32(out.count)))
        }
    }
    return (ContinuousClock.now - start, total)
}

func pipeline() throws -> (Duration, Int) {
    let writer = try OggOpusPacketWriter(sampleRateHz: 16_000, channels: 1, bitrate: 20_000, complexity: 5)
    var total = 0
    let start = ContinuousClock.now
    for f in 0..<frameCount {
        total += try writer.append(Array(speech.samples[f * 320..<(f + 1) * 320])).count
    }
    total += try writer.finish().count
    return (ContinuousClock.now - start, total)
}

var bare: [Double] = [], ours: [Double] = []
var bareBytes = 0, ourBytes = 0
for _ in 0..<max(rounds, 3) {
    // Interleaved, so drift in machine load hits both alike.
    let (b, bb) = bareLibopus(); bare.append(ms(b)); bareBytes = bb
    let (o, ob) = try pipeline(); ours.append(ms(o)); ourBytes = ob
}
let framingRatio = median(ours) / median(bare)
figures.append(Figure(name: "opus_framing", value: median(ours), unit: "ms", baseline: median(bare), ratio: framingRatio,
                      detail: "\(String(format: "%.1f", speech.durationMilliseconds / 1000)) s of speech, 20 kb/s, complexity 5; pipeline \(ourBytes) B (Ogg pages), bare \(bareBytes) B (packets); median of \(bare.count)"))

// MARK: 2. espeak-ng text → first sample, against a whole synthesis of the same text.

var firstChunk: [Double] = [], whole: [Double] = []
for _ in 0..<rounds {
    let t0 = ContinuousClock.now
    var first: Duration?
    try SpeechSynthesizer.synthesize(speechText, settings: VoiceSettings()) { _ in
        if first == nil { first = ContinuousClock.now - t0 }
        return true
    }
    firstChunk.append(ms(first ?? .zero))
    let t1 = ContinuousClock.now
    _ = try SpeechSynthesizer.synthesize(speechText, settings: VoiceSettings())
    whole.append(ms(ContinuousClock.now - t1))
}
figures.append(Figure(name: "espeak_first_sample", value: median(firstChunk), unit: "ms", baseline: median(whole),
                      ratio: median(firstChunk) / median(whole), detail: "streaming callback vs whole synthesis of a \(speechText.count)-character sentence"))

// MARK: 3–6. Live figures on a private PulseAudio and the loopback gateway.

// Stopped explicitly before exit(0) (a top-level defer never runs past exit); on an error or a
// signal the server's guardian stops it once this process is gone.
let pulse = try await PrivatePulseServer()
let (events, sink) = AsyncStream.makeStream(of: EventFrame.self)
// The loopback relay defaults to G.711 µ-law (what OpenClaw's relay takes); the README's live
// figures were measured on the Ogg Opus uplink, so the bench keeps naming Opus.
let rig = try await LoopbackOperator.connect(events: { sink.yield($0) }, configure: { $0.relay = .oggOpus })
let (gateway, session) = (rig.gateway, rig.session)
let gc = await gateway.configuration
let audio = LiveAudio(source: PrivatePulseServer.microphone, sink: PrivatePulseServer.speaker, server: pulse.server, log: .silent)
let speechOut = SpeechOutput(channel: session, sink: PulseSpeechSink(playback: audio.playback), config: SpeechConfig(), log: .silent)
var tc = TalkConfig()
tc.speakReplies = false
let talk = TalkController(channel: session, speech: speechOut, config: tc, log: .silent)
// The talk loop and its event pump are children of this group while the live figures run.
try await withThrowingDiscardingTaskGroup { group in
    group.addTask { await talk.run() }
    group.addTask { for await e in events { talk.handle(e) } }
    audio.start(feeding: talk)
    while audio.captureStatus != "running" { try await Task.sleep(for: .milliseconds(20)) }
    let micConn = PulseConnection(server: pulse.server, clientName: "bench-mic")
    let mic = PulsePlayback(connection: micConn, sink: PrivatePulseServer.microphoneSink)
    let short = try Resampler.convert(try SpeechSynthesizer.synthesize("hello there", settings: VoiceSettings()).mono(), toRateHz: 16_000)

    var startToFrame: [Double] = [], stopToLast: [Double] = []
    for _ in 0..<rounds {
        _ = try await talk.start()
        _ = try await mic.play(short)
        _ = await talk.stop()
        if let t = await talk.lastTiming {
            if let a = t.startToFirstFrame { startToFrame.append(ms(a)) }
            if let b = t.stopToLastUplinkCall { stopToLast.append(ms(b)) }
        }
    }
    figures.append(Figure(name: "ptt_start_to_first_frame", value: median(startToFrame), unit: "ms", baseline: 20, ratio: median(startToFrame) / 20,
                          detail: "talk.ptt.start to the first 20 ms frame in the capture (baseline: one frame period); median of \(startToFrame.count)"))
    figures.append(Figure(name: "ptt_stop_to_last_uplink_call", value: median(stopToLast), unit: "ms", baseline: nil, ratio: nil,
                          detail: "stop to the last talk.session.appendAudio leaving; median of \(stopToLast.count)"))

    // Speaker monitor: frames stamped as they arrive from PulseAudio, 5 ms at a time (issue 25: in
    // 20 ms fragments the first wholly silent fragment arrives 20 ms after the silence began at the
    // earliest, so the monitor's fragment was most of what stop → silence measured).
    let tapFrameMs = 5
    let tapConn = PulseConnection(server: pulse.server, clientName: "bench-tap")
    let tap = PulseCapture(connection: tapConn, source: PrivatePulseServer.speaker + ".monitor", frameMilliseconds: tapFrameMs, bufferedFrames: 2_000)
    let heard = Locked<[(ContinuousClock.Instant, Double)]>([])
    // Straight from PulseAudio's thread: no task reads the tap.
    tap.onFrame = { f in heard.withLock { $0.append((f.receivedAt, f.pcm.rms)) } }
    try await tap.start()
    func firstLoud(after t: ContinuousClock.Instant) -> ContinuousClock.Instant? { heard.withLock { $0.first { $0.0 > t && $0.1 > 0.01 }?.0 } }
    func firstQuietRun(after t: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        heard.withLock { h in
            let after = h.filter { $0.0 > t }
            // 200 ms of silent frames in a row (ten frames of 20 ms before).
            let run = 200 / tapFrameMs
            for (i, f) in after.enumerated() where f.1 < 0.005 && after.dropFirst(i).prefix(run).allSatisfy({ $0.1 < 0.005 }) { return f.0 }
            return nil
        }
    }

    // Clip arrival → first sample at the monitor, against the monitor path's own latency (a tone played directly).
    let clip = try ClipDecoder.decode(PCMBuffer(format: AudioFormat(sampleRateHz: 24_000, channels: 1), samples: try Resampler.convert(raw.mono(), toRateHz: 24_000).samples).bytes,
                                      outputFormat: "pcm_24000", mimeType: nil, fileExtension: nil)
    let playback = audio.playback
    var clipToSound: [Double] = [], stopToSilence: [Double] = []
    for _ in 0..<rounds {
        try await Task.sleep(for: .milliseconds(300))
        let arrived = ContinuousClock.now
        let bytes = PCMBuffer(format: clip.format, samples: clip.samples).bytes  // the clip as it comes off the wire
        let decoded = try ClipDecoder.decode(bytes, outputFormat: "pcm_24000", mimeType: nil, fileExtension: nil)
        async let playing = playback.play(decoded)
        while firstLoud(after: arrived) == nil && ContinuousClock.now - arrived < .seconds(3) { try await Task.sleep(for: .milliseconds(5)) }
        if let loud = firstLoud(after: arrived) { clipToSound.append(ms(loud - arrived)) }
        try await Task.sleep(for: .milliseconds(400))
        let stopAt = ContinuousClock.now
        await speechOut.stop()
        playback.stop()
        _ = try? await playing
        try await Task.sleep(for: .milliseconds(400))
        if let quiet = firstQuietRun(after: stopAt) { stopToSilence.append(ms(quiet - stopAt)) }
    }
    // Session switch → silence: a reply is speaking, the session changes.
    var switchToSilence: [Double] = []
    for _ in 0..<rounds {
        let text = "This reply keeps talking for a good while so that a session switch can cut it short in the middle."
        async let speaking = speechOut.speak(text, route: .local)
        let t0 = ContinuousClock.now
        while firstLoud(after: t0) == nil && ContinuousClock.now - t0 < .seconds(5) { try await Task.sleep(for: .milliseconds(5)) }
        try await Task.sleep(for: .milliseconds(300))
        let at = ContinuousClock.now
        await talk.switchSession(to: "agent:main:bench-\(UUID().uuidString.prefix(4))")
        _ = await speaking
        try await Task.sleep(for: .milliseconds(400))
        if let quiet = firstQuietRun(after: at) { switchToSilence.append(ms(quiet - at)) }
    }
    figures.append(Figure(name: "session_switch_to_silence", value: median(switchToSilence), unit: "ms", baseline: 15, ratio: median(switchToSilence) / 15,
                          detail: "session switch while speaking → first monitor frame (\(tapFrameMs) ms) of 200 ms of silence (goal ≤ 15 ms); median of \(switchToSilence.count)"))

    // End of the user's speech → first reply audio, minus what the gateway itself spends
    // (relay transcript, the echo agent's delta delay, talk.speak synthesis), and minus the
    // silence timeout that by design waits out the end of speech.
    var tc2 = TalkConfig()
    tc2.silenceTimeoutMs = 900
    await talk.update(config: tc2)
    var turnOverhead: [Double] = [], turnTotal: [Double] = []
    for _ in 0..<rounds {
        await gateway.supplyTranscript("What time is it?")
        let before = await gateway.serviceTimes()
        async let once = talk.once()
        try await Task.sleep(for: .milliseconds(150))
        _ = try await mic.play(short)
        let speechEnded = ContinuousClock.now
        _ = try await once
        while firstLoud(after: speechEnded + .milliseconds(tc2.silenceTimeoutMs)) == nil && ContinuousClock.now - speechEnded < .seconds(15) {
            try await Task.sleep(for: .milliseconds(5))
        }
        guard let loud = firstLoud(after: speechEnded + .milliseconds(tc2.silenceTimeoutMs)) else { continue }
        let after = await gateway.serviceTimes()
        let gatewayMs = after - before + Double(gc.echoDeltaDelayMs)
        let total = ms(loud - speechEnded)
        turnTotal.append(total)
        turnOverhead.append(total - Double(tc2.silenceTimeoutMs) - gatewayMs)
        await speechOut.stop()
        try await Task.sleep(for: .milliseconds(300))
    }
    figures.append(Figure(name: "speech_end_to_first_reply_audio", value: median(turnOverhead), unit: "ms", baseline: median(turnTotal), ratio: nil,
                          detail: "our own overhead from the end of speech to the first reply sample at the monitor (baseline column: the whole time, incl. the 900 ms silence timeout and the loopback's own time); median of \(turnOverhead.count)"))

    figures.append(Figure(name: "clip_arrival_to_first_sample", value: median(clipToSound), unit: "ms", baseline: nil, ratio: nil,
                          detail: "pcm_24000 clip bytes in hand → first audible \(tapFrameMs) ms frame captured from the speaker monitor (includes the monitor capture's own latency); median of \(clipToSound.count)"))
    figures.append(Figure(name: "stop_to_silence", value: median(stopToSilence), unit: "ms", baseline: 50, ratio: median(stopToSilence) / 50,
                          detail: "stop request → first monitor frame (\(tapFrameMs) ms) of 200 ms of silence (goal ≤ 50 ms); median of \(stopToSilence.count)"))

    tap.stop()
    audio.stop()
    group.cancelAll()
    await rig.close()
    micConn.close()
    tapConn.close()
}

// `--live-only`: the live figures above alone (opus, espeak, push-to-talk, playback, stop, switch).
if !args.contains("--live-only") {
    // The outbox: enqueue → chat.send, and turns per second against raw chat.send on the same session.
    if let o = try? await OutboxBench.measure(turns: 40) {
        figures.append(Figure(name: "outbox_enqueue_to_send", value: o.enqueueToSendMs, unit: "ms", baseline: nil, ratio: nil,
                              detail: "durable enqueue (SQLite commit) → chat.send leaving; median of 40; confirmation via chat.history: \(String(format: "%.1f", o.enqueueToConfirmMs)) ms"))
        figures.append(Figure(name: "outbox_throughput", value: o.turnsPerSecond, unit: "turns/s", baseline: o.rawTurnsPerSecond,
                              ratio: o.turnsPerSecond / max(o.rawTurnsPerSecond, 0.001),
                              detail: "in-order delivery with history confirmation vs raw chat.send requests over the same session"))
    }

    // The daemon from the outside (issue 25): idle CPU and RSS, memory over push-to-talk turns.
    do {
        figures += try await idleFigures(seconds: idleSeconds, pulse: pulse)
        figures += try await pttCycleFigures(cycles: pttCycles ?? 1000, pulse: pulse)
    } catch {
        note("daemon figures: \(error)")
    }

    // End of speech (issue 25): the window and the end-of-turn model, tables on stderr.
    if let e = try? endpointTable(sentences: sentencesArg ?? 300, print: note) { figures += e }

    figures += wakeFigures()
    if let echo = try? await echoFigures(minutes: echoMinutes) { figures += echo }

}

let machine = "\(ProcessInfo.processInfo.activeProcessorCount) cores, \(ProcessInfo.processInfo.physicalMemory >> 30) GiB, \(ProcessInfo.processInfo.operatingSystemVersionString)"
if json {
    let out: [String: JSONValue] = ["machine": .string(machine), "rounds": .number(Double(rounds)),
                                    "figures": try JSONValue(encoding: figures)]
    print(try JSONCoding.string(JSONValue.object(out)))
} else {
    print("clawvoice-bench on \(machine)")
    for f in figures {
        let base = f.baseline.map { String(format: "  baseline %.2f %@", $0, f.unit) } ?? ""
        let ratio = f.ratio.map { String(format: "  ratio %.2f×", $0) } ?? ""
        print(String(format: "%-32@ %9.2f %@", f.name, f.value, f.unit) + base + ratio)
        print("    " + f.detail)
    }
}
pulse.stop()
exit(0)
