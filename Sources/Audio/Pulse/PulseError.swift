// PulseError: every way a PulseAudio operation can fail, each rendered as one line a user can act on.

public import ClawvoiceCore

/// A failed PulseAudio operation.
public enum PulseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A `pa_*` call failed; `message` is `pa_strerror` of the context's error code at that moment.
    case call(String, message: String)
    /// The configured source (microphone) does not exist on the server.
    case noSuchSource(String)
    /// The configured sink (speaker) does not exist on the server.
    case noSuchSink(String)
    /// The server is not reachable right now; `state` says what the connection is doing about it.
    case notConnected(state: String)
    /// The server went away while the operation was in flight.
    case connectionLost
    /// The stream or connection was closed by its owner.
    case closed
    /// A buffer in a format the stream was not opened with.
    case formatMismatch(expected: AudioFormat, got: AudioFormat)

    public var description: String {
        switch self {
        case .call(let call, let message):
            return "\(call): \(message)"
        case .noSuchSource(let name):
            return "no PulseAudio source named \(name); `clawvoice audio devices` lists them"
        case .noSuchSink(let name):
            return "no PulseAudio sink named \(name); `clawvoice audio devices` lists them"
        case .notConnected(let state):
            return "PulseAudio is not reachable (\(state)); is the sound server running? clawvoice keeps retrying"
        case .connectionLost:
            return "the PulseAudio server went away during the operation; clawvoice reconnects by itself"
        case .closed:
            return "the PulseAudio stream was closed"
        case .formatMismatch(let expected, let got):
            return "PCM buffer is \(got) but the stream was opened as \(expected)"
        }
    }
}
