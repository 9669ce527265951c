// The speaker's requests on the talk handle: Listen (a chat message read out on request) and
// spoken notifications post typed items; the talk loop feeds them to the machine's speaker
// sub-state, its reply executor plays what the machine says as child tasks of the loop, and
// each clip's end comes back through the inbox. ListenPlayer and NotificationSpeaker are thin
// fronts over these calls: they own no task and no state of the speaker.

public import ClawvoiceCore
import Foundation
import GatewayProtocol

/// What a `toggle` did.
public enum ListenOutcome: Sendable, Equatable {
    /// Started speaking `messageId`; `replaced` is the message it cut off, if one was playing.
    case speaking(messageId: String, replaced: String?)
    /// `messageId` was playing and is now stopped.
    case stopped(messageId: String)
}

/// How speaking one notification went (the executor's part of NotificationReport).
public struct NoticeDelivery: Sendable, Equatable {
    /// The parts that were spoken.
    public var spoken: [String] = []
    /// The last part's report (nil: nothing was tried).
    public var report: SpeechReport?
    /// Whether the speaker was busy when its turn came.
    public var speakerWasBusy = false
}

extension TalkController {
    enum SpeakerItem: Sendable {
        case listen(messageId: String, text: String, CheckedContinuation<ListenOutcome, Never>)
        case stopListen(CheckedContinuation<Void, Never>)
        case waitForListen(CheckedContinuation<SpeechReport?, Never>)
        case notify(TalkMachine.Notice, route: SpeechRoute, CheckedContinuation<NoticeDelivery?, Never>)
        case withdrawNotice(id: Int)
        // The reply executor's results.
        case listenEnded(messageId: String, generation: Int, SpeechReport)
        case noticeEnded(id: Int, generation: Int, NoticeDelivery)

        /// The loop has ended: nobody is left waiting.
        func refuse() {
            switch self {
            case .listen(let id, _, let c): c.resume(returning: .stopped(messageId: id))
            case .stopListen(let c): c.resume()
            case .waitForListen(let c): c.resume(returning: nil)
            case .notify(_, _, let c): c.resume(returning: nil)
            case .withdrawNotice, .listenEnded, .noticeEnded: break
            }
        }
    }

    /// Listen on `messageId`: stops it if it is the one playing, otherwise speaks `text` (tts.speak)
    /// instead of whatever speaks. Answers once the loop has decided; playback goes on in the loop.
    public func listen(messageId: String, text: String) async -> ListenOutcome {
        await withCheckedContinuation { send(.speaker(.listen(messageId: messageId, text: text, $0))) }
    }

    /// Stops the Listen message playing, if any.
    public func stopListen() async {
        await withCheckedContinuation { send(.speaker(.stopListen($0))) }
    }

    /// Waits for the Listen message playing now to end; its report (nil when none plays).
    public func waitForListen() async -> SpeechReport? {
        await withCheckedContinuation { send(.speaker(.waitForListen($0))) }
    }

    /// The Listen message playing now, if any.
    public var listening: String? { published.withLock { $0.listening } }
    /// The last Listen message that ended (finished, stopped or failed), and how.
    public var lastListen: (messageId: String, report: SpeechReport)? { published.withLock { $0.lastListen } }
    /// What the speaker plays now, as the machine sees it.
    public var speakerPlaying: TalkMachine.Playing { published.withLock { $0.speaker } }

    /// Speaks a notification's parts when the machine gives it its turn; returns how it went once
    /// it has been spoken, or nil when the caller's task was cancelled first (a notification that
    /// has not started is then dropped; one already speaking goes on).
    func notify(parts: [String], urgent: Bool, passive: Bool, holdMs: Int64, route: SpeechRoute) async -> NoticeDelivery? {
        let id = nextToken()
        let notice = TalkMachine.Notice(id: id, parts: parts, urgent: urgent, passive: passive, holdMs: holdMs)
        return await withTaskCancellationHandler {
            await withCheckedContinuation { cont in
                send(.speaker(.notify(notice, route: route, cont)))
                // Cancelled before it was posted: onCancel ran too early to name it. Again, behind it.
                if Task.isCancelled { send(.speaker(.withdrawNotice(id: id))) }
            }
        } onCancel: {
            send(.speaker(.withdrawNotice(id: id)))
        }
    }
}
