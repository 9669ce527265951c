// The talk machine's settings: every knob the daemon's configuration turns, with the default
// and, where it came from a measurement, the why. `TalkController.settings` (TalkLoop+Settings.swift) fills them from TalkConfig and WakeConfig.

extension TalkMachine {
    /// The settings the machine decides with (TalkConfig and WakeConfig, minus the executors' parts).
    public struct Settings: Sendable, Equatable {
        public var silenceTimeoutMs = 900
        /// What ends an utterance (audio.voiceDetector): the voice detector's probability per
        /// frame, at `voiceThreshold`, or the level against the noise floor.
        public var voiceDetector: VoiceDetectorChoice = .model
        public var voiceThreshold = 0.5
        /// The end-of-turn model for push-to-talk (`once`), wake and follow-up turns (nil: the
        /// silence window alone); the window stays its ceiling.
        public var turnModel: TurnModel?
        public var onceMaxMs = 12_000
        public var captureMaxMs = 60_000
        public var headset = false
        /// The capture is echo-cancelled against the speaker: a loudspeaker then needs no gate,
        /// and barge-in and wake words work while it speaks, as on a headset.
        public var echoCancelled = false
        public var interruptOnSpeech = true
        public var bargeInMs = 300
        public var bargeInLevelDbfs = -35.0
        /// The bar on an echo-cancelled loudspeaker: what is left of the echo sits near −50 dBFS,
        /// and the canceller's suppressor takes the edge off the user's voice in double talk.
        public var echoBargeInLevelDbfs = -45.0
        /// Voice that barges in over an echo-cancelled loudspeaker (shorter than on a headset: the
        /// canceller's suppressor already swallowed the first syllable).
        public var echoBargeInMs = 120
        /// For this long after a clip starts, voice over an echo-cancelled loudspeaker must last
        /// `echoSettleBargeInMs` to barge in: each clip reaches the microphone a few milliseconds
        /// earlier or later than the last, and webrtc's canceller, finding the new delay 0.5-0.9 s
        /// in, lets the echo through at -35 to -44 dBFS for up to 160 ms at a time. That stopped
        /// about one reply in ten by itself (docs/measurements.md, "A reply that stopped itself").
        /// Voice that began in that second keeps needing `echoSettleBargeInMs` after it.
        public var echoSettleMs: Int64 = 1000
        public var echoSettleBargeInMs = 300
        /// Wake thresholds lower by this many logits while an echo-cancelled loudspeaker plays
        /// and `wakeReliefTailMs` after (0 turns it off): at 0 dB under the node's own voice a
        /// trigger scored 0.76–0.80 against computer's 0.82 (WakeOverReplyTests).
        public var wakeReliefOverSpeech = 0.6
        public var wakeReliefTailMs = 1000
        /// The relief for `wakeReliefTailMs` after voice barged in over the loudspeaker: someone
        /// is talking, and a trigger whose first syllable was under the echo scored 0.71-0.75
        /// against 0.82 after its barge-in stopped the reply (WakeOverReplyTests' misses). The wake
        /// detector also judges the second before it again at this relief (WakeLookback): the
        /// barge-in fires only after the talking began, sometimes after the trigger's peak.
        public var wakeReliefAfterBargeIn = 1.0
        public var speakerTailMs = 300
        public var speakReplies = true
        public var replyTimeoutMs: Int64 = 120_000
        /// A command that arrives while the microphone or the operator session is still coming
        /// up waits this long for them before it fails.
        public var partsWaitMs: Int64 = 3_000
        /// The capture's own cap is backed by a timer this much later (the microphone may stop).
        public var capSlackMs: Int64 = 500
        // Wake turns.
        public var wakeEnabled = false
        public var wakeSilenceAfterSpeechMs = 2000
        public var wakeTriggerOnlyMs = 5000
        public var wakeMaxCaptureMs = 30_000
        public var wakeDebounceMs: Int64 = 350
        public var wakeMinCommandCharacters = 2
        /// After a reply has been spoken, listen this long for a next turn without the wake word
        /// (talk.followUpMs; 0: off, as by default).
        public var followUpMs = 0
        /// The stop word (issue 14): a stop head hears the microphone while the node speaks on a
        /// channel without its echo (headset or echo-cancelled loudspeaker), and "stop" then
        /// stops the speech as a barge-in does, even with voice barge-in off. Ignored otherwise.
        public var stopWordEnabled = false
        /// The wake phrase that starts a realtime call instead of a turn (talk.callWakeWord).
        public var callWakePhrase: String?
        public init() {}
    }
}
