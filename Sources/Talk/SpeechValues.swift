// What speaking takes and gives back: the route a text's audio comes from, the report of what
// played, the sink that plays it, and the speech settings. SpeechOutput (the player) uses them.

public import Audio
public import ClawvoiceCore

/// Where the audio of a spoken text should come from.
public enum SpeechRoute: String, Sendable, Equatable, Codable {
    /// `talk.speak`: Talk replies. Falls back on any error, `fallbackEligible` or not.
    case talkSpeak
    /// `tts.speak`: "listen to this message". Falls back on any error.
    case ttsSpeak
    /// espeak-ng only.
    case local
}

/// What played and why, for the log, `say`, tests and the bench.
public struct SpeechReport: Sendable, Equatable {
    public enum Outcome: String, Sendable, Equatable { case finished, stopped, failed, silent }
    /// "gateway" or "espeak-ng".
    public var engine: String
    public var provider: String?
    public var outputFormat: String?
    /// Why the gateway's clip was not used, when espeak-ng spoke instead.
    public var fallbackReason: String?
    public var outcome: Outcome
    public var durationMs: Double
    /// One line, when nothing could be spoken.
    public var error: String?
}

/// Plays PCM; PulsePlayback in the daemon, a WAV file for `say --out`.
public protocol SpeechSink: Sendable {
    /// Plays to the end (true) or until `stop` (false).
    func play(_ pcm: PCMBuffer) async throws -> Bool
    func stop() async
}

public struct SpeechConfig: Sendable, Equatable {
    public var voice = VoiceSettings()
    /// Requested talk.speak format; the reply's own format is authoritative.
    public var talkOutputFormat: String? = "pcm_24000"
    public var talkSpeakTimeoutMs: Int64 = 45_000
    public var ttsSpeakTimeoutMs: Int64 = 60_000
    public init() {}
}
