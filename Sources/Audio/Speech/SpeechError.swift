// SpeechError: how on-device speech (espeak-ng) fails, each case one line that names the
// espeak-ng call and its own status message, or says what to run to see the choices.

/// Failure of espeak-ng synthesis.
public enum SpeechError: Error, Equatable, Sendable, CustomStringConvertible {
    /// espeak-ng could not start, almost always because its data directory is missing.
    case unavailable(call: String, message: String)
    /// No voice or language by this name.
    case unknownVoice(String)
    /// A call during synthesis failed; `message` is espeak-ng's text for the status.
    case synthesis(call: String, message: String)

    public var description: String {
        switch self {
        case let .unavailable(call, message):
            "\(call) failed: \(message); install espeak-ng-data or point ESPEAK_DATA_PATH at the directory that holds espeak-ng-data"
        case let .unknownVoice(name):
            "espeak-ng has no voice \"\(name)\"; run `espeak-ng --voices` to list the languages it speaks"
        case let .synthesis(call, message):
            "\(call) failed: \(message)"
        }
    }
}
