// `clawvoice wake detect`: the wake detector over a WAV file, one JSON line per wake (and per
// step with --scores), for checking models and sweeping thresholds without a microphone; `wake
// listen` the same live; the `enroll` and `status` actions are WakeEnrollCommand's.

import Audio
import ClawvoiceCore
import Daemon
import Foundation
import GatewayClient
import GatewayCrypto
import GatewayProtocol
import NodeRuntime
import WakeWord

public enum WakeCommand {
    static let command = CLI.Command(name: "wake", abstract: "Check wake words (over a sound file, or live) and tune them to your voices (enroll).",
                usage: """
                clawvoice wake detect --input FILE.wav [--phrases a,b] [--scores] [--sensitivity 0..1] [--models DIR]
                       clawvoice wake listen [--source NAME] [--seconds N] [--phrases a,b] [--sensitivity 0..1] [--models DIR]
                       clawvoice wake enroll TRIGGER [--takes N] [--source NAME] [--wait SECONDS] [--models DIR]
                       clawvoice wake enroll TRIGGER --reset
                       clawvoice wake status [--phrases a,b] [--models DIR]
                """,
                details: """
                detect reads a sound file (WAV of any depth or float, FLAC, AIFF, Ogg Vorbis…: what libsndfile
                reads; 8-192 kHz, mono or stereo) and prints one JSON line per detection:
                {"phrase":"openclaw","ms":1234,"score":0.97}.
                listen captures from the microphone (PulseAudio), beside the daemon, and four times a second
                shows the input level and each phrase's highest score, a star at or over its threshold: on a
                terminal as a live bar redrawn in place, elsewhere as plain lines such as
                  level  -31 dBFS  openclaw 0.02  claude 0.91 *
                Each detection is the same JSON line as detect's. Ctrl-C (or --seconds) ends it.
                Try it to see how far away and how loud a wake still works.
                enroll teaches the node your household's voices for one trigger: it asks you to say the
                trigger 5 times (--takes), one take at a time, with a live level meter; each take is cut
                at your pause and checked (a silent, too quiet or clipped take is refused with what to do,
                and asked for again). The takes are kept in the state directory (wake-enroll/TRIGGER/), and
                from then on a trigger said in one of these voices also wakes the node when the model alone
                would have missed it (measured on two stand-in voices with five takes each: 20 % and 4 %
                fewer misses, while about an hour of other speech per stand-in woke it no more often
                than before; models/EVALUATION.md, "Enrollment").
                Say it as you would to wake the node: at your usual distance and voice. For several people,
                take turns in one run (--takes 10: five each); enrolling again replaces the earlier takes.
                The daemon uses the enrollment from its next start (`systemctl --user restart clawvoice`).
                enroll TRIGGER --reset removes the takes and the enrollment: the model alone again.
                status lists each trigger's model and whether it is enrolled. `wake detect` and `wake listen`
                use the enrollments too; with --scores, `near` is each enrolled trigger's similarity to the takes.
                Phrases default to the gateway's defaults (openclaw, claude, computer); a phrase without a
                trained model is named with the command that trains it: make wake-model TRIGGER="phrase".

                Options:
                  --input FILE.wav     detect: the recording to check
                  --scores             detect: also print every step's scores (every 80 ms), for threshold sweeps
                  --source NAME        listen, enroll: the PulseAudio source (default audio.source, else the default source)
                  --seconds N          listen: stop after N seconds
                  --phrases a,b        only these phrases
                  --sensitivity 0..1   0.5 uses each model's trained threshold; higher wakes more easily
                  --takes N            enroll: how many good takes to keep (default 5, 3-20)
                  --wait SECONDS       enroll: how long to wait for each take before asking again (default 8)
                  --reset              enroll: remove the trigger's takes and enrollment
                  --models DIR         where models are (default wake.modelsDirectory, CLAWVOICE_MODELS_DIR,
                                       share/clawvoice/models beside the binary, or models/ beside the build)
                """, flags: ["--input": true, "--phrases": true, "--scores": false, "--sensitivity": true, "--models": true,
                             "--source": true, "--seconds": true, "--takes": true, "--wait": true, "--reset": false],
                maxPositionals: 2)

    static func run(_ p: CLI.Parsed, config: ClawConfig, paths: RuntimePaths, log: LogSink, environment: [String: String]) async throws -> Int32 {
        let action = p.positionals.first ?? ""
        guard ["detect", "listen", "enroll", "status"].contains(action) else {
            throw CLI.UsageError(description: "wake: the action is `detect`, `listen`, `enroll` or `status` (see `clawvoice wake --help`)")
        }
        if action == "enroll" || action == "status" {
            return try await WakeEnrollCommand.run(action, p, config: config, paths: paths)
        }
        guard p.positionals.count == 1 else { throw CLI.UsageError(description: "wake \(action) takes no \(p.positionals[1])") }
        let phrases = p.flags["--phrases"].map { $0.split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty } }
        var sensitivity = 0.5
        if let s = p.flags["--sensitivity"] {
            guard let v = Double(s), (0...1).contains(v) else { throw CLI.UsageError(description: "wake \(action): --sensitivity needs a number from 0 to 1, got \(s)") }
            sensitivity = v
        }
        let models = p.flags["--models"] ?? config.wake.modelsDirectory ?? WakeModelCatalog.defaultDirectory()
        if action == "listen" {
            var seconds: Double?
            if let s = p.flags["--seconds"] {
                guard let v = Double(s), v > 0 else { throw CLI.UsageError(description: "wake listen: --seconds needs a positive number, got \(s)") }
                seconds = v
            }
            return try await WakeCommand.listen(phrases: phrases, modelsDirectory: models, sensitivity: sensitivity, stateDir: paths.stateDir,
                                                source: p.flags["--source"] ?? config.audio.source, seconds: seconds,
                                                terminal: isatty(STDOUT_FILENO) == 1, say: { CLI.say($0) })
        }
        guard let input = p.flags["--input"] else { throw CLI.UsageError(description: "wake detect needs --input FILE.wav") }
        return try WakeCommand.detect(input: input, phrases: phrases, scores: p.flags["--scores"] != nil,
                                      modelsDirectory: models, sensitivity: sensitivity, stateDir: paths.stateDir, say: { CLI.say($0) })
    }

    /// One line for a file the command cannot use.
    public struct InputError: Error, CustomStringConvertible {
        public var description: String
    }

    /// Runs the detector over `input` and prints `{"phrase","ms","score"}` per wake through
    /// `say`. With `scores`, every 80 ms step also prints `{"ms":…,"scores":{"<phrase>":…}}`.
    /// Phrases default to the gateway's defaults; phrases without a model are reported on
    /// stderr with the command that trains them, and if none has a model it throws.
    ///
    /// - Parameters:
    ///   - input: a sound file libsndfile reads (WAV of any depth or float, FLAC, AIFF, Ogg Vorbis…),
    ///     8–192 kHz, mono or stereo (downmixed and resampled to 16 kHz mono as it is read, block by block).
    ///   - sensitivity: 0…1; 0.5 uses each model's trained threshold.
    /// - Returns: the exit status (0).
    public static func detect(input: String, phrases: [String]?, scores: Bool, modelsDirectory: String,
                              sensitivity: Double, stateDir: String? = nil, say: @Sendable (String) -> Void) throws -> Int32 {
        try withoutActuallyEscaping(say) { say in
            try run(input: input, phrases: phrases, scores: scores, modelsDirectory: modelsDirectory, sensitivity: sensitivity,
                    stateDir: stateDir, say: say)
        }
    }

    /// Gives `detector` the enrollments kept under `stateDir` (`wake enroll`), saying on stderr
    /// which are used and why any is not.
    static func useEnrollments(_ detector: WakeDetector, stateDir: String?) {
        guard let stateDir else { return }
        let (list, problems) = WakeEnrollmentStore(stateDir: stateDir).enrollments(for: detector.models)
        for line in problems + detector.enroll(list) { FileHandle.standardError.write(Data("clawvoice: \(line)\n".utf8)) }
        for (i, e) in detector.enrollments.enumerated() {
            guard let e else { continue }
            FileHandle.standardError.write(Data("clawvoice: \(detector.models[i].phrase) is enrolled (\(e.templates.count) takes in \(WakeEnrollmentStore(stateDir: stateDir).triggerDirectory(e.phrase)))\n".utf8))
        }
    }

    private static func run(input: String, phrases: [String]?, scores: Bool, modelsDirectory: String,
                            sensitivity: Double, stateDir: String?, say: @escaping @Sendable (String) -> Void) throws -> Int32 {
        guard (0...1).contains(sensitivity) else {
            throw InputError(description: "--sensitivity must be between 0 and 1, got \(sensitivity)")
        }
        let wanted = phrases ?? WakeModelCatalog.defaultPhrases
        let (models, missing) = try WakeModelCatalog(directory: modelsDirectory).load(wanted)
        guard !models.isEmpty else { throw WakeWordError.noModels(missing) }
        for m in missing { FileHandle.standardError.write(Data("clawvoice: \(m)\n".utf8)) }

        // Streamed: the header is checked before any audio is read, then blocks of ~0.3 s are
        // downmixed, resampled and fed, so a long file costs one block of memory.
        let reader: SoundFileReader
        do { reader = try SoundFileReader(path: input, rates: Self.inputRates) } catch {
            let why: String
            switch error {
            case .empty: why = "the file is empty"
            case .unsupported(let what): why = what
            case .corrupt(_, let reason): why = reason
            case .headerless(let label): why = "headerless audio (\(label))"
            }
            throw InputError(description: "cannot use \(input): \(why)")
        }
        let rate = reader.format.sampleRateHz, channels = reader.format.channels
        let resampler: Resampler?
        do { resampler = rate == 16_000 ? nil : try Resampler(from: rate, to: 16_000, channels: 1) } catch {
            throw InputError(description: "cannot use \(input): \(error)")
        }
        let detector = WakeDetector(models: models, sensitivity: sensitivity)
        useEnrollments(detector, stateDir: stateDir)
        let names = models.map { jsonString($0.phrase) }
        let onScores: ((WakeDetector.StepScores) -> Void)? = scores ? { step in
            var line = "{\"ms\":\(step.ms),\"scores\":{"
            for (i, s) in step.scores.enumerated() {
                if i > 0 { line += "," }
                line += names[i] + ":" + String(format: "%.5f", s)
            }
            let near = step.nearest.enumerated().compactMap { i, v in v.map { names[i] + ":" + String(format: "%.4f", $0) } }
            say(line + "}" + (near.isEmpty ? "" : ",\"near\":{" + near.joined(separator: ",") + "}") + "}")
        } : nil
        func feed(_ voice: [Int16]) {
            // In 20 ms pieces, as the capture delivers them, so the file path is the streaming path.
            voice.withUnsafeBufferPointer { buf in
                var offset = 0
                while offset < buf.count {
                    let end = min(offset + 320, buf.count)
                    for d in detector.process(UnsafeBufferPointer(rebasing: buf[offset..<end]), onScores: onScores) { say(detectionLine(d)) }
                    offset = end
                }
            }
        }
        while true {
            let block = reader.next(frames: max(rate / 3, 1))
            if block.isEmpty { break }
            let mono: [Int16] = channels == 1 ? block : stride(from: 0, to: block.count - 1, by: 2).map { (i: Int) -> Int16 in
                Int16((Int32(block[i]) + Int32(block[i + 1])) / 2)
            }
            feed(resampler?.process(mono) ?? mono)
        }
        if let resampler { feed(resampler.flush()) }
        for d in detector.finish() {
            say(detectionLine(d))
        }
        return 0
    }

    /// `clawvoice wake listen`: live scores from the microphone (PulseAudio, 16 kHz mono).
    /// Every `intervalMilliseconds` prints one reading (WakeMeter): the input's peak level and
    /// each phrase's highest score since the last one (`level  -31 dBFS  openclaw 0.02  claude
    /// 0.91 *`, a star at or over threshold); on a `terminal` the level is a bar and each reading
    /// replaces the last in place. Each wake is the same JSON line `detect` prints. Runs for
    /// `seconds`, or until the capture ends when nil.
    public static func listen(phrases: [String]?, modelsDirectory: String, sensitivity: Double, stateDir: String? = nil, source: String?,
                              seconds: Double?, intervalMilliseconds: Int = 250, server: String? = nil, terminal: Bool = false,
                              say: @escaping @Sendable (String) -> Void) async throws -> Int32 {
        guard (0...1).contains(sensitivity) else {
            throw InputError(description: "--sensitivity must be between 0 and 1, got \(sensitivity)")
        }
        let (models, missing) = try WakeModelCatalog(directory: modelsDirectory).load(phrases ?? WakeModelCatalog.defaultPhrases)
        guard !models.isEmpty else { throw WakeWordError.noModels(missing) }
        for m in missing { FileHandle.standardError.write(Data("clawvoice: \(m)\n".utf8)) }
        let connection = PulseConnection(server: server, clientName: "clawvoice-wake")
        defer { connection.close() }
        do {
            try await connection.waitUntilReady()
        } catch {
            throw InputError(description: "no sound server: \(error) (is PulseAudio or pipewire-pulse running? PULSE_SERVER=\(ProcessInfo.processInfo.environment["PULSE_SERVER"] ?? "unset"))")
        }
        let capture = PulseCapture(connection: connection, source: source)
        do {
            try await capture.start()
        } catch {
            throw InputError(description: "cannot capture from \(source ?? "the default source"): \(error) (`clawvoice audio devices` lists sources)")
        }
        defer { capture.stop() }
        // The capture rides out a sound-server restart by itself; say so rather than go quiet.
        capture.onStatusChange = { status in
            FileHandle.standardError.write(Data("clawvoice: microphone \(status)\n".utf8))
        }
        FileHandle.standardError.write(Data("clawvoice: listening for \(models.map(\.phrase).joined(separator: ", ")) on \(source ?? "the default source"); Ctrl-C ends\n".utf8))
        let detector = WakeDetector(models: models, sensitivity: sensitivity)
        useEnrollments(detector, stateDir: stateDir)
        let thresholds = detector.thresholds
        let names = models.map(\.phrase)
        var peak = [Float](repeating: 0, count: models.count)
        var window: [Int16] = []
        var lastLine = 0
        // On a terminal the reading is redrawn in place without a newline: written as it is.
        let emit: (String) -> Void = { text in
            if terminal { FileHandle.standardOutput.write(Data(text.utf8)) } else { say(text) }
        }
        defer { if terminal { FileHandle.standardOutput.write(Data("\n".utf8)) } }
        let limitMs = seconds.map { Int($0 * 1000) }
        for await frame in capture.frames {
            // Audio on either side of a capture gap was never continuous: start a fresh stream.
            if frame.followsGap { detector.reset() }
            let found = try detector.process(frame.pcm) { step in
                for i in 0..<peak.count { peak[i] = max(peak[i], step.scores[i]) }
            }
            for d in found {
                emit(WakeMeter.detection(detectionLine(d), terminal: terminal))
            }
            window += frame.pcm.samples
            let now = detector.positionMilliseconds
            if now - lastLine >= intervalMilliseconds {
                let level = WakeMeter.level(window[...])
                emit(WakeMeter.line(peakDbfs: level.peakDbfs, clipped: level.clipped, phrases: names, scores: peak,
                                    thresholds: thresholds, terminal: terminal))
                peak = [Float](repeating: 0, count: models.count)
                window.removeAll(keepingCapacity: true)
                lastLine = now
            }
            if let limitMs, now >= limitMs { return 0 }
        }
        // The stream ends only when the capture does (the sound server went away, or the source did).
        throw InputError(description: "the microphone stopped (\(capture.status))")
    }

    /// Sample rates `wake detect` reads; anything else is refused with one line before any audio
    /// is read (a header claiming 1 Hz would otherwise mean a huge resampling job).
    public static let inputRates = 8_000...192_000

    /// A string as JSON, quotes and escapes included.
    static func jsonString(_ s: String) -> String { JSONValue.string(s).description }

    /// The line printed for each wake: `{"phrase":…,"ms":…,"score":…}`, keys in that order.
    static func detectionLine(_ d: WakeDetection) -> String {
        "{\"phrase\":\(jsonString(d.phrase)),\"ms\":\(d.ms),\"score\":\(String(format: "%.4f", d.score))}"
    }
}
