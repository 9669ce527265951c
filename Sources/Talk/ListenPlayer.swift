// Listen: speak one chat message on request, as the chat apps' "Listen" button does. One
// message at a time; asking for the message that is playing stops it; asking for another one
// replaces it. Audio comes from tts.speak (60 s timeout, SpeechConfig.ttsSpeakTimeoutMs) and
// falls back to espeak-ng on any gateway error or unplayable clip; a stop never falls back.
//
// The player owns no task and no state: it asks the talk loop, whose machine keeps the speaker
// sub-state (TalkMachine+Speaker.swift: a Listen message silences whatever speaks, a reply
// included; push-to-talk, a barge-in or a session switch silence it) and whose reply executor
// plays it as a child task of the loop.

import Foundation

/// Plays chat messages one at a time through the talk loop's speaker.
public struct ListenPlayer: Sendable {
    private let talk: TalkController

    public init(talk: TalkController) {
        self.talk = talk
    }

    /// The message playing now, if any.
    public var playingMessageId: String? {
        get async { talk.listening }
    }

    /// The last message that ended (finished, stopped or failed), and how.
    public var lastEnded: (messageId: String, report: SpeechReport)? {
        get async { talk.lastListen }
    }

    /// Stops `messageId` if it is playing; otherwise stops whatever plays and speaks `text`.
    /// Returns at once: playback continues in the talk loop (see `waitUntilDone`).
    public func toggle(messageId: String, text: String) async -> ListenOutcome {
        await talk.listen(messageId: messageId, text: text)
    }

    /// Stops the message playing, if any (session switch, daemon stop). Never falls back.
    public func stop() async {
        await talk.stopListen()
    }

    /// Waits for the message playing now to end; returns its report (nil when none was playing).
    public func waitUntilDone() async -> SpeechReport? {
        await talk.waitForListen()
    }
}
