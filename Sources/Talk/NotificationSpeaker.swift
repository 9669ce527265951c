// system.notify on a voice node: the notification is spoken, title first, then body.
// Ordinary notifications queue: they wait until the speaker is free (a Talk reply, a Listen,
// an earlier notification) and go in the order they arrived. Urgent ones interrupt: they
// silence whatever is speaking and go at once. Both use tts.speak with the espeak-ng fallback.
//
// Params and errors are the official Linux node's (SystemNotify.swift parses them):
// {title, body, sound?, priority?, delivery?}; priority passive | active | timeSensitive.
// Interrupting: priority "timeSensitive" (or "critical"), delivery "interrupt", or `interrupt: true`.
// `sound` is accepted and ignored (the voice is the sound). A passive notification queues like
// an active one, except that it is not said while the user talks (a capture is live), for at most
// `passiveWaitMs`.
//
// The speaker owns no task and no queue: the talk loop's machine keeps them (its speaker
// sub-state, TalkMachine+Speaker.swift: the order, the hold for a passive one while a capture is
// live, what an urgent one silences), and its reply executor speaks the parts as a child task
// of the loop.
//
// The wire result is the Linux node's `{"ok": true}`. What happened is in `deliver(params:)`'s
// NotificationReport (spoken parts, engine, outcome, interrupted, queued) and in the log.
// The invoke answers when the notification has been spoken. If the invoke is cancelled (or
// times out) while the notification still waits in the queue, it is dropped unspoken.

import Synchronization
import Foundation
public import GatewayClient
public import GatewayProtocol

/// Speaks `system.notify` notifications through the talk loop's speaker.
public struct NotificationSpeaker: Sendable {
    /// One parsed notification (see SystemNotifyRequest for the rules).
    public typealias Notification = SystemNotifyRequest

    /// What speaking one notification came to.
    public struct NotificationReport: Sendable, Equatable {
        /// The parts that were spoken, joined by "\n".
        public var spoken: String
        /// "gateway" or "espeak-ng" (of the last part).
        public var engine: String
        /// "finished", or "stopped" when something cut it off (the rest is then skipped).
        public var outcome: String
        /// Whether this notification silenced other speech.
        public var interrupted: Bool
        /// Whether the speaker was busy when its turn came (it waited, or interrupted).
        public var queued: Bool
        public var priority: NotifyPriority
    }

    private let talk: TalkController
    private let route: SpeechRoute

    /// Config `talk.speakNotifications`: when false every system.notify answers NOTIFICATIONS_DISABLED.
    private let enabled: Bool

    /// How long a passive notification waits for the user to finish before it is spoken anyway.
    private let passiveWaitMs: Int

    public init(talk: TalkController, route: SpeechRoute = .ttsSpeak, enabled: Bool = true, passiveWaitMs: Int = 60_000) {
        self.talk = talk
        self.route = route
        self.enabled = enabled
        self.passiveWaitMs = passiveWaitMs
    }

    /// The `system.notify` node command, for a `NodeCommandRegistry`.
    public var handler: NodeCommandHandler {
        { [self] _, params in try await self.notify(params: params) }
    }

    /// Speaks the notification in `params` and returns the result payload, `{"ok": true}`, once it is spoken.
    /// - Throws: `NodeInvokeError` NOTIFICATIONS_DISABLED (off in the config), INVALID_REQUEST
    ///   (empty notification), NOTIFICATIONS_UNAVAILABLE (nothing could speak it), or
    ///   `CancellationError` when the caller stopped waiting.
    public func notify(params: JSONValue) async throws -> JSONValue {
        _ = try await deliver(params: params)
        return SystemNotifyRequest.result
    }

    /// As `notify`, returning what happened instead of the wire result.
    public func deliver(params: JSONValue) async throws -> NotificationReport {
        let note = try SystemNotifyRequest.parse(params, enabled: enabled)
        // A cancelled caller hears so at once; its notification is dropped unless it already speaks.
        guard let delivery = await talk.notify(parts: note.parts, urgent: note.interrupts, passive: note.priority == .passive,
                                               holdMs: Int64(passiveWaitMs), route: route) else { throw CancellationError() }
        return try Self.payload(delivery, note: note)
    }

    private static func payload(_ d: NoticeDelivery, note: Notification) throws -> NotificationReport {
        guard let report = d.report, report.outcome != .failed else {
            throw NodeInvokeError(code: .notificationsUnavailable, message: "could not speak the notification: \(d.report?.error ?? "no speech")")
        }
        return NotificationReport(spoken: d.spoken.joined(separator: "\n"), engine: report.engine, outcome: report.outcome.rawValue,
                                  interrupted: note.interrupts, queued: d.speakerWasBusy, priority: note.priority)
    }
}
