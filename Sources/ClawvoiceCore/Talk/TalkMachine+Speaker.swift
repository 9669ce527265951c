// TalkMachine's speaker sub-state: the one loudspeaker and what it says (nothing, a reply, a
// system.notify notification, a Listen message, a cue), who waits for it, and what silences
// what. The players (the reply executor's jobs) only carry out its `play` and `stopSpeech`
// actions and report each clip's end back as an input. Pure, like the rest of TalkMachine.
//
// What preempts what (as before the speaker moved here):
// - A Listen message and an urgent notification interrupt whatever speaks (a reply, a Listen
//   message, a notification's part, a cue). Asking for the Listen message that plays stops it.
// - An ordinary notification waits for the one queued before it, then for the speaker to be free
//   (a streamed reply holds it from its first sentence to its last: the executor's wait); a
//   passive one also waits while the user talks (a capture is live), at most its `holdMs`.
// - A reply and a cue silence nothing; a cue is skipped while the speaker plays (the executor).
// - Every `stopSpeech` of the turn (push-to-talk or a wake capture starting, barge-in, the stop
//   word, `clawvoice stop`, a session switch, a lost gateway) silences the speaker: the Listen
//   message, the reply and the cue end; a notification's part is cut and the rest of it skipped
//   (its end comes from the executor); notifications still queued keep their turn.

import Foundation

extension TalkMachine {
    /// One system.notify notification as the speaker sees it.
    public struct Notice: Sendable, Equatable {
        public var id: Int
        /// Title, then body (the empty ones already left out).
        public var parts: [String]
        /// Interrupts whatever speaks (timeSensitive, critical, delivery interrupt).
        public var urgent: Bool
        /// Not said over the user's own words: held while a capture is live, at most `holdMs`.
        public var passive: Bool
        public var holdMs: Int64
        public init(id: Int, parts: [String], urgent: Bool = false, passive: Bool = false, holdMs: Int64 = 60_000) {
            (self.id, self.parts, self.urgent, self.passive, self.holdMs) = (id, parts, urgent, passive, holdMs)
        }
    }

    /// What the speaker is asked to play (the `play` action).
    public enum SpeakerClip: Sendable, Equatable {
        /// A chat message read out on request (tts.speak): interrupts whatever speaks.
        case listen(messageId: String, text: String)
        /// Its parts in order; an urgent one's title interrupts, every other part waits for a free speaker.
        case notification(Notice)
    }

    /// What is playing now.
    public enum Playing: Sendable, Equatable, Hashable {
        case nothing
        case reply(runId: String)
        case notification(id: Int)
        case listen(messageId: String)
        case cue(TalkCue)
        case chime
    }

    public enum SpeakerInput: Sendable, Equatable {
        /// The Listen button on `messageId`: stop it if it plays, otherwise speak `text` instead of anything else.
        case listen(messageId: String, text: String)
        /// Stop the Listen message playing, if any.
        case stopListen
        case notify(Notice)
        /// The invoke stopped waiting for notification `id`: dropped if it has not started.
        case withdrawNotice(id: Int)
        /// A clip ended (finished, stopped or failed); `generation` is the one its `play` carried.
        case ended(Playing, generation: Int)
    }

    /// The speaker sub-state (TalkMachine.speaker).
    public struct Speaker: Sendable, Equatable {
        public struct Clip: Sendable, Equatable {
            public var what: Playing
            public var generation: Int
        }
        /// Moved by every clip that silences the speaker and every stop: an older clip's end changes nothing.
        public internal(set) var generation = 0
        /// The Listen message playing (its end not in yet, not silenced since).
        public internal(set) var listen: Clip?
        /// Notifications started and not ended yet, oldest first.
        public internal(set) var notifications: [Clip] = []
        /// The ordinary notification speaking now: the next queued one waits for its end.
        public internal(set) var ordinary: Int?
        /// Notifications not started: ordinary ones in order, and passive ones held for the user.
        public internal(set) var queue: [Notice] = []
        /// When the held passive notification `id` is said anyway.
        public internal(set) var holds: [Int: Int64] = [:]
        /// The reply being spoken (its first text fed, its end not in, not silenced since).
        public internal(set) var reply: String?
        public internal(set) var cue: Clip?

        /// The one thing the user hears now: a Listen message or notification over a reply, over a cue.
        public var now: Playing {
            if let l = listen { return l.what }
            if let n = notifications.last { return n.what }
            if let r = reply { return .reply(runId: r) }
            return cue?.what ?? .nothing
        }

        /// Everything audible stops; notifications end through their own `ended` (the rest of one is skipped).
        mutating func silence() {
            generation += 1
            listen = nil
            reply = nil
            cue = nil
        }
    }

    // MARK: inputs

    mutating func speakerInput(_ input: SpeakerInput, nowMs: Int64, out: inout [Action]) {
        switch input {
        case .listen(let id, let text):
            if speaker.listen?.what == .listen(messageId: id) {
                // The same message again: a user stop (never a fallback).
                speaker.silence()
                out.append(.stopSpeech)
                out.append(.log(.info, "speech", "listen \(id) stopped"))
                return
            }
            speaker.silence()
            speaker.listen = Speaker.Clip(what: .listen(messageId: id), generation: speaker.generation)
            out.append(.play(.listen(messageId: id, text: text), generation: speaker.generation))
        case .stopListen:
            guard speaker.listen != nil else { return }
            speaker.silence()
            out.append(.stopSpeech)
        case .notify(let n):
            // An urgent one does not wait for the ordinary ones queued before it.
            if n.urgent && !(n.passive && !isIdle) { start(n, out: &out) } else { speaker.queue.append(n) }
        case .withdrawNotice(let id):
            guard let i = speaker.queue.firstIndex(where: { $0.id == id }) else { return }
            speaker.queue.remove(at: i)
            speaker.holds.removeValue(forKey: id)
            out.append(.log(.info, "speech", "notification \(id) dropped unspoken: its invoke ended"))
        case .ended(let what, let gen):
            switch what {
            case .listen:
                if speaker.listen == Speaker.Clip(what: what, generation: gen) { speaker.listen = nil }
            case .notification(let id):
                speaker.notifications.removeAll { $0.what == what }
                if speaker.ordinary == id { speaker.ordinary = nil }
            case .reply(let runId):
                if speaker.reply == runId { speaker.reply = nil }
            case .cue, .chime:
                if speaker.cue == Speaker.Clip(what: what, generation: gen) { speaker.cue = nil }
            case .nothing:
                break
            }
        }
    }

    /// What the turn's own actions did to the speaker (every input but the speaker's).
    mutating func speakerFollows(_ actions: [Action]) {
        for action in actions {
            switch action {
            case .stopSpeech: speaker.silence()
            case .feedReply(let runId): speaker.reply = runId
            case .cue(let c): speaker.cue = Speaker.Clip(what: .cue(c), generation: speaker.generation)
            case .playChime: speaker.cue = Speaker.Clip(what: .chime, generation: speaker.generation)
            default: break
            }
        }
    }

    /// After every input: start the notifications whose turn has come.
    mutating func advanceNotices(nowMs: Int64, out: inout [Action]) {
        var i = 0
        while i < speaker.queue.count {
            let n = speaker.queue[i]
            // Ordinary ones go one at a time, in order; held urgent ones do not wait for them.
            let next = n.urgent || (speaker.ordinary == nil && !speaker.queue[..<i].contains { !$0.urgent })
            guard next else { i += 1; continue }
            if n.passive && !isIdle {
                let until = speaker.holds[n.id] ?? nowMs + n.holdMs
                if nowMs < until {
                    if speaker.holds[n.id] == nil { out.append(.log(.debug, "speech", "notification \(n.id) waits for the user to finish")) }
                    speaker.holds[n.id] = until
                    i += 1
                    continue
                }
            }
            speaker.queue.remove(at: i)
            speaker.holds.removeValue(forKey: n.id)
            start(n, out: &out)
        }
    }

    private mutating func start(_ n: Notice, out: inout [Action]) {
        // An urgent title silences what speaks; an ordinary one waits for the speaker in the executor.
        if n.urgent { speaker.silence() } else { speaker.ordinary = n.id }
        speaker.notifications.append(Speaker.Clip(what: .notification(id: n.id), generation: speaker.generation))
        out.append(.play(.notification(n), generation: speaker.generation))
    }
}
