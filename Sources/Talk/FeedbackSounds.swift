// The node's feedback sounds besides the wake chime: end of listening, error, mute and unmute.
// Each is generated (short tone patterns), a user's file (WAV, FLAC, MP3, Ogg Opus…, at most 3 s, decoded
// as the wake chime is), or off.

import Audio
public import ClawvoiceCore
import Foundation

public struct FeedbackSounds: Sendable {
    /// The decoded sound of each cue that is on.
    public private(set) var sounds: [TalkCue: PCMBuffer] = [:]
    /// One line per file that could not be used (the generated sound plays instead).
    public private(set) var problems: [String] = []

    /// No sounds at all (the library default; the daemon turns them on from its config).
    public init() {}

    /// `settings[cue]`: `.generated`, `.file(path)` or `.off`; a cue left out is off.
    public init(_ settings: [TalkCue: WakeChime]) {
        for (cue, setting) in settings {
            switch setting {
            case .off: continue
            case .generated: sounds[cue] = Self.generated(cue)
            case .file(let path):
                do { sounds[cue] = try WakeChime.decode(path) } catch {
                    problems.append("\(cue.rawValue) sound: \(error); playing the generated one instead")
                    sounds[cue] = Self.generated(cue)
                }
            }
        }
    }

    /// Tone patterns (Hz, ms) at -15 dBFS, unlike the wake chime's rising 880→1320:
    /// end of listening falls 1320→880, error is a low double buzz, mute falls, unmute rises.
    public static func generated(_ cue: TalkCue) -> PCMBuffer {
        let pattern: [(hz: Double, ms: Int, gapMs: Int)]
        switch cue {
        case .endOfListening: pattern = [(1320, 50, 15), (880, 60, 0)]
        case .error: pattern = [(330, 90, 50), (330, 90, 0)]
        case .mute: pattern = [(660, 70, 10), (440, 110, 0)]
        case .unmute: pattern = [(440, 70, 10), (660, 110, 0)]
        case .callStart: pattern = [(523, 80, 20), (659, 80, 20), (784, 120, 0)]
        case .callEnd: pattern = [(784, 80, 20), (659, 80, 20), (523, 120, 0)]
        }
        let rate = 16_000
        let amplitude = 32767 * pow(10, -15.0 / 20)
        var samples: [Int16] = []
        for p in pattern {
            let n = rate * p.ms / 1000, fade = rate * 5 / 1000
            for i in 0..<n {
                let env = min(Double(min(i, n - 1 - i, fade)) / Double(fade), 1)
                samples.append(Int16(amplitude * env * sin(2 * Double.pi * p.hz * Double(i) / Double(rate))))
            }
            samples += [Int16](repeating: 0, count: rate * p.gapMs / 1000)
        }
        return PCMBuffer(format: .voice, samples: samples)
    }
}
