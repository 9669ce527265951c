// system.notify on a voice node: the notification is spoken, title first, then body.
// Ordinary notifications queue: they wait until the speaker is free (a Talk reply, a Listen,
// an earlier notification) and go in the order they arrived. Urgent ones interrupt: they
// silence whatever is speaking and go at once. Both use tts.speak with the espeak-ng fallback.
//
// Params (OpenClawKit `OpenClawSystemNotifyParams`): {title, body, sound?, priority?, delivery?}.
// priority is passive | active | timeSensitive upstream; delivery is system | overlay | auto.
// Interrupting: priority "timeSensitive" or "critical", delivery "interrupt", or `interrupt: true`.
// `sound` is accepted and ignored (the voice is the sound). A passive notification is spoken too.
//
// Result payload (upstream nodes return ok with no payload; the spec's worked example shows
// `{"delivered":true}`), ours: {delivered: true, spoken, engine, outcome, interrupted, queued}:
//   spoken       the parts that were spoken, joined by "\n";
//   engine       "gateway" or "espeak-ng" (of the last part);
//   outcome      "finished", or "stopped" when something cut it off (the rest is then skipped);
//   interrupted  whether this notification silenced other speech;
//   queued       whether the speaker was busy when its turn came (it waited, or interrupted).
// The invoke answers when the notification has been spoken. If the invoke is cancelled (or
// times out) while the notification still waits in the queue, it is dropped unspoken.

import Foundation
import GatewayClient
import GatewayProtocol

/// Speaks `system.notify` notifications through the shared SpeechOutput.
public actor NotificationSpeaker {
    /// One parsed notification.
    public struct Notification: Sendable, Equatable {
        /// Title then body, empty ones left out; never empty.
        public var parts: [String]
        /// Silence current speech and speak now, instead of waiting for the speaker.
        public var interrupts: Bool

        /// - Throws: `NodeInvokeError` INVALID_REQUEST when both title and body are missing or blank.
        public init(params: JSONValue) throws(NodeInvokeError) {
            func field(_ key: String) -> String {
                (params[key]?.stringValue ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
            }
            parts = [field("title"), field("body")].filter { !$0.isEmpty }
            guard !parts.isEmpty else { throw NodeInvokeError(code: .invalidRequest, message: "empty notification") }
            let priority = field("priority").lowercased()
            interrupts = priority == "timesensitive" || priority == "critical"
                || field("delivery").lowercased() == "interrupt" || params["interrupt"]?.boolValue == true
        }
    }

    /// Set when the invoke gave up on a notification that has not started yet.
    private final class Ticket: Sendable {
        let cancelled = Mutex(false)
    }

    private struct Delivery: Sendable {
        var spoken: [String] = []
        var report: SpeechReport?
        var speakerWasBusy = false
        var dropped = false
    }

    private let speech: SpeechOutput
    private let route: SpeechRoute
    /// The last queued notification; the next one starts after it.
    private var tail: Task<Void, Never>?

    public init(speech: SpeechOutput, route: SpeechRoute = .ttsSpeak) {
        self.speech = speech
        self.route = route
    }

    /// The `system.notify` node command, for a `NodeCommandRegistry`.
    public nonisolated var handler: NodeCommandHandler {
        { [self] _, params in try await self.notify(params: params) }
    }

    /// Speaks the notification in `params` and returns the result payload once it is spoken.
    /// - Throws: `NodeInvokeError` INVALID_REQUEST (empty notification), UNAVAILABLE (nothing
    ///   could speak it), or `CancellationError` when the caller stopped waiting.
    public func notify(params: JSONValue) async throws -> JSONValue {
        let note = try Notification(params: params)
        let ticket = Ticket()
        let (stream, continuation) = AsyncStream.makeStream(of: Delivery.self)
        // A cancelled caller ends its iteration below; this marks the ticket so a queued
        // notification is dropped when its turn comes.
        continuation.onTermination = { reason in
            if case .cancelled = reason { ticket.cancelled.withLock { $0 = true } }
        }
        if note.interrupts {
            Task {
                continuation.yield(await self.deliver(note, ticket: ticket))
                continuation.finish()
            }
        } else {
            let previous = tail
            tail = Task {
                await previous?.value
                continuation.yield(await self.deliver(note, ticket: ticket))
                continuation.finish()
            }
        }
        for await delivery in stream {
            return try Self.payload(delivery, note: note)
        }
        throw CancellationError()
    }

    private func deliver(_ note: Notification, ticket: Ticket) async -> Delivery {
        var d = Delivery()
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

    private static func payload(_ d: Delivery, note: Notification) throws -> JSONValue {
        if d.dropped { throw CancellationError() }
        guard let report = d.report, report.outcome != .failed else {
            throw NodeInvokeError(code: .unavailable, message: "could not speak the notification: \(d.report?.error ?? "no speech")")
        }
        return ["delivered": true, "spoken": .string(d.spoken.joined(separator: "\n")), "engine": .string(report.engine),
                "outcome": .string(report.outcome.rawValue), "interrupted": .bool(note.interrupts),
                "queued": .bool(d.speakerWasBusy)]
    }
}
