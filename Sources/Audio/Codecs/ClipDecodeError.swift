// ClipDecodeError: every way a TTS clip can fail to become PCM. Any of them sends the caller to
// the espeak-ng fallback, so each renders as one line that says what was wrong with the clip.

/// Why a `talk.speak` / `tts.speak` clip could not be decoded.
public enum ClipDecodeError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The clip has no bytes.
    case empty
    /// The clip is labelled as raw samples without a rate (`raw-*`, `pcm`, `mulaw`, `alaw`,
    /// `ulaw_*`, `audio/pcm`, `.raw`, …); `label` is the label that said so. Official clients
    /// refuse these too, because nothing tells them how fast to play.
    case headerless(label: String)
    /// A container or sample layout this node does not play (24-bit WAV, AAC, FLAC, …).
    case unsupported(String)
    /// The bytes do not decode. `call` is the C function (or the Swift parser) that gave up,
    /// `reason` its own message.
    case corrupt(call: String, reason: String)

    public var description: String {
        switch self {
        case .empty: "TTS clip is empty"
        case let .headerless(label): "TTS clip is headerless audio (\(label)) with no sample rate; cannot play it"
        case let .unsupported(what): "TTS clip is not playable: \(what)"
        case let .corrupt(call, reason): "TTS clip does not decode: \(call): \(reason)"
        }
    }
}
