// The echo reference of a streamed clip (a realtime call's audio, issue 23): what is appended is
// what the canceller reads back at its time, and trimming the old part keeps every kept
// sample's time.

import Audio
import ClawvoiceCore
import Foundation
import Testing
@testable import Talk

@Suite struct EchoReferenceStreamTests {
    @Test func `appended audio is read back at its time; nothing without a clip`() {
        let r = EchoReference()
        r.append([1, 2, 3])
        #expect(r.position(at: .now) == nil, "append without begin starts nothing")
        r.begin(PCMBuffer(format: .voice))
        let chunk = (0..<3_200).map { Int16($0 % 1000) }
        r.append(Array(chunk[..<1_600]))
        r.append(Array(chunk[1_600...]))
        let clip = try! #require(r.position(at: .now)?.clip)
        #expect(r.samples(clip: clip, endingAt: 1_600, count: 160) == Array(chunk[1_440..<1_600]))
        #expect(r.samples(clip: clip, endingAt: 3_300, count: 200) == Array(chunk[3_100..<3_200]) + [Int16](repeating: 0, count: 100))
        r.end()
        #expect(r.position(at: .now) == nil)
    }

    @Test func `past a minute the oldest 30 s go and the kept samples keep their time`() {
        let r = EchoReference()
        let beforeBegin = ContinuousClock.now
        r.begin(PCMBuffer(format: .voice))
        let start = try! #require(r.position(at: .now))
        let second = (0..<16_000).map { Int16($0 % 7) }
        for i in 0..<61 { r.append(second.map { $0 &+ Int16(i) }) }
        let t = ContinuousClock.now
        let p = try! #require(r.position(at: t))
        #expect(p.clip == start.clip)
        // 61 s were appended, the first 30 are gone: index 0 is now second 30.
        let first = r.samples(clip: p.clip, endingAt: 10, count: 10)
        #expect(first == Array(second.map { $0 &+ 30 }[0..<10]))
        // Appended at once (not in real time), so the moved start is 30 s after the clip began:
        // `t`'s index in it is 30 s less than the time since then. That time is bracketed by two
        // clock reads, not taken to be under a second, so a stall on a loaded machine between the
        // begin and `t` cannot fail it.
        let moved = p.index + 30 * 16_000
        #expect(moved >= 0 && moved <= EchoReference.index(t - beforeBegin) + 1,
                "the start moved on by 30 s with the trimmed samples (index \(p.index), \(t - beforeBegin) since the begin)")
    }
}
