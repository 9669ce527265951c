// The loopback room (issue 14's measurements, for the tests and clawvoice-bench): PulseAudio's
// module-loopback plays the speaker's monitor back into the microphone sink, delayed and
// attenuated as a room gives a loudspeaker back. `EchoRoom.record` plays the assistant's speech
// through it once, in real time, and keeps what the microphone heard with each frame's timing;
// `RoomRecording`'s replays then run that echo offline, faster than real time, through the
// capture's own echo canceller (CaptureCleaner), TalkMachine's barge-in rule and the wake
// detector, with the reference timed as the live node times it.

import Audio
import AudioFrontEnd
public import ClawvoiceCore
import Foundation
import Talk
import GatewayClient
import GatewayProtocol
public import WakeWord

/// A module-loopback from `source` into `sink` on one PulseAudio server.
public struct LoopbackRoom: Sendable {
    public let server: String
    public let module: String

    /// Loads the loop (`latencyMs` of delay, its stream at `volumePercent`).
    public static func load(server: String, source: String = "cv_speaker.monitor", sink: String = "cv_mic",
                            latencyMs: Int = 40, volumePercent: Int = 70) throws -> LoopbackRoom {
        let index = try pactl(server, ["load-module", "module-loopback", "source=\(source)", "sink=\(sink)",
                                       "latency_msec=\(latencyMs)", "adjust_time=0", "source_dont_move=true", "sink_dont_move=true"])
        guard !index.isEmpty else { throw RoomError(description: "pactl load-module module-loopback printed no index") }
        let room = LoopbackRoom(server: server, module: index)
        // A room gives the speaker back quieter than it plays (70 % is about −9 dB).
        let stream = try room.sinkInput()
        _ = try pactl(server, ["set-sink-input-volume", stream, "\(volumePercent)%"])
        return room
    }

    /// The loop's sink input (`pactl list short sink-inputs`: index, sink, client, driver, …).
    func sinkInput() throws -> String {
        for _ in 0..<40 {
            let text = try Self.pactl(server, ["list", "short", "sink-inputs"])
            for line in text.split(separator: "\n") {
                let cols = line.split(separator: "\t")
                if cols.count > 3 && cols[3].hasPrefix("module-loopback") { return String(cols[0]) }
            }
            usleep(50_000)
        }
        throw RoomError(description: "the loopback module \(module) has no sink input")
    }

    public func unload() { _ = try? Self.pactl(server, ["unload-module", module]) }

    @discardableResult
    static func pactl(_ server: String, _ args: [String]) throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/pactl")
        p.arguments = ["-s", server] + args
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw RoomError(description: "pactl \(args.joined(separator: " ")) failed") }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

public struct RoomError: Error, CustomStringConvertible { public var description: String }

/// What the microphone heard while the speaker played `far` once through the room.
public struct RoomRecording: Sendable, Codable {
    /// What was played, 16 kHz mono: the canceller's reference.
    public var far: [Int16]
    /// The microphone, 20 ms frames back to back, from just before the playback to after it.
    public var mic: [Int16]
    /// Per frame, where its last sample falls in `far` (a sample index; negative: before it)
    /// by the timing the node used before alignment: the clip handed over → frame received.
    public var frameEndsHanded: [Int]
    /// The same by PulseAudio's timing info: the clip's first sample heard → frame recorded.
    public var frameEndsTimed: [Int]
    /// From handing the clip over to its first sample heard (PlaybackTiming), and from a
    /// frame's recording to its reception, each a median over the playback, milliseconds.
    public var playbackLatencyMs: Double
    public var captureLatencyMs: Double
    /// Audio the capture lost: wall-clock time it spanned less the frames it delivered.
    public var lostMs: Double = 0

    /// A run the machine's load disturbed (the stream took over 400 ms to start, or the
    /// capture lost more than 100 ms): it measures the load rather than the canceller.
    public var disturbed: Bool { playbackLatencyMs > 400 || lostMs > 100 }

    public static let frameSamples = 320

    /// The same room with the speaker silent: digital silence at the microphone, nothing played.
    public var silent: RoomRecording {
        RoomRecording(far: [], mic: [Int16](repeating: 0, count: mic.count), frameEndsHanded: frameEndsHanded,
                      frameEndsTimed: frameEndsTimed, playbackLatencyMs: playbackLatencyMs, captureLatencyMs: captureLatencyMs, lostMs: lostMs)
    }

    public var frames: Int { mic.count / Self.frameSamples }

    /// The reference for each frame, kept continuous as the live cleaner keeps it (ReferenceCursor).
    public func references(timed: Bool) -> [[Int16]] {
        var cursor = ReferenceCursor()
        var clock = FrameClock()
        return (0..<frames).map { i in
            let observed = (timed ? frameEndsTimed : frameEndsHanded)[i]
            let end = timed ? clock.end(observed: observed, count: Self.frameSamples) : observed
            return reference(end: cursor.end(target: end, clip: 0, count: Self.frameSamples))
        }
    }

    func reference(end: Int) -> [Int16] {
        var out = [Int16](repeating: 0, count: Self.frameSamples)
        for k in 0..<Self.frameSamples {
            let j = end - Self.frameSamples + k
            if j >= 0 && j < far.count { out[k] = far[j] }
        }
        return out
    }

    /// Whether the speaker was playing during frame `i` (by PulseAudio's timing).
    public func speakerPlaying(frame i: Int) -> Bool {
        let end = frameEndsTimed[i]
        return end > 0 && end - Self.frameSamples < far.count
    }

    /// The microphone frames (plus `near`, added sample by sample as the microphone sink mixes
    /// two streams) cleaned by the capture's canceller. `timed`: the reference as aligned by
    /// PulseAudio's timing (the node's rule now), else as handed over (the rule before).
    public func cleaned(near: [Int16]? = nil, timed: Bool = true, delayMs: Int = 60, noiseSuppress: Bool = true) throws -> [Int16] {
        try cleanedPaths(near: near, timed: timed, delayMs: delayMs, noiseSuppress: noiseSuppress).uplink
    }

    func micFrame(_ i: Int, near: [Int16]?) -> [Int16] {
        var frame = Array(mic[i * Self.frameSamples..<(i + 1) * Self.frameSamples])
        if let near {
            for k in 0..<Self.frameSamples {
                let j = i * Self.frameSamples + k
                if j < near.count { frame[k] = Int16(clamping: Int(frame[k]) + Int(near[j])) }
            }
        }
        return frame
    }

    /// Echo return loss enhancement in dB: the echo's energy at the microphone over what is left
    /// of it after cleaning, over the frames where the speaker plays, after `convergeMs`.
    public func erle(cleaned out: [Int16], convergeMs: Int = 2_000) -> Double {
        var inE = 0.0, outE = 0.0
        let skip = convergeMs / 20
        var playing = 0
        for i in 0..<frames where speakerPlaying(frame: i) {
            playing += 1
            guard playing > skip else { continue }
            for k in i * Self.frameSamples..<(i + 1) * Self.frameSamples {
                inE += Double(mic[k]) * Double(mic[k])
                outE += Double(out[k]) * Double(out[k])
            }
        }
        return 10 * log10(max(inE, 1) / max(outE, 1))
    }

    /// Barge-ins TalkMachine decides on `out` (cleaned frames) while the speaker plays, with the
    /// settings of an echo-cancelled loudspeaker. A barge-in would stop the speaker; here the
    /// echo goes on, so every barge-in over the whole recording is counted.
    public func bargeIns(cleaned out: [Int16], settings: TalkMachine.Settings = Self.loudspeaker) -> Int {
        var m = TalkMachine(settings: settings)
        _ = m.handle(.microphone(.live), nowMs: 0)
        for i in 0..<frames {
            let frame = PCMBuffer(format: .voice, samples: Array(out[i * Self.frameSamples..<(i + 1) * Self.frameSamples]))
            let speaker = speakerPlaying(frame: i) ? SpeakerState(playing: true) : SpeakerState(playing: false, msSinceStopped: 10_000)
            _ = m.handle(.frame(frame, speaker: speaker), nowMs: Int64(i * 20))
        }
        return m.bargeIns
    }

    public static var loudspeaker: TalkMachine.Settings {
        var s = TalkMachine.Settings()
        s.echoCancelled = true
        return s
    }

    /// Plays `far` through the speaker sink of `server` once, in real time, and records the
    /// sink's monitor meanwhile with the node's capture: what PulseAudio really played, with the
    /// real timing of both streams. The room is then this file's own mixer, applied to the
    /// recorded stream: `roomDelayMs` later, `roomGainDb` quieter, its treble and bass taken
    /// off as a small speaker and a room do. (PulseAudio's module-loopback drifts by up to 250 ms
    /// within 30 s on a busy machine, which no real room does; LoopbackRoom is kept for the live
    /// tests, where only the node's own behaviour is judged.)
    public static func record(far pcm: PCMBuffer, server: String, speakerSink: String = "cv_speaker",
                              roomDelayMs: Int = 40, roomGainDb: Double = -9) async throws -> RoomRecording {
        let microphone = speakerSink + ".monitor"
        let far = try Resampler.convert(pcm.mono(), toRateHz: 16_000).samples
        let conn = PulseConnection(server: server, clientName: "clawvoice-room")
        defer { conn.close() }
        let capture = PulseCapture(connection: conn, source: microphone)
        try await capture.start()
        let frames = Locked<[CapturedFrame]>([])
        async let reading: Void = { for await f in capture.frames { frames.withLock { $0.append(f) } } }()
        try await Task.sleep(for: .milliseconds(500))
        let playback = PulsePlayback(connection: conn, sink: speakerSink)
        let handedAt = ContinuousClock.now
        let done = Locked(false)
        async let playing = {
            defer { done.withLock { $0 = true } }
            return try await playback.play(PCMBuffer(format: .voice, samples: far), timeout: .seconds(10))
        }()
        // As the live sink does: PulseAudio's timing every 100 ms says when the clip started (an
        // underrun moves it later), and the frames after each reading follow it.
        var starts: [(at: ContinuousClock.Instant, start: ContinuousClock.Instant)] = []
        while !done.withLock({ $0 }) {
            try await Task.sleep(for: .milliseconds(100))
            if let t = playback.timing(), t.positionMicroseconds > 0 { starts.append((t.at, t.startedAt)) }
        }
        _ = try await playing
        try await Task.sleep(for: .milliseconds(600))
        capture.stop()
        await reading
        guard !starts.isEmpty else { throw RoomError(description: "PulseAudio reported no timing for the playback stream") }
        let offsets = starts.map { $0.start - handedAt }.sorted()
        let offset = offsets[offsets.count / 2]
        func heardAt(_ t: ContinuousClock.Instant) -> ContinuousClock.Instant {
            (starts.last { $0.at <= t } ?? starts[0]).start
        }
        let all = frames.withLock { $0 }.filter { $0.receivedAt >= handedAt - .milliseconds(300) }
        func index(_ d: Duration) -> Int {
            let seconds: Double = Double(d.components.seconds) + Double(d.components.attoseconds) * 1e-18
            return Int(seconds * 16_000)
        }
        var heard: [Int16] = [], handed: [Int] = [], timed: [Int] = [], capLat: [Double] = []
        for f in all {
            heard += f.pcm.samples
            handed.append(index(f.receivedAt - handedAt))
            timed.append(index(f.recordedAt - heardAt(f.recordedAt)))
            capLat.append(Double(index(f.receivedAt - f.recordedAt)) / 16)
        }
        let mic = room(heard, delayMs: roomDelayMs, gainDb: roomGainDb)
        let spanMs = all.count > 1 ? Double(index(all.last!.recordedAt - all.first!.recordedAt)) / 16 + 20 : 0
        return RoomRecording(far: far, mic: mic, frameEndsHanded: handed, frameEndsTimed: timed,
                             playbackLatencyMs: Double(index(offset)) / 16, captureLatencyMs: capLat.sorted()[capLat.count / 2],
                             lostMs: max(0, spanMs - Double(all.count * 20)))
    }

    /// The room's path from the speaker to the microphone: a delay, a gain, a one-pole low-pass
    /// at about 3.4 kHz and a high-pass at about 150 Hz.
    static func room(_ x: [Int16], delayMs: Int, gainDb: Double) -> [Int16] {
        let d = delayMs * 16
        let g = pow(10, gainDb / 20)
        let a = exp(-2 * Double.pi * 3_400 / 16_000), h = exp(-2 * Double.pi * 150 / 16_000)
        var lp = 0.0, hpIn = 0.0, hpOut = 0.0
        var out = [Int16](repeating: 0, count: x.count)
        for n in 0..<x.count {
            let v = n >= d ? Double(x[n - d]) : 0
            lp = (1 - a) * v + a * lp
            hpOut = h * (hpOut + lp - hpIn)
            hpIn = lp
            out[n] = Int16(clamping: Int((g * hpOut).rounded()))
        }
        return out
    }
}

/// Wake detection over a cleaned stream: which of the clips placed in it were heard.
public enum RoomWake {
    /// Detections of `phrase` per clip: clip `k` occupies `[starts[k], starts[k] + lengths[k])`;
    /// it is heard when a wake for the phrase lands within it or 1 s after.
    public static func heard(_ stream: [Int16], detector: WakeDetector, phrase: String, starts: [Int], lengths: [Int]) -> [Bool] {
        detector.reset()
        var dets: [WakeDetection] = []
        var i = 0
        while i < stream.count {
            let n = min(1_280, stream.count - i)
            dets += detector.process(Array(stream[i..<i + n]))
            i += n
        }
        return zip(starts, lengths).map { s, l in
            dets.contains { $0.phrase == phrase && $0.ms * 16 >= s && $0.ms * 16 <= s + l + 16_000 }
        }
    }
}

/// Speech for the loopback room: the assistant (espeak-ng, varied voices) and held-out users (flite awb/rms).
public enum RoomSpeech {
    static let replies = [
        "Here is the forecast for the whole week. Monday will be sunny and warm, and Tuesday brings clouds in the afternoon.",
        "I have added milk, eggs and two loaves of bread to your shopping list, and moved the dentist to Thursday at nine.",
        "The train to the city leaves at ten past eight from platform four. It is running about five minutes late today.",
        "Your timer for the pasta has eleven minutes left. Meanwhile, would you like me to read the next step of the recipe?",
        "In the news this morning: the council approved the new cycle lanes, and the library opens late on Fridays from next month.",
        "Sure. A quick way to cool a room at night is to open windows on opposite sides, so that the air can flow straight through.",
    ]
    /// Variants espeak-ng may lack fall back to en-us.
    static let voices = ["en-us", "en", "en-us+f3", "en+m3", "en-us+f2", "en+m7"]

    /// About `seconds` of the assistant: replies in turn, each voice, rate and pitch varied, short pauses between.
    public static func assistant(seconds: Double, seed: UInt64 = 7) throws -> PCMBuffer {
        var rng = SplitMix64(seed: seed)
        var out: [Int16] = []
        var k = 0
        while Double(out.count) < seconds * 16_000 {
            let v = VoiceSettings(voice: voices[k % voices.count], rateWpm: 150 + Int(rng.next() % 70), pitch: 35 + Int(rng.next() % 30))
            var fallback = v
            fallback.voice = "en-us"
            let s = try (try? SpeechSynthesizer.synthesize(replies[k % replies.count], settings: v))
                ?? SpeechSynthesizer.synthesize(replies[k % replies.count], settings: fallback)
            out += try Resampler.convert(s.mono(), toRateHz: 16_000).samples
            out += [Int16](repeating: 0, count: 4_000 + Int(rng.next() % 8_000))
            k += 1
        }
        return PCMBuffer(format: .voice, samples: Array(out.prefix(Int(seconds * 16_000))))
    }

    /// flite (held out from wake training: only awb and rms, only for evaluation) at 16 kHz.
    public static func flite(_ text: String, voice: String) throws -> [Int16] {
        let wav = NSTemporaryDirectory() + "cv-flite-\(UUID().uuidString.prefix(8)).wav"
        defer { try? FileManager.default.removeItem(atPath: wav) }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/flite")
        p.arguments = ["-voice", voice, "-t", text, "-o", wav]
        try p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0, let data = FileManager.default.contents(atPath: wav) else { throw RoomError(description: "flite -voice \(voice) failed (apt-get install flite)") }
        let pcm = try ClipDecoder.decode([UInt8](data), outputFormat: nil, mimeType: nil, fileExtension: "wav")
        return try Resampler.convert(pcm.mono(), toRateHz: 16_000).samples
    }

    /// `samples` scaled so that its active part has RMS `dbfs`.
    public static func level(_ samples: [Int16], dbfs: Double) -> [Int16] {
        let active = samples.filter { abs(Int($0)) > 300 }
        let rms = (active.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(max(active.count, 1))).squareRoot() / 32768
        let g = pow(10, dbfs / 20) / max(rms, 1e-6)
        return samples.map { Int16(clamping: Int((Double($0) * g).rounded())) }
    }
}


extension RoomSpeech {
    /// Held-out users (flite awb and rms in turn) saying `trigger` in short commands, one every
    /// few seconds from `firstAt` to the end of a stream of `samples`, at `dbfs` (active RMS).
    public static func wakeClips(trigger: String, samples: Int, dbfs: Double, firstAt: Int = 48_000)
        throws -> (near: [Int16], starts: [Int], lengths: [Int]) {
        let texts = ["\(trigger), what time is it", "\(trigger), stop the music", "hey \(trigger), turn on the lights",
                     "\(trigger), set a timer for ten minutes", "okay \(trigger), what is the weather", "\(trigger), call my sister"]
        var near = [Int16](repeating: 0, count: samples)
        var starts: [Int] = [], lengths: [Int] = []
        var at = firstAt
        var cache: [String: [Int16]] = [:]
        var i = 0
        while true {
            let key = "\(i % texts.count)-\(i % 2)"
            let clip = try cache[key] ?? level(flite(texts[i % texts.count], voice: i % 2 == 0 ? "awb" : "rms"), dbfs: dbfs)
            cache[key] = clip
            guard at + clip.count + 16_000 < samples else { break }
            for k in 0..<clip.count { near[at + k] = clip[k] }
            starts.append(at)
            lengths.append(clip.count)
            at += clip.count + 24_000 + (i % 3) * 8_000
            i += 1
        }
        return (near, starts, lengths)
    }
}
