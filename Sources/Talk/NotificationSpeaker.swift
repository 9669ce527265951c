// system.notify on a voice node: the notification is spoken, title first, then body.
// Ordinary notifications queue: they wait until the speaker is free (a Talk reply, a Listen,
// an earlier notification) and go in the order they arrived. Urgent ones interrupt: they
// silence whatever is speaking and go at once. Both use tts.speak with the espeak-ng fallback.
//
// Params and errors are the official Linux node's (SystemNotify.swift parses them):
// {title, body, sound?, priority?, delivery?}; priority passive | active | timeSensitive.
// Interrupting: priority "timeSensitive" (or "critical"), delivery "interrupt", or `interrupt: true`.
// `sound` is accepted and ignored (the voice is the sound). A passive notification queues like
// an active one here; holding it while the user talks is the talk core's decision (it gets the
// parsed `priority`).
//
// The wire result is the Linux node's `{"ok": true}`. What happened is in `deliver(params:)`'s
// NotificationReport (spoken parts, engine, outcome, interrupted, queued) and in the log.
// The invoke answers when the notification has been spoken. If the invoke is cancelled (or
// times out) while the notification still waits in the queue, it is dropped unspoken.

import Synchronization
import Foundation
public import GatewayClient
public import GatewayProtocol

/// Speaks `system.notify` notifications through the shared SpeechOutput.
public actor NotificationSpeaker {
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

    /// Set when the invoke gave up on a notification that has not started yet.
    private final class Ticket: Sendable {
        let cancelled = Mutex(false)
    }

    private struct Delivery: Sendable {
        var waitedForUser = false
        var spoken: [String] = []
        var report: SpeechReport?
        var speakerWasBusy = false
        var dropped = false
    }

    private let speech: SpeechOutput
    private let route: SpeechRoute
    /// The last queued notification; the next one starts after it.
    private var tail: Task<Void, Never>?

    /// Config `talk.speakNotifications`: when false every system.notify answers NOTIFICATIONS_DISABLED.
    private let enabled: Bool

    /// Whether the user is talking to the node right now (a capture is live): a passive
    /// notification waits for the end of it.
    private let userTalking: @Sendable () -> Bool
    /// How long a passive notification waits for the user to finish before it is spoken anyway.
    private let passiveWaitMs: Int

    public init(speech: SpeechOutput, route: SpeechRoute = .ttsSpeak, enabled: Bool = true,
                passiveWaitMs: Int = 60_000, userTalking: @escaping @Sendable () -> Bool = { false }) {
        self.speech = speech
        self.route = route
        self.enabled = enabled
        self.passiveWaitMs = passiveWaitMs
        self.userTalking = userTalking
    }

    /// The `system.notify` node command, for a `NodeCommandRegistry`.
    public nonisolated var handler: NodeCommandHandler {
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
        let ticket = Ticket()
        let (stream, continuation) = AsyncStream.makeStream(of: Delivery.self)
        // A cancelled caller ends its iteration below; this marks the ticket so a queued
        // notification is dropped when its turn comes.
        continuation.onTermination = { reason in
            if case .cancelled = reason { ticket.cancelled.withLock { $0 = true } }
        }
        // An interrupting notification goes at once; an ordinary one after the one queued before it.
        let previous = note.interrupts ? nil : tail
        // Unstructured: a notification outlives the invoke that asked for it (a cancelled caller
        // drops it only while it waits), and system.notify handlers run outside any service's group.
        let job = Task {
            await previous?.value
            continuation.yield(await self.deliver(note, ticket: ticket))
            continuation.finish()
        }
        if !note.interrupts { tail = job }
        for await delivery in stream {
            return try Self.payload(delivery, note: note)
        }
        throw CancellationError()
    }

    private func deliver(_ note: Notification, ticket: Ticket) async -> Delivery {
        var d = Delivery()
        if note.priority == .passive {
            // Passive: never over the user's own words; said once the capture is over.
            var waited = 0
            while userTalking() && waited < passiveWaitMs && !ticket.cancelled.withLock({ $0 }) {
                try? await Task.sleep(for: .milliseconds(100))
                waited += 100
            }
            d.waitedForUser = waited > 0
        }
        d.speakerWasBusy = await speech.isSpeaking
        for (index, part) in note.parts.enumerated() {
            if ticket.cancelled.withLock({ $0 }) && d.spoken.isEmpty {
                d.dropped = true
                return d
            }
            let report: SpeechReport
            if index == 0 && note.interrupts {
                report = await speech.interrupt(with: part, route: route)
            } else {
                // The body queues too: a reply that started after the title keeps the floor.
                report = await speech.speakWhenIdle(part, route: route)
            }
            d.report = report
            if report.outcome == .failed { return d }
            d.spoken.append(part)
            // Cut off (a user stop, PTT, an urgent notification): the rest is not worth saying.
            if report.outcome == .stopped { return d }
        }
        return d
    }

    private static func payload(_ d: Delivery, note: Notification) throws -> NotificationReport {
        if d.dropped { throw CancellationError() }
        guard let report = d.report, report.outcome != .failed else {
            throw NodeInvokeError(code: .notificationsUnavailable, message: "could not speak the notification: \(d.report?.error ?? "no speech")")
        }
        return NotificationReport(spoken: d.spoken.joined(separator: "\n"), engine: report.engine, outcome: report.outcome.rawValue,
                                  interrupted: note.interrupts, queued: d.speakerWasBusy, priority: note.priority)
    }
}
