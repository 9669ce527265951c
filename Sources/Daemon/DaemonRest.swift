// The daemon at rest (issue 25): after `restMs` with no turn, speech or reply, it gives back the
// memory resting does not need (RestMemory: free heap pages, the start-up code's pages). Woken
// only by activity and by its one deadline: nothing polls.

import Audio
import ClawvoiceCore
import Foundation
import GatewayClient
import GatewayCrypto
import NodeRuntime
import Synchronization
import Talk

/// Talk and speech activity: a count the rest service compares, and a wake-up for it.
final class RestActivity: Sendable {
    private let count = Mutex(0)
    let pokes: AsyncStream<Void>
    private let sink: AsyncStream<Void>.Continuation

    init() { (pokes, sink) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1)) }

    func poke() {
        count.withLock { $0 += 1 }
        sink.yield()
    }

    var value: Int { count.withLock { $0 } }
}

extension NodeDaemon {
    /// How long a rest lasts before memory is given back.
    static let restMs: Int64 = 10_000

    func restService() async {
        var timer = RestTimer(restMs: Self.restMs, nowMs: nowMs())
        var seen = restActivity.value
        var pokes = restActivity.pokes.makeAsyncIterator()
        while !Task.isCancelled {
            if let due = timer.dueMs {
                let wait = due - nowMs()
                if wait > 0 { try? await Task.sleep(for: .milliseconds(wait)) }
                if Task.isCancelled { return }
                let now = restActivity.value
                if now != seen { seen = now; timer.activity(nowMs: nowMs()); continue }
                let busy = talk.phase != .idle || audio.playback.isPlaying
                if timer.tick(nowMs: nowMs(), busy: busy) {
                    let kb = RestMemory.release()
                    log.log(.debug, "daemon", "at rest: gave back the heap's free pages and \(kb / 1024) MB of start-up code pages")
                    continue
                }
            }
            // Released, or busy without a poke yet: wait for the next activity.
            guard await pokes.next() != nil else { return }
            seen = restActivity.value
            timer.activity(nowMs: nowMs())
        }
    }
}
