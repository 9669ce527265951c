// What the talk loop is told at start (TalkConfig), what it tells (TalkEvent) and how status
// sees the turn (TalkPhase): plain values shared by the handle, the loop and the daemon.

import Audio
public import ClawvoiceCore
import WakeWord

public struct TalkConfig: Sendable, Equatable {
    /// Silence after speech that ends a `once` capture (talk.silenceTimeoutMs; the gateway's value wins).
    /// 900 ms: the shortest of 400/700/900 that cuts ≤ 2 % of sentences early (clawvoice-bench --endpoint).
    public var silenceTimeoutMs = 900
    /// `once` ends here at the latest, as on the iPhone.
    public var onceMaxMs = 12_000
    /// A node muted before a restart starts muted, before anything can read its status (read at
    /// init only; `setMuted` changes it later).
    public var startsMuted = false
    /// Hard cap for a held capture.
    public var captureMaxMs = 60_000
    /// Audio from before the command that the capture starts with (0–2000 ms).
    public var preRollMs = 300
    public var opusBitrate = 20_000
    public var opusComplexity = 5
    /// Where recordings (voice notes) of recent captures are kept (nil, the default: not written
    /// to disk), how many, and for how long (nil: no age limit).
    public var voiceNoteDirectory: String?
    public var keepVoiceNotes = 20
    public var voiceNotesMaxAgeMs: Int64? = 7 * 86_400_000
    /// The chat session turns go to; nil means the gateway's main session.
    public var sessionKey: String?
    public var replyTimeoutMs: Int64 = 120_000
    public var speakReplies = true
    /// Stop speaking when the user talks over the assistant (only on a headset: no echo).
    public var interruptOnSpeech = true
    /// Whether the speaker is a headset; on loudspeakers the microphone is muted while speaking.
    public var headset = false
    /// Voice that barges in: at least this much speech above the level while the assistant talks.
    public var bargeInMs = 300
    public var bargeInLevelDbfs = -35.0
    /// Loudspeaker mode mutes the microphone while speaking and for this long after.
    public var speakerTailMs = 300
    /// After a reply, listen this long for a next turn without the wake word (0: off).
    public var followUpMs = 0
    /// The wake phrase that starts a realtime call instead of a turn (talk.callWakeWord).
    public var callWakeWord: String?
    /// A command arriving while the microphone or the operator session is still starting waits this long.
    public var partsWaitMs: Int64 = 3_000
    /// Echo cancellation against the speaker (config audio.echoCancel): nil means on for
    /// loudspeakers and off for headsets; it needs the speech sink's EchoReference.
    public var echoCancel: Bool?
    /// How late the speaker's sound reaches the microphone (playback and capture buffering).
    public var echoDelayMs = 60
    /// Where the stop word's model (`stop.json`) is looked for; nil: no stop word (config
    /// talk.stopWord false). It listens only while the node speaks on a headset or an
    /// echo-cancelled loudspeaker.
    public var stopWordModelsDirectory: String?
    /// 0…1 as wake.sensitivity: 0.5 is the stop head's trained threshold, higher stops more
    /// easily. 0.7 by default: the head listens only while the node speaks, where a missed
    /// "stop" costs more than a reply cut short (README, "Full duplex, measured").
    public var stopWordSensitivity = 0.7
    /// Feedback sounds (end of listening, error, mute, unmute); none by default.
    public var cues: [TalkCue: WakeChime] = [:]
    /// What ends an utterance (audio.voiceDetector): the voice detector (models/voice.json in
    /// `modelsDirectory`, nil: where the wake models are found) or the level rule.
    public var voiceDetector: VoiceDetectorChoice = .model
    public var modelsDirectory: String?
    /// The detector's threshold; replaced by the model's own when it loads.
    public var voiceThreshold = 0.5
    /// Whether push-to-talk and wake turns end when the end-of-turn model (models/turn.json)
    /// hears the turn end, the silence window being the ceiling (issue 25); false: the window alone.
    public var endOfTurn = TalkConfig.endOfTurnDefault
    public static let endOfTurnDefault = false
    /// The end-of-turn model, once read (by the talk loop, next to the voice detector).
    public var turnModel: TurnModel?
    public init() {}
}

/// Something the talk turn did, for `clawvoice events` and event commands: a name
/// (wake, listeningStarted, listeningStopped, replyStarted, replyFinished, muted, unmuted, error)
/// and its fields (captureId, sessionKey, runId, phrase, reason …).
public struct TalkEvent: Sendable, Equatable {
    public var name: String
    public var fields: [String: String]
    public init(_ name: String, _ fields: [String: String] = [:]) { self.name = name; self.fields = fields }
}

/// The talk turn as `status` and tests see it.
public enum TalkPhase: Sendable, Equatable {
    case idle
    case capturing(String)
    case ending(String)
}

