// RelayOutcome: how a capture's transcription relay came out (RelayUplink in Talk streams it;
// the talk machine decides what to send from it).

/// How a capture's relay stream came out.
public enum RelayOutcome: Sendable, Equatable {
    /// The relay's final transcript (nil: it heard nothing it could transcribe).
    case transcript(String?)
    /// No relay (not offered, refused or failed): the caller sends the voice note instead.
    case unavailable(String)
}
