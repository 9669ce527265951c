// ClipPlayability: the one decision on whether a decoded TTS clip may reach the speaker for a
// given text. A clip that decodes to (almost) nothing (a damaged Ogg Opus stream that gives
// 10 ms) or that runs far longer than its text could take to say (a WAV header claiming 1 Hz)
// is unplayable, and the caller speaks with espeak-ng instead. Pure: numbers in, verdict out.

public import ClawvoiceCore

/// Whether a decoded clip is fit to play for its text, and why not.
public enum ClipPlayability {
    /// Shortest clip that counts as speech. The shortest real replies ("OK.") take 300 ms or more.
    public static let minimumMs = 200.0
    /// Allowance on top of the per-character time, for leading and trailing quiet.
    public static let baseAllowanceMs = 5_000.0
    /// Time allowed per character of text: 4 characters a second, a third of ordinary speech.
    public static let perCharacterMs = 250.0

    /// The longest clip played for a text of `characters` characters.
    public static func maximumMs(characters: Int) -> Double {
        baseAllowanceMs + perCharacterMs * Double(max(characters, 0))
    }

    /// Nil when a clip of `durationMs` may be played for a text of `characters`; otherwise one
    /// line saying why not.
    public static func problem(durationMs: Double, characters: Int) -> String? {
        guard durationMs.isFinite, durationMs >= minimumMs else {
            return "the clip decodes to \(formatMs(durationMs)) of audio, too short to be speech"
        }
        let cap = maximumMs(characters: characters)
        guard durationMs <= cap else {
            return "the clip lasts \(formatMs(durationMs)), longer than \(formatMs(cap)) allowed for \(characters) characters of text"
        }
        return nil
    }

    /// The same verdict for a decoded buffer and the text it should say.
    public static func problem(_ pcm: PCMBuffer, text: String) -> String? {
        problem(durationMs: pcm.durationMilliseconds, characters: text.count)
    }

    private static func formatMs(_ ms: Double) -> String {
        guard ms.isFinite else { return "an unknown length" }
        return ms < 1_000 ? "\(Int(ms.rounded())) ms" : "\((ms / 100).rounded() / 10) s"
    }
}
