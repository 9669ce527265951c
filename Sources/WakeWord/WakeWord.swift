// WakeWord owns hearing the gateway's trigger phrases: streaming log-mel features, the model
// file format and inference, per-trigger detectors, and the catalog of trained models.
// It knows nothing of the gateway; the runtime keeps the trigger list current. It does no
// audio I/O and reads no clock: time is the position in the sample stream it is fed.

import Audio
public import ClawvoiceCore

/// Why wake models could not be used. Each case renders one line that says what to do.
public enum WakeWordError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The manifest or weights file could not be read.
    case unreadable(path: String, reason: String)
    /// The manifest is not a clawvoice-wake manifest this build understands.
    case unsupported(path: String, reason: String)
    /// The manifest and the weights disagree (size, tensor shapes), or a tensor is missing.
    case corrupt(path: String, reason: String)
    /// Audio in a format the detector does not take (it wants 16 kHz mono).
    case wrongFormat(AudioFormat)
    /// None of the requested phrases has a model.
    case noModels([MissingWakeModel])

    public var description: String {
        switch self {
        case .unreadable(let path, let reason): "cannot read wake model \(path): \(reason)"
        case .unsupported(let path, let reason): "wake model \(path) is not usable by this build: \(reason); retrain it with models/training/train.sh"
        case .corrupt(let path, let reason): "wake model \(path) is damaged: \(reason); retrain it or restore it from git"
        case .wrongFormat(let f): "the wake detector takes 16 kHz mono audio, got \(f); resample it first"
        case .noModels(let missing):
            missing.isEmpty ? "no wake phrases given" : missing.map(\.description).joined(separator: "; ")
        }
    }
}
