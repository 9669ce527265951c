// The talk loop's side of the speaker sub-state: Listen and notification requests become machine
// inputs, their callers are answered from what the machine decided, and each clip's end (posted by
// the reply executor's child task that played it) moves the sub-state on and answers who waits.

import ClawvoiceCore
import GatewayProtocol

extension TalkLoop {
    func speakerItem(_ item: TalkController.SpeakerItem) async {
        switch item {
        case .listen(let id, let text, let c):
            let before = machine.speaker.listen
            await step(.speaker(.listen(messageId: id, text: text)))
            publish()  // first: the caller's next read must show what its toggle did
            if let now = machine.speaker.listen, now != before, now.what == .listen(messageId: id) {
                var replaced: String?
                if case .listen(let old)? = before?.what { replaced = old }
                c.resume(returning: .speaking(messageId: id, replaced: replaced))
            } else {
                c.resume(returning: .stopped(messageId: id))
            }
        case .stopListen(let c):
            await step(.speaker(.stopListen))
            publish()
            c.resume()
        case .waitForListen(let c):
            guard let playing = machine.speaker.listen else { return c.resume(returning: nil) }
            listenWaiters[playing.generation, default: []].append(c)
        case .notify(let notice, let route, let c):
            noticeAnswers[notice.id] = c
            noticeRoutes[notice.id] = route
            await step(.speaker(.notify(notice)))
        case .withdrawNotice(let id):
            // The invoke stopped waiting: it hears so now, whether or not the notification still speaks.
            noticeAnswers.removeValue(forKey: id)?.resume(returning: nil)
            if machine.speaker.queue.contains(where: { $0.id == id }) { noticeRoutes.removeValue(forKey: id) }
            await step(.speaker(.withdrawNotice(id: id)))
        case .listenEnded(let id, let generation, let report):
            handle.published.withLock { $0.lastListen = (id, report) }
            await step(.speaker(.ended(.listen(messageId: id), generation: generation)))
            for waiter in listenWaiters.removeValue(forKey: generation) ?? [] { waiter.resume(returning: report) }
        case .noticeEnded(let id, let generation, let delivery):
            noticeAnswers.removeValue(forKey: id)?.resume(returning: delivery)
            await step(.speaker(.ended(.notification(id: id), generation: generation)))
        }
    }

    /// The `play` action: the route of a notification is the one its request named.
    func play(_ clip: TalkMachine.SpeakerClip, generation: Int) {
        var route = SpeechRoute.ttsSpeak
        if case .notification(let n) = clip { route = noticeRoutes.removeValue(forKey: n.id) ?? .ttsSpeak }
        replies.play(clip, generation: generation, route: route)
    }

    /// The loop has ended: whoever waits for the speaker hears nothing more will come.
    func releaseSpeakerWaiters() {
        for c in noticeAnswers.values { c.resume(returning: nil) }
        noticeAnswers.removeAll()
        for waiters in listenWaiters.values { waiters.forEach { $0.resume(returning: nil) } }
        listenWaiters.removeAll()
    }
}
