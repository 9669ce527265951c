// AudioCodecError: how the encoders and the resampler fail. Each case renders as one line that
// names the C call and repeats the library's own message, captured when the call failed.

/// Failure of an Opus, Ogg Opus or resampler call, or of the input handed to one.
public enum AudioCodecError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A C call returned an error code. `message` is the library's text for it
    /// (`opus_strerror`, `ope_strerror`, `speex_resampler_strerror`), taken on the spot.
    case library(call: String, code: Int, message: String)
    /// The caller passed something the codec cannot take: a frame of the wrong length,
    /// a sample count that does not divide by the channel count, a rate out of range.
    case invalidInput(String)
    /// `append` or `finish` after the stream was finished; the Ogg file is already closed.
    case finished

    public var description: String {
        switch self {
        case let .library(call, code, message): "\(call) failed: \(message) (\(code))"
        case let .invalidInput(what): "invalid audio input: \(what)"
        case .finished: "the Ogg Opus stream is already finished; start a new writer"
        }
    }
}
