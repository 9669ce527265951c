// The values the talk turn speaks in: PTT results and errors as the gateway knows them, the
// microphone and speaker states the machine decides with, the voice detector choice.

import Foundation
import GatewayProtocol

/// The status strings the gateway and the official clients know.
public enum PTTStatus: String, Sendable, Codable, Equatable {
    case queued, empty, idle, cancelled, busy
    case notQueued = "not_queued"
}

/// The payload of a finished PTT command: `{captureId, transcript?, status}`.
public struct PTTResult: Sendable, Equatable, Codable {
    public var captureId: String
    public var transcript: String?
    public var status: PTTStatus
    public init(captureId: String, transcript: String? = nil, status: PTTStatus) {
        self.captureId = captureId
        self.transcript = transcript
        self.status = status
    }
}

/// A PTT failure for the gateway: `UNAVAILABLE` with a `CODE: message` text.
public struct PTTError: Error, Sendable, Equatable, CustomStringConvertible {
    public var code: String
    public var message: String
    public init(code: String, message: String) { self.code = code; self.message = message }
    public var description: String { "\(code): \(message)" }

    public static let alreadyStarting = PTTError(code: "ALREADY_STARTING", message: "push-to-talk is already starting")
    public static func gatewayNotConnected(_ detail: String) -> PTTError {
        PTTError(code: "GATEWAY_NOT_CONNECTED", message: "the operator session is not connected (\(detail))")
    }
    public static func microphone(_ detail: String) -> PTTError {
        PTTError(code: "MICROPHONE_UNAVAILABLE", message: detail)
    }
    public static let muted = PTTError(code: "MUTED", message: "the microphone is muted (clawvoice unmute)")
    public static let inCall = PTTError(code: "BUSY", message: "a call holds the room (clawvoice hangup ends it)")
}

/// What the microphone looks like right now, for refusing a start with a reason.
public enum MicrophoneState: Sendable, Equatable {
    case live
    case unavailable(String)
}

/// The speaker as the capture loop saw it when a frame arrived.
public struct SpeakerState: Sendable, Equatable {
    /// Something is coming out of the speaker now.
    public var playing: Bool
    /// How long ago it last stopped (nil: never played).
    public var msSinceStopped: Int64?
    /// How long ago the clip playing now (or the last one played) began (nil: not known).
    public var msIntoClip: Int64?
    /// The text that clip says (nil: a sound, or not known) and its length in milliseconds.
    public var saying: String?
    public var clipMs: Double?
    public init(playing: Bool = false, msSinceStopped: Int64? = nil, msIntoClip: Int64? = nil, saying: String? = nil, clipMs: Double? = nil) {
        self.playing = playing
        self.msSinceStopped = msSinceStopped
        self.msIntoClip = msIntoClip
        self.saying = saying
        self.clipMs = clipMs
    }
    public static let silent = SpeakerState()

    /// Playing, or stopped less than `tailMs` ago (the room's echo and the sink's buffer).
    public func audible(tailMs: Int) -> Bool {
        if playing { return true }
        guard let ms = msSinceStopped else { return false }
        return ms < Int64(tailMs)
    }
}

/// What the endpointer counts as speech (audio.voiceDetector).
public enum VoiceDetectorChoice: String, Sendable, Equatable, CaseIterable {
    /// The trained voice detector (models/voice.json): loud noise is not speech.
    case model
    /// The frame's level against the noise floor (the iOS rule): anything loud is speech.
    case level
}
