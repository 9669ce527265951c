// The outbox's second half of delivery: a sent turn counts as delivered only once the
// session's chat.history shows it (one read per session, a short page first), and turns
// older than the policy's expiry are dropped with a line saying whether they were ever sent.

import ClawvoiceCore
import Foundation
import GatewayClient
import GatewayProtocol
import Store

extension OutboxSender {
    func confirm(_ sent: [OutboxItem]) async -> Bool {
        var progressed = true
        // One history read per session; order within a session is kept.
        var sessions: [String] = []
        for item in sent where !sessions.contains(item.sessionKey) { sessions.append(item.sessionKey) }
        for key in sessions {
            let group = sent.filter { $0.sessionKey == key }
            var shown: Set<Int64> = []
            do {
                let policy = machine.policy
                for limit in Set([policy.historyProbeLimit, policy.historyLimit]).sorted() where limit > 0 {
                    let page = try await channel.request(GatewayMethod.chatHistory,
                                                         params: ["sessionKey": .string(key), "limit": .number(Double(limit))],
                                                         timeoutMs: policy.requestTimeoutMs)
                    let messages = page["messages"]?.arrayValue ?? []
                    shown = OutboxConfirmation.confirmed(group, in: messages, slackMs: policy.clockSlackMs)
                    // A page shorter than asked is the whole history: a longer one would show nothing more.
                    if shown.count == group.count || messages.count < limit { break }
                }
            } catch {
                log.log(.debug, "outbox", "chat.history for \(key) failed: \(error)")
            }
            let now = clock.nowMs()
            for item in group {
                if shown.contains(item.seq) {
                    do {
                        if try store.deleteOutbox(seq: item.seq) {
                            log.log(.info, "outbox", "turn \(item.seq) delivered (chat.history shows it)")
                            emit(.confirmed(item))
                        }
                    } catch {
                        log.log(.error, "outbox", "turn \(item.seq) is delivered but cannot be removed: \(error)")
                        progressed = false
                    }
                } else {
                    let outcome = machine.notConfirmed(item, nowMs: now)
                    if case .retry = outcome {
                        log.log(.info, "outbox", "turn \(item.seq) was acknowledged but chat.history does not show it; sending it again")
                    }
                    progressed = apply(outcome, to: item, error: "acknowledged but not in chat.history") && progressed
                }
            }
        }
        return progressed
    }

    func expire() -> Bool {
        let expired: [OutboxItem]
        do {
            expired = try store.expireOutbox(gateway: gateway, olderThanMs: clock.nowMs() - machine.policy.expiryMs)
        } catch {
            log.log(.error, "outbox", "cannot expire old turns: \(error)")
            return false
        }
        let age = Self.duration(machine.policy.expiryMs)
        for item in expired {
            if item.state == .sent {
                log.log(.warning, "outbox", "turn \(item.seq) (\"\(item.preview)\") expired unconfirmed after \(age): "
                        + "the gateway acknowledged it but its history never showed it")
            } else {
                log.log(.warning, "outbox", "turn \(item.seq) (\"\(item.preview)\") expired unsent after \(age)")
            }
            emit(.expired(item))
        }
        return true
    }
}
