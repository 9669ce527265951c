// ReferenceCursor, the echo reference's position per capture frame (EchoCancel.swift), on frame
// times shaped like a real PulseAudio's (the echo room's recordings: the first frames placed by
// the clip's hand-over until the first timing reading, then the recorded time within a few
// samples, now and then a frame a few milliseconds late). A linear echo canceller loses what it
// has learnt whenever the reference moves, so the cursor must land on the time and stay there.

import Testing
@testable import Talk

@Suite struct ReferenceCursorTests {
    /// Frame `k`'s target: the end of its 320 samples, `offset` late, with ±4 samples of jitter
    /// and every 23rd frame 60 samples late (a burst from the server).
    static func target(_ k: Int, offset: Int) -> Int {
        320 * (k + 1) + offset + [-4, 0, 3, -2, 4, 1, -3][k % 7] + (k % 23 == 11 ? 60 : 0)
    }

    static func run(_ targets: [Int], clip: (Int) -> Int = { _ in 0 }) -> (ends: [Int], cursor: ReferenceCursor) {
        var cursor = ReferenceCursor()
        let ends = targets.indices.map { cursor.end(target: targets[$0], clip: clip($0), count: 320) }
        return (ends, cursor)
    }

    @Test func `jittered frame times never move the reference`() {
        let (ends, cursor) = Self.run((0..<3_000).map { Self.target($0, offset: 12) })
        #expect(cursor.moves == 0)
        #expect(zip(ends, ends.dropFirst()).allSatisfy { $1 == $0 + 320 })
    }

    /// A recording's start (r4 of the echo room): frames placed 4,726, 3,117 and 1,514 samples
    /// ahead before the first timing reading, then the timing info's 12. The old cursor stepped
    /// by its running mean, stopped 79 samples short, and jumped by 80 samples 20 s later.
    @Test func `the reference lands on the first timing reading and stays there`() {
        let targets: [Int] = (0..<2_000).map { (k: Int) -> Int in
            if k < 5 { return 320 * (k + 1) + 4_726 }
            if k < 10 { return 320 * (k + 1) + 3_117 }
            if k < 15 { return 320 * (k + 1) + 1_514 }
            return Self.target(k, offset: 12)
        }
        let (ends, cursor) = Self.run(targets)
        let settled = 30
        let errors: [Int] = (settled..<targets.count).map { (k: Int) -> Int in ends[k] - (320 * (k + 1) + 12) }
        #expect(errors.allSatisfy { abs($0) <= 8 }, "off by \(errors.min()!)…\(errors.max()!) samples after frame \(settled)")
        #expect(zip(ends[settled...], ends[(settled + 1)...]).allSatisfy { $1 == $0 + 320 }, "the reference moved after frame \(settled)")
        #expect(cursor.moves <= 3, "\(cursor.moves) moves")
    }

    /// The test server's timing readings (t9 of the echo room): the time wanders 80-120 samples
    /// (a fragment) late for up to two seconds at a time while the speaker's real position, found
    /// by correlating the recording with what was played (tests/audio/echo-offsets.py), never
    /// moved. A first median cursor, steering at 5 ms over nine frames, followed each wander:
    /// 30 moves in 45 s, and the linear filter never converged (7 dB).
    @Test func `timing readings that wander by a fragment never move the reference`() {
        let targets = (0..<2_000).map { k in Self.target(k, offset: (k / 100) % 2 == 1 ? 12 + 80 + (k % 3) * 20 : 12) }
        let (ends, cursor) = Self.run(targets)
        #expect(cursor.moves == 0, "\(cursor.moves) moves")
        #expect(zip(ends, ends.dropFirst()).allSatisfy { $1 == $0 + 320 })
    }

    /// An underrun: the speaker played 40 ms of silence, so the clip is heard 640 samples later
    /// (t8 of the echo room, confirmed by correlation). The cursor follows within five frames, in
    /// one move, and stays: the first version moved back and forth eleven times, its older
    /// errors (of the old alignment) pulling it back.
    @Test func `a real change of alignment is followed within five frames, in one move`() {
        let targets = (0..<1_000).map { Self.target($0, offset: $0 < 500 ? 12 : 12 - 640) }
        let (ends, cursor) = Self.run(targets)
        #expect(cursor.moves == 1, "\(cursor.moves) moves")
        for k in 506..<1_000 { #expect(abs(ends[k] - (320 * (k + 1) + 12 - 640)) <= 8, "frame \(k)") }
    }

    /// Smaller lasting changes (15 ms) are followed too, within half a second.
    @Test func `a lasting change of 15 ms is followed within half a second`() {
        let targets = (0..<1_000).map { Self.target($0, offset: $0 < 500 ? 12 : 12 + 240) }
        let (ends, cursor) = Self.run(targets)
        #expect(cursor.moves == 1, "\(cursor.moves) moves")
        for k in 526..<1_000 { #expect(abs(ends[k] - (320 * (k + 1) + 12 + 240)) <= 8, "frame \(k)") }
    }

    @Test func `a new clip or a jump of more than 100 ms is taken at once`() {
        let newClip = Self.run((0..<100).map { $0 < 50 ? 320 * ($0 + 1) : 320 * ($0 - 49) }, clip: { $0 < 50 ? 1 : 2 })
        #expect(newClip.ends[50] == 320)
        let jump = Self.run((0..<100).map { 320 * ($0 + 1) + ($0 < 50 ? 0 : 4_000) })
        #expect(jump.ends[50] == 320 * 51 + 4_000)
        #expect(jump.cursor.moves == 1)
    }
}
