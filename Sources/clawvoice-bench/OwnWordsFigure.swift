// `clawvoice-bench --own-words [--tries N]`: a real `clawvoice run` on a private PulseAudio whose
// speaker is looped back into its microphone (as --wake-over-reply), wake trigger "computer" and
// the stop word on, speaks replies that say "computer" and "stop" themselves, with nobody talking.
// Each try counts the turns the gateway receives (the node woke itself) and whether the reply
// was cut short (the node stopped itself); the goal is none of either (OwnWords).

import ClawvoiceCore
import ClawvoiceTesting
import Foundation
import LoopbackGateway
import NodeRuntime

/// The replies, taken in turn: each says the trigger or "stop" early in a clip, where the linear
/// canceller is still waiting for the clip's echo delay, and again later.
let ownWordsReplies = [
    "Your computer is ready. I checked the computer this morning, and the computer says that the update has finished.",
    "Stop at the bakery on your way home. Then stop by the post office, and please do not stop at the bank until the rain stops.",
]

func ownWordsFigures(tries: Int, pulse: PrivatePulseServer) async throws -> [Figure] {
    try await withLoopbackDaemon(pulse: pulse) { try await ownWords(tries: tries, daemon: $0) }
}

private func ownWords(tries: Int, daemon: DaemonUnderTest) async throws -> [Figure] {
    var woke = 0, cut = 0
    var longest: [Int: Double] = [:]
    var spoken: [(reply: Int, seconds: Double)] = []
    for k in 0..<tries {
        let reply = k % ownWordsReplies.count
        let before = await daemon.gateway.requests(method: "chat.send").count
        let say = try run(daemon.binary, ["say", "--local", ownWordsReplies[reply]], env: daemon.environment)
        say.process.waitUntilExit()
        // A wake capture ends on silence (5 s when only the trigger was heard) and sends its turn then.
        try await Task.sleep(for: .seconds(6))
        let n = await daemon.gateway.requests(method: "chat.send").count - before
        if n > 0 { woke += 1; _ = try? run(daemon.binary, ["stop"], env: daemon.environment).process.waitUntilExit() }
        let text = String(decoding: (try? say.output?.readToEnd()) ?? Data(), as: UTF8.self)
        let seconds = spokeSeconds(text)
        longest[reply] = max(longest[reply] ?? 0, seconds)
        spoken.append((reply, seconds))
        note("own words: try \(k + 1) of \(tries): \(n) turn(s); the daemon \(text.trimmingCharacters(in: .whitespacesAndNewlines))")
    }
    // A reply is cut short when it played half a second less than the same reply at its longest.
    for s in spoken where s.seconds < (longest[s.reply] ?? 0) - 0.5 { cut += 1 }
    return [
        Figure(name: "own_words_self_wakes", value: Double(woke), unit: "of \(tries) replies", baseline: nil, ratio: nil,
               detail: "a real daemon, its speaker looped into its microphone (40 ms, −9 dB), echo cancelled, trigger \"computer\" and the stop word on; replies that say \"computer\" or \"stop\" themselves, nobody talking: replies after which the gateway received a turn (goal 0)"),
        Figure(name: "own_words_cut_short", value: Double(cut), unit: "of \(tries) replies", baseline: nil, ratio: nil,
               detail: "the same replies: played half a second or more less than the same reply at its longest in the run (the node stopped itself; goal 0)"),
    ]
}
