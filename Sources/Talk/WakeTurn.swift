// Wake word → talk turn: WakeListener keeps a WakeDetector for the gateway's current trigger
// list (voicewake.get / voicewake.changed), the trigger → session routing
// (voicewake.routing.*), the triggers that have no model (with the command that trains them),
// and a 1.5 s lookback so a wake capture starts with the trigger itself. TalkController feeds
// it microphone frames while nothing else is capturing or speaking and turns a detection into
// a `.wake` capture (talk-and-voice.md §4).

import Audio
public import ClawvoiceCore
import Foundation
public import GatewayProtocol
public import WakeWord

/// What plays when a wake word is heard (config `wake.chime`: true, false, or a sound file).
public enum WakeChime: Sendable, Equatable {
    case off
    /// Two short generated tones (WakeListener.chime()).
    case generated
    /// A sound file of the user's: MP3, Ogg Opus, or anything libsndfile reads (WAV of any depth, FLAC…).
    case file(String)

    /// The sound to play, nil for `.off`. A file that cannot be read or decoded is one line in
    /// `problem` and the generated chime plays instead: a broken file never silences the cue.
    public func sound() -> (pcm: PCMBuffer?, problem: String?) {
        switch self {
        case .off: return (nil, nil)
        case .generated: return (WakeListener.chime(), nil)
        case .file(let path):
            do { return (try Self.decode(path), nil) } catch {
                return (WakeListener.chime(), "\(error); playing the generated chime instead")
            }
        }
    }

    public struct FileError: Error, CustomStringConvertible { public var description: String }

    /// Decodes a chime file (by extension and content), refusing anything longer than 3 s.
    public static func decode(_ path: String) throws(FileError) -> PCMBuffer {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw FileError(description: "wake chime \(path): no such file or not readable")
        }
        let pcm: PCMBuffer
        do {
            pcm = try ClipDecoder.decode([UInt8](data), outputFormat: nil, mimeType: nil,
                                         fileExtension: (path as NSString).pathExtension)
        } catch {
            // What the clip decoder refuses (24-bit or float WAV, FLAC, AIFF…) libsndfile may read;
            // when it cannot either, the clip decoder's reason is the one shown. (A minute at most is
            // read; the length check below then says how long it is.)
            guard let read = try? SoundFileReader.decode(path: path, maxMilliseconds: 60_000) else {
                throw FileError(description: "wake chime \(path): \(error)")
            }
            pcm = read
        }
        guard !pcm.isEmpty else { throw FileError(description: "wake chime \(path): no samples") }
        guard pcm.durationMilliseconds <= 3000 else {
            throw FileError(description: "wake chime \(path): \(Int(pcm.durationMilliseconds)) ms long; a chime must be 3 s or shorter")
        }
        return pcm
    }
}

public struct WakeConfig: Sendable, Equatable {
    public var enabled = true
    /// 0…1; 0.5 = each model's trained threshold (WakeDetector).
    public var sensitivity = 0.5
    /// What plays on detection.
    public var chime = WakeChime.generated
    /// Where `<trigger>.json` + `.bin` models are looked for.
    public var modelsDirectory: String
    public var refractoryMs = 2000
    /// Audio before the detection that the capture starts with (holds the trigger itself).
    public var lookbackMs = 1500
    /// Silence that ends the capture after speech followed the trigger.
    public var silenceAfterSpeechMs = 2000
    /// Silence that ends the capture when nothing was said after the trigger.
    public var silenceAfterTriggerOnlyMs = 5000
    public var maxCaptureMs = 30_000
    /// No new wake this soon after a turn was sent.
    public var debounceMs = 350
    /// Fewer characters than this after stripping the trigger: nothing is sent.
    public var minCommandCharacters = 2
    /// The node's state directory: its `wake enroll` takes adapt the detector (nil: none used).
    public var stateDir: String?

    public init(modelsDirectory: String) { self.modelsDirectory = modelsDirectory }
}

/// The wake side of status: what is listened for, what cannot be, and what happened last.
public struct WakeStatus: Sendable, Equatable {
    public var enabled: Bool
    public var triggers: [String]
    /// Triggers with a loaded model.
    public var listening: [String]
    /// Triggers whose household takes (`wake enroll`) the detector uses.
    public var enrolled: [String] = []
    public var missing: [MissingWakeModel]
    /// A model that exists but does not load.
    public var error: String?
    public var routing: [String: String]
    public var detections: Int
    public var lastPhrase: String?
    /// What the last wake turn came to: "queued", "empty", "cancelled", …
    public var lastOutcome: String?
    /// The node is muted: nothing is listened for until unmuted, whatever the models say.
    public var muted = false

    public var json: JSONValue {
        var o: [String: JSONValue] = [
            "enabled": .bool(enabled),
            "state": .string(!enabled ? "off" : muted ? "muted" : listening.isEmpty ? "no models" : "listening"),
            "muted": .bool(muted),
            "triggers": .array(triggers.map { .string($0) }),
            "listening": .array(listening.map { .string($0) }),
            "enrolled": .array(enrolled.map { .string($0) }),
            "missing": .array(missing.map { ["phrase": .string($0.phrase), "command": .string($0.command),
                                              "message": .string($0.description)] }),
            "routing": .object(routing.mapValues { .string($0) }),
            "detections": .number(Double(detections)),
        ]
        if let error { o["error"] = .string(error) }
        if let lastPhrase { o["lastPhrase"] = .string(lastPhrase) }
        if let lastOutcome { o["lastOutcome"] = .string(lastOutcome) }
        return .object(o)
    }
}

/// Owned by TalkController (one isolation domain); not Sendable.
package final class WakeListener {
    let config: WakeConfig
    private let catalog: WakeModelCatalog
    private(set) var triggers: [String] = []
    package private(set) var detector: WakeDetector?
    private(set) var missing: [MissingWakeModel] = []
    private(set) var loadError: String?
    /// Why an enrollment on disk is not used (one line each).
    private(set) var enrollmentProblems: [String] = []
    /// Normalised trigger → session key (`{sessionKey}` targets as they are, `{agentId}` as that
    /// agent's main session; `{mode:"current"}` routes use the current session).
    private(set) var routing: [String: String] = [:]
    var lookback: PreRollBuffer
    /// Decoded once: what plays on detection (nil: no chime), and why a chime file was not used.
    let chimeSound: PCMBuffer?
    let chimeProblem: String?
    var detections = 0
    var lastPhrase: String?
    var lastOutcome: String?

    package init(config: WakeConfig, triggers: [String]) {
        self.config = config
        catalog = WakeModelCatalog(directory: config.modelsDirectory)
        lookback = PreRollBuffer(milliseconds: config.lookbackMs)
        (chimeSound, chimeProblem) = config.chime.sound()
        setTriggers(triggers)
    }

    /// Rebuilds the detector for a new trigger list (a no-op when the list is unchanged).
    @discardableResult
    func setTriggers(_ list: [String]) -> Bool {
        let cleaned = list.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }.filter { !$0.isEmpty }
        guard cleaned != triggers || (detector == nil && missing.isEmpty && loadError == nil) else { return false }
        triggers = cleaned
        loadError = nil
        do {
            let (models, missing) = try catalog.load(cleaned)
            self.missing = missing
            detector = models.isEmpty ? nil : WakeDetector(models: models, sensitivity: config.sensitivity,
                                                           refractoryMilliseconds: config.refractoryMs)
            if let detector, let dir = config.stateDir {
                let (list, problems) = WakeEnrollmentStore(stateDir: dir).enrollments(for: models)
                enrollmentProblems = problems + detector.enroll(list)
            }
        } catch {
            missing = []
            detector = nil
            loadError = error.description
        }
        lookback.removeAll()
        return true
    }

    /// `voicewake.routing.changed` / `voicewake.routing.get`: `{config:{routes:[{trigger, target}]}}` or the config itself.
    func setRouting(_ payload: JSONValue?) {
        let config = payload?["config"] ?? payload
        var map: [String: String] = [:]
        for route in config?["routes"]?.arrayValue ?? [] {
            guard let trigger = route["trigger"]?.stringValue, let target = route["target"] else { continue }
            if let key = target["sessionKey"]?.stringValue, !key.isEmpty {
                map[Self.normalize(trigger)] = key
            } else if let agent = target["agentId"]?.stringValue?.trimmingCharacters(in: .whitespaces), !agent.isEmpty {
                // OpenClaw's session keys are agent:<agentId>:<key>; an agent's main session is "main".
                map[Self.normalize(trigger)] = "agent:\(agent.lowercased()):main"
            }
        }
        routing = map
    }

    /// The session a wake by `phrase` goes to, if routed.
    func session(for phrase: String) -> String? { routing[Self.normalize(phrase)] }

    /// Feeds one frame; returns a detection, if this frame completed one. `followsGap`: the
    /// capture lost audio before this frame (CapturedFrame.followsGap), so the detector starts
    /// a fresh stream rather than join sound that was never continuous.
    package func feed(_ frame: PCMBuffer, followsGap: Bool = false) -> WakeDetection? {
        if followsGap {
            detector?.reset()
            lookback.removeAll()
        }
        lookback.append(frame)
        guard let detector else { return nil }
        return detector.process(frame.samples).first
    }

    /// A capture took the microphone: start the next stream afresh.
    func reset() {
        detector?.reset()
        lookback.removeAll()
    }

    var status: WakeStatus {
        WakeStatus(enabled: config.enabled, triggers: triggers, listening: detector?.phrases ?? [],
                   enrolled: detector.map { d in d.models.indices.filter { d.enrollments[$0] != nil }.map { d.models[$0].phrase } } ?? [],
                   missing: missing,
                   error: (([loadError].compactMap { $0 }) + enrollmentProblems).first, routing: routing, detections: detections,
                   lastPhrase: lastPhrase, lastOutcome: lastOutcome)
    }

    /// Lowercased words, punctuation at word edges removed, whitespace collapsed (route matching, §4.1).
    static func normalize(_ s: String) -> String {
        s.lowercased().split(whereSeparator: \.isWhitespace)
            .map { $0.trimmingCharacters(in: .punctuationCharacters.union(.symbols)) }
            .filter { !$0.isEmpty }.joined(separator: " ")
    }

    /// The command in a wake transcript (`WakeTranscript.command`, in ClawvoiceCore).
    static func command(from transcript: String, triggers: [String]) -> String {
        WakeTranscript.command(from: transcript, triggers: triggers)
    }

    /// Two 60 ms sine tones (880 Hz, then 1320 Hz) at −12 dBFS with 5 ms fades, 16 kHz mono.
    static func chime() -> PCMBuffer {
        let rate = 16_000
        let amplitude = 32767 * pow(10, -12.0 / 20)
        var samples: [Int16] = []
        for (hz, gapAfter) in [(880.0, 20), (1320.0, 0)] {
            let n = rate * 60 / 1000, fade = rate * 5 / 1000
            for i in 0..<n {
                let env = Double(min(i, n - 1 - i, fade)) / Double(fade)
                samples.append(Int16(amplitude * min(env, 1) * sin(2 * Double.pi * hz * Double(i) / Double(rate))))
            }
            samples += [Int16](repeating: 0, count: rate * gapAfter / 1000)
        }
        return PCMBuffer(format: .voice, samples: samples)
    }
}
