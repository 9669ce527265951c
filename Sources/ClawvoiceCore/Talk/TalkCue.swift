// TalkCue: the feedback sounds the talk machine asks for (FeedbackSounds in Talk makes them).

/// A sound that tells the user what the node did.
public enum TalkCue: String, Sendable, CaseIterable, Codable {
    case endOfListening, error, mute, unmute
    /// A realtime call connected (played at the head of the call's stream) / ended.
    case callStart, callEnd
}
