// How the microphone's frames travel (issue 25): promptly, in 20 ms fragments one frame to an
// inbox item, whenever anything waits for a frame; or relaxed, in 80 ms fragments four frames to
// an item, while only the wake listener hears them (its front end works in 80 ms hops anyway).
// Fewer, larger reads from the sound server are most of what an idle node saves.

/// The microphone's pace: the sound server's fragment and the frames per talk-loop item.
public enum MicrophonePacing: Sendable, Equatable {
    /// A capture, the speaker, a call or the stop word hears the frames: each as it comes.
    case prompt
    /// Only the wake listener hears them: 80 ms at a time (one wake front-end hop).
    case relaxed

    /// What PulseAudio is asked for per read (its fragsize), in milliseconds.
    public var fragmentMilliseconds: Int {
        switch self {
        case .prompt: return 20
        case .relaxed: return 80
        }
    }

    /// Microphone frames (20 ms each) per talk-loop inbox item.
    public var framesPerItem: Int {
        switch self {
        case .prompt: return 1
        case .relaxed: return 4
        }
    }
}
