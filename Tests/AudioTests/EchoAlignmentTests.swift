// EchoAlignment (the detectors' canceller meets each clip at the echo's own delay): the delay read
// from speech through a simulated room, the filter held until then, a clip without an echo, and the
// next clip read again.

import Audio
import AudioFrontEnd
import Foundation
import Testing

@Suite struct EchoAlignmentTests {
    static let far = Result { try AudioFrontEndTests.speech("The weather today is sunny with a light breeze, and tomorrow will bring some rain in the afternoon.") }

    /// Feeds whole 20 ms frames; returns the reference delay after each.
    static func feed(_ a: inout EchoAlignment, near: [Int16], far: [Int16]) -> [Int?] {
        var delays: [Int?] = []
        var i = 0
        while i + 320 <= min(near.count, far.count) {
            a.push(near: Array(near[i..<i + 320]), far: Array(far[i..<i + 320]))
            delays.append(a.referenceDelay)
            i += 320
        }
        return delays
    }

    @Test(arguments: [592, 1_000, 2_400])
    func `the first clip plays as it comes and sets the target; a later one is held, then moved onto it`(delay: Int) throws {
        let far = try Self.far.get()
        var a = EchoAlignment()
        let first = Self.feed(&a, near: AudioFrontEndTests.room(far, delay: 900), far: far)
        #expect(first.allSatisfy { $0 == 0 })                    // nothing learnt yet: no hold, no move
        #expect(a.target == 900 && a.locked == 900)
        a.beginClip()
        let delays = Self.feed(&a, near: AudioFrontEndTests.room(far, delay: delay), far: far)
        // Held (nil) for the first 0.6 s at least, then moved by the difference (negative: read ahead).
        #expect(delays.prefix(30).allSatisfy { $0 == nil })
        let locked = try #require(delays.firstIndex { $0 != nil })
        #expect(locked <= 50, "locked only at frame \(locked)")
        #expect(abs((a.locked ?? -1) - delay) <= 1, "locked at \(a.locked ?? -1)")
        #expect(delays.last! == a.locked! - 900)
        #expect(a.target == 900)
    }

    @Test func `the GCC-PHAT delay finds a pure shift and refuses a reference with no echo in the microphone`() throws {
        let far = Array(try Self.far.get().prefix(6_400))
        let shifted = [Int16](repeating: 0, count: 500) + far.dropLast(500)
        #expect(EchoAlignment.delay(near: shifted, far: far) == 500)
        var rng = SplitMix64(seed: 3)
        let unrelated = (0..<6_400).map { _ in Int16(Int(rng.next() % 2001) - 1000) }
        #expect(EchoAlignment.delay(near: unrelated, far: far) == nil)
        #expect(EchoAlignment.delay(near: shifted, far: [Int16](repeating: 0, count: 6_400)) == nil)   // nothing played
    }

    @Test func `a clip whose echo cannot be read gets the last delay after 2 s, and a new clip is read again`() throws {
        let far = try Self.far.get()
        var a = EchoAlignment()
        _ = Self.feed(&a, near: AudioFrontEndTests.room(far, delay: 700), far: far)
        a.beginClip()
        _ = Self.feed(&a, near: AudioFrontEndTests.room(far, delay: 820), far: far)
        #expect(a.target == 700 && a.locked == 820 && a.lastLocked == 820)
        a.beginClip()
        #expect(a.locked == nil && a.referenceDelay == nil)
        var rng = SplitMix64(seed: 5)
        let noise = far.map { _ in Int16(Int(rng.next() % 401) - 200) }    // the microphone hears no echo
        let delays = Self.feed(&a, near: noise, far: far)
        #expect(a.locked == nil)
        #expect(delays[98] == nil)                                         // 1.98 s: still held
        #expect(delays[100] == 820 - 700)                                  // 2.02 s: the last delay read
        // Until some clip locks, nothing is held.
        var fresh = EchoAlignment()
        #expect(Self.feed(&fresh, near: noise, far: far).allSatisfy { $0 == 0 })
        #expect(fresh.target == nil)
    }

    /// Nine replies through the simulated room, each with its echo a different 28-39 ms late (the
    /// live room's spread, WakeOverReplyTests), through speexdsp with each clip's reference as
    /// played and through EchoAlignment as CaptureCleaner uses it: the echo taken out 1.5-2.5 s
    /// into each reply after the first (where the test's triggers fall), in dB.
    static func replies() throws -> (asPlayed: [Double], aligned: [Double]) {
        let far = try Self.far.get()
        let delays = [32.6, 30.2, 39.1, 33.6, 30.6, 38.4, 38.2, 28.2, 33.0].map { Int($0 * 16) }
        let plain = SpeexEchoCanceller(), moved = SpeexEchoCanceller()
        var alignment = EchoAlignment()
        var asPlayed: [Double] = [], aligned: [Double] = []
        let gap = [Int16](repeating: 0, count: 320)
        for (k, delay) in delays.enumerated() {
            let mic = AudioFrontEndTests.room(far, delay: delay)
            alignment.beginClip()
            var mine = 0.0, plainLeft = 0.0, movedLeft = 0.0
            var i = 0
            while i + 320 <= far.count {
                let near = Array(mic[i..<i + 320])
                let a = plain.process(near: near, far: Array(far[i..<i + 320]))
                let ref = alignment.reference(near: near, end: i + 320) { e in (e - 320..<e).map { $0 >= 0 && $0 < far.count ? far[$0] : 0 } }
                let b = moved.process(near: near, far: ref)
                if i >= 24_000 && i < 40_000 {
                    mine += near.reduce(0.0) { $0 + Double($1) * Double($1) }
                    plainLeft += a.reduce(0.0) { $0 + Double($1) * Double($1) }
                    movedLeft += b.reduce(0.0) { $0 + Double($1) * Double($1) }
                }
                i += 320
            }
            for _ in 0..<15 { _ = plain.process(near: gap, far: gap); _ = moved.process(near: gap, far: gap) }   // 0.3 s between replies
            if k > 0 {
                asPlayed.append(10 * log10(mine / max(plainLeft, 1)))
                aligned.append(10 * log10(mine / max(movedLeft, 1)))
            }
        }
        return (asPlayed, aligned)
    }

    @Test func `replies whose echo delay differs are met where the filter learnt the first`() throws {
        let (asPlayed, aligned) = try Self.replies()
        func f(_ xs: [Double]) -> String { xs.map { String(format: "%.1f", $0) }.joined(separator: ", ") }
        print("echo alignment: 1.5-2.5 s into replies 2-9, dB taken out: as played \(f(asPlayed)); aligned \(f(aligned))")
        let median = { (xs: [Double]) in xs.sorted()[xs.count / 2] }
        #expect(median(aligned) >= median(asPlayed) + 6, "as played \(f(asPlayed)); aligned \(f(aligned))")
        #expect(aligned.allSatisfy { $0 >= 15 }, "aligned \(f(aligned))")
    }
}
