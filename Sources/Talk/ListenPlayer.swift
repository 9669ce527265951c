// Listen: speak one chat message on request, as the chat apps' "Listen" button does. One
// message at a time; asking for the message that is playing stops it; asking for another one
// replaces it. Audio comes from tts.speak (60 s timeout, SpeechConfig.ttsSpeakTimeoutMs) and
// falls back to espeak-ng on any gateway error or unplayable clip; a stop never falls back.
//
// The SpeechOutput is shared with Talk replies and notifications: starting a listen silences
// whatever is speaking (a reply included), and a reply that starts later cuts the listen off,
// exactly as one speaker can only say one thing at a time.

import Foundation

/// What a `toggle` did.
public enum ListenOutcome: Sendable, Equatable {
    /// Started speaking `messageId`; `replaced` is the message it cut off, if one was playing.
    case speaking(messageId: String, replaced: String?)
    /// `messageId` was playing and is now stopped.
    case stopped(messageId: String)
}

/// Plays chat messages one at a time through the shared SpeechOutput.
public actor ListenPlayer {
    private enum State {
        /// Nothing of ours is playing.
        case idle
        /// `messageId` is being fetched or played by `task`; `generation` tells its end from a later one's.
        case playing(messageId: String, generation: Int, task: Task<SpeechReport, Never>)
    }

    private let speech: SpeechOutput
    private var state: State = .idle
    private var generation = 0
    private var lastEndedMessage: (messageId: String, report: SpeechReport)?

    public init(speech: SpeechOutput) {
        self.speech = speech
    }

    /// The message playing now, if any.
    public var playingMessageId: String? {
        if case .playing(let id, _, _) = state { return id }
        return nil
    }

    /// The last message that ended (finished, stopped or failed), and how.
    public var lastEnded: (messageId: String, report: SpeechReport)? { lastEndedMessage }

    /// Stops `messageId` if it is playing; otherwise stops whatever plays and speaks `text`.
    /// Returns at once: playback continues in the background (see `waitUntilDone`).
    public func toggle(messageId: String, text: String) async -> ListenOutcome {
        var replaced: String?
        if case .playing(let current, _, _) = state {
            if current == messageId {
                // Same message again: a user stop. State first, so a toggle racing in sees idle.
                state = .idle
                generation += 1
                await speech.stop()
                return .stopped(messageId: messageId)
            }
            replaced = current
        }
        generation += 1
        let gen = generation
        // Unstructured: playback outlives toggle() (it answers at once) and the control request runs in no service's group; the player keeps it to wait for or replace.
        let task = Task { [speech] () -> SpeechReport in
            // Silence the old message (or a Talk reply) now rather than when the new clip arrives.
            let report = await speech.interrupt(with: text, route: .ttsSpeak)
            self.ended(messageId: messageId, generation: gen, report)
            return report
        }
        state = .playing(messageId: messageId, generation: gen, task: task)
        return .speaking(messageId: messageId, replaced: replaced)
    }

    /// Stops the message playing, if any (session switch, daemon stop). Never falls back.
    public func stop() async {
        guard case .playing = state else { return }
        state = .idle
        generation += 1
        await speech.stop()
    }

    /// Waits for the message playing now to end; returns its report (nil when none was playing).
    public func waitUntilDone() async -> SpeechReport? {
        guard case .playing(_, _, let task) = state else { return nil }
        return await task.value
    }

    private func ended(messageId: String, generation gen: Int, _ report: SpeechReport) {
        lastEndedMessage = (messageId, report)
        // Only the current message's end clears the state; a replaced one's late end does not.
        if case .playing(_, let g, _) = state, g == gen { state = .idle }
    }
}
