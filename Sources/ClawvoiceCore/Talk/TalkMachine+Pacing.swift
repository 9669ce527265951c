// TalkMachine: the microphone's pace (issue 25), from the phase, a call and the speaker. Apart from
// MicrophonePacing (Audio/) so that the audio values compile without the machine (fuzz/run.sh).

extension TalkMachine {
    /// The pace the microphone may keep now: relaxed only while nothing but the wake listener
    /// hears a frame (idle, no call, the speaker silent); anything else wants each frame at once.
    public func microphonePacing(speakerPlaying: Bool) -> MicrophonePacing {
        guard case .idle = phase, !callMicrophoneOpen, !speakerPlaying else { return .prompt }
        return .relaxed
    }
}
