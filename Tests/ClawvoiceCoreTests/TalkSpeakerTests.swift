// The speaker sub-state of TalkMachine (TalkMachine+Speaker.swift): Listen, notifications, the
// reply and cues on one loudspeaker, and what preempts what. Pure: input by input, in
// milliseconds, and every order of a handful of requests, stops and clip ends.

@testable import ClawvoiceCore
import Foundation
import Testing

extension TalkMachine.Action {
    /// The clip a `play` action asks for, with its generation.
    var played: (clip: TalkMachine.SpeakerClip, generation: Int)? {
        if case .play(let c, let g) = self { return (c, g) }
        return nil
    }
    var playedNotice: Int? { if case .notification(let n)? = played?.clip { return n.id }; return nil }
    var playedListen: String? { if case .listen(let id, _)? = played?.clip { return id }; return nil }
}

extension MachineDriver {
    @discardableResult
    mutating func speaker(_ input: TalkMachine.SpeakerInput) -> [TalkMachine.Action] { feed(.speaker(input)) }

    @discardableResult
    mutating func notify(_ id: Int, urgent: Bool = false, passive: Bool = false, holdMs: Int64 = 60_000) -> [TalkMachine.Action] {
        speaker(.notify(TalkMachine.Notice(id: id, parts: ["Title \(id)", "Body \(id)"], urgent: urgent, passive: passive, holdMs: holdMs)))
    }

    /// The notification's play action ended (its generation is the one it was played with).
    @discardableResult
    mutating func endNotice(_ id: Int) -> [TalkMachine.Action] {
        let gen = log.last { $0.playedNotice == id }?.played?.generation ?? -1
        return speaker(.ended(.notification(id: id), generation: gen))
    }

    var noticesPlayed: [Int] { log.compactMap(\.playedNotice) }
}

@Suite struct TalkSpeakerListenTests {
    @Test func theSameMessageAgainStopsItAndItsLateEndChangesNothing() throws {
        var d = MachineDriver()
        let first = d.speaker(.listen(messageId: "m1", text: "Hello."))
        let play = try #require(first.compactMap(\.played).first)
        #expect(play.clip == .listen(messageId: "m1", text: "Hello."))
        #expect(d.m.speaker.now == .listen(messageId: "m1"))
        let again = d.speaker(.listen(messageId: "m1", text: "Hello."))
        #expect(again.contains { $0.isStopSpeech } && again.compactMap(\.played).isEmpty, "a user stop, no new clip")
        #expect(d.m.speaker.now == .nothing)
        // Idle again: the same message plays again instead of stopping.
        d.speaker(.ended(.listen(messageId: "m1"), generation: play.generation))
        let third = d.speaker(.listen(messageId: "m1", text: "Hello."))
        #expect(third.compactMap(\.playedListen) == ["m1"])
    }

    @Test func anotherMessageReplacesTheOneBeforeWhoseLateEndIsIgnored() {
        var d = MachineDriver()
        let g1 = d.speaker(.listen(messageId: "m1", text: "One.")).compactMap(\.played).first!.generation
        let g2 = d.speaker(.listen(messageId: "m2", text: "Two.")).compactMap(\.played).first!.generation
        #expect(g2 > g1)
        d.speaker(.ended(.listen(messageId: "m1"), generation: g1))
        #expect(d.m.speaker.now == .listen(messageId: "m2"), "the replaced message's end does not end the new one")
        d.speaker(.ended(.listen(messageId: "m2"), generation: g2))
        #expect(d.m.speaker.now == .nothing)
    }

    @Test func aListenSilencesAReplyAndPushToTalkSilencesTheListen() {
        var d = MachineDriver()
        d.feed(.followReply(runId: "r1"))
        d.feed(.chat(runId: "r1", final: false))
        #expect(d.m.speaker.now == .reply(runId: "r1"))
        d.speaker(.listen(messageId: "m1", text: "Listen wins."))
        #expect(d.m.speaker.now == .listen(messageId: "m1"))
        #expect(d.m.speaker.reply == nil, "the reply was cut off")
        let (_, start) = d.command(.start)
        #expect(start.contains { $0.isStopSpeech })
        #expect(d.m.speaker.now == .nothing, "push-to-talk silences the Listen message")
    }

    @Test(arguments: ["stopWord", "stop", "switch", "lost"])
    func everyStopOfTheTurnSilencesTheListen(stop: String) {
        var d = MachineDriver(settings: { var s = TalkMachine.Settings(); s.stopWordEnabled = true; return s }())
        d.speaker(.listen(messageId: "m1", text: "A long message."))
        switch stop {
        case "stopWord":
            // The stop head hears only while the node speaks on a clean channel.
            d.m.speakingNow = true
            d.feed(.stopWordHeard)
        case "stop": d.feed(.stopSpeaking(speaking: true))
        case "switch": d.feed(.switchSession("agent:other", reason: "switched"))
        default: d.feed(.operatorState(connected: false, mainSessionKey: nil))
        }
        #expect(d.log.contains { $0.isStopSpeech })
        #expect(d.m.speaker.listen == nil && d.m.speaker.now == .nothing)
    }
}

@Suite struct TalkSpeakerNotificationTests {
    @Test func ordinaryNotificationsGoOneAtATimeInTheirOrder() {
        var d = MachineDriver()
        d.notify(1)
        d.notify(2)
        #expect(d.noticesPlayed == [1], "the second waits for the first")
        #expect(d.m.speaker.now == .notification(id: 1))
        d.endNotice(1)
        #expect(d.noticesPlayed == [1, 2])
        d.endNotice(2)
        #expect(d.m.speaker.now == .nothing && d.m.speaker.queue.isEmpty)
    }

    @Test func anUrgentOneDoesNotWaitAndSilencesTheListen() {
        var d = MachineDriver()
        d.speaker(.listen(messageId: "m1", text: "Listening."))
        d.notify(1)
        d.notify(2)
        let out = d.notify(3, urgent: true)
        #expect(out.compactMap(\.playedNotice) == [3], "at once, ahead of the queued one")
        #expect(d.m.speaker.listen == nil, "the Listen message is cut off")
        #expect(d.m.speaker.now == .notification(id: 3))
        // The ordinary ones keep their order behind it.
        d.endNotice(3)
        #expect(d.noticesPlayed == [1, 3])
        d.endNotice(1)
        #expect(d.noticesPlayed == [1, 3, 2])
    }

    @Test func aStopCutsTheSpeakingOneButTheQueuedOnesKeepTheirTurn() {
        var d = MachineDriver()
        d.notify(1)
        d.notify(2)
        d.command(.start)  // push-to-talk silences the speaker
        #expect(d.noticesPlayed == [1], "nothing new starts on the stop itself")
        #expect(d.m.speaker.queue.map(\.id) == [2])
        d.endNotice(1)  // its part came back stopped: the rest of it is skipped
        #expect(d.noticesPlayed == [1, 2])
    }

    @Test func aWithdrawnNotificationThatWaitsIsNeverSpoken() {
        var d = MachineDriver()
        d.notify(1)
        d.notify(2)
        d.notify(3)
        d.speaker(.withdrawNotice(id: 2))
        d.speaker(.withdrawNotice(id: 1))  // already speaking: it goes on
        #expect(d.m.speaker.now == .notification(id: 1))
        d.endNotice(1)
        #expect(d.noticesPlayed == [1, 3])
    }

    @Test func aPassiveOneWaitsWhileTheUserTalksAndGoesWhenTheCaptureEnds() {
        var d = MachineDriver()
        d.command(.start)
        let held = d.notify(1, passive: true, holdMs: 5_000)
        #expect(held.compactMap(\.playedNotice).isEmpty, "not over the user's words")
        #expect(held.contains { if case .wakeAt(let ms) = $0 { return ms == d.now + 5_000 }; return false })
        #expect(d.advance(1_000).compactMap(\.playedNotice).isEmpty)
        let cancel = d.command(.cancel).actions
        #expect(cancel.compactMap(\.playedNotice) == [1], "said as soon as the capture is over")
    }

    @Test func aPassiveOneIsSaidAnywayAfterItsHold() {
        var d = MachineDriver()
        d.command(.start)
        d.notify(1, passive: true, holdMs: 5_000)
        d.notify(2)
        #expect(d.advance(4_999).compactMap(\.playedNotice).isEmpty, "the held one holds the queue")
        #expect(d.advance(1).compactMap(\.playedNotice) == [1])
        d.endNotice(1)
        #expect(d.noticesPlayed == [1, 2])
    }

    @Test func anIdleNodeSaysAPassiveOneAtOnce() {
        var d = MachineDriver()
        #expect(d.notify(1, passive: true).compactMap(\.playedNotice) == [1])
    }
}

@Suite struct TalkSpeakerCueTests {
    func cues(_ out: [TalkMachine.Action]) -> [TalkCue] { out.compactMap { if case .cue(let c) = $0 { return c }; return nil } }

    @Test func muteAndUnmuteAnnouncedAreCuesOfTheSpeakerWhoseEndsClearThem() {
        var d = MachineDriver()
        let mute = d.feed(.setMuted(true, announce: true))
        #expect(cues(mute) == [.mute], "the mute sound is the machine's cue action")
        let at = mute.firstIndex { if case .mutedChanged = $0 { return true }; return false }
        #expect(at != nil && at! < mute.firstIndex { if case .cue = $0 { return true }; return false }!, "after the state changed")
        let g = d.m.speaker.generation
        #expect(d.m.speaker.cue == TalkMachine.Speaker.Clip(what: .cue(.mute), generation: g))
        #expect(d.m.speaker.now == .cue(.mute))
        d.speaker(.ended(.cue(.mute), generation: g))
        #expect(d.m.speaker.now == .nothing)
        let unmute = d.feed(.setMuted(false, announce: true))
        #expect(cues(unmute) == [.unmute])
        #expect(d.m.speaker.now == .cue(.unmute))
        d.speaker(.ended(.cue(.unmute), generation: g))
        #expect(d.m.speaker.now == .nothing)
    }

    @Test func noSoundWhenNotAnnouncedOrWhenNothingChanged() {
        var d = MachineDriver()
        #expect(cues(d.feed(.setMuted(true, announce: false))).isEmpty, "the muted state restored at start is silent")
        #expect(d.m.speaker.now == .nothing)
        #expect(cues(d.feed(.setMuted(true, announce: true))).isEmpty, "already muted: no second sound")
        #expect(cues(d.feed(.setMuted(false, announce: false))).isEmpty)
        #expect(cues(d.feed(.setMuted(false, announce: true))).isEmpty, "already unmuted")
    }

    @Test func aStopSilencesTheMuteSoundAndItsLateEndChangesNothing() {
        var d = MachineDriver()
        d.feed(.setMuted(true, announce: true))
        let g = d.m.speaker.generation
        d.speaker(.listen(messageId: "m1", text: "Listen."))
        #expect(d.m.speaker.cue == nil && d.m.speaker.now == .listen(messageId: "m1"), "a Listen message silences the cue")
        d.speaker(.ended(.cue(.mute), generation: g))
        #expect(d.m.speaker.now == .listen(messageId: "m1"), "the silenced cue's end does not touch the Listen message")
    }
}

@Suite struct TalkSpeakerOrderTests {
    /// Every order of two ordinary notifications, an urgent one, a Listen message, push-to-talk
    /// and a session switch, each clip's end fed back once it plays: each notification is spoken
    /// exactly once, the ordinary ones in the order they were asked for, and the speaker ends with nothing.
    @Test func everyOrderSpeaksEachNotificationOnceAndEndsSilent() {
        let requests = ["n1", "n2", "u3", "listen", "ptt", "switch"]
        var orders = 0
        for order in permutations(requests) {
            var d = MachineDriver()
            for r in order {
                switch r {
                case "n1": d.notify(1)
                case "n2": d.notify(2)
                case "u3": d.notify(3, urgent: true)
                case "listen": d.speaker(.listen(messageId: "m1", text: "Listen."))
                case "ptt": d.command(.start)
                default: d.feed(.switchSession("agent:other", reason: "switched"))
                }
            }
            // Feed back the ends of whatever plays until nothing new starts.
            var ended = Set<Int>()
            while let next = d.noticesPlayed.first(where: { !ended.contains($0) }) {
                ended.insert(next)
                d.endNotice(next)
            }
            if let g = d.log.last(where: { $0.playedListen != nil })?.played?.generation {
                d.speaker(.ended(.listen(messageId: "m1"), generation: g))
            }
            let played = d.noticesPlayed
            #expect(played.sorted() == [1, 2, 3], "\(order): \(played)")
            let asked = order.compactMap { $0 == "n1" ? 1 : $0 == "n2" ? 2 : nil }
            #expect(played.filter { $0 != 3 } == asked, "the ordinary ones in the order asked: \(order): \(played)")
            #expect(d.m.speaker.now == .nothing && d.m.speaker.queue.isEmpty && d.m.speaker.ordinary == nil, "\(order)")
            orders += 1
        }
        #expect(orders == 720)
    }
}

private func permutations<T>(_ items: [T]) -> [[T]] {
    guard items.count > 1 else { return [items] }
    return items.indices.flatMap { i -> [[T]] in
        var rest = items
        let head = rest.remove(at: i)
        return permutations(rest).map { [head] + $0 }
    }
}
