// A stopped clip's echo is still cancelled in the frames recorded before the stop (issue 22,
// item 5): frames reach the canceller late, and at a barge-in those frames hold the echo at the
// user's own level, in the middle of the trigger the user is saying.
//
// Every read is placed relative to the stop, never at a later `.now`: on a loaded machine (CI once
// took 50 s over the first test) the test can stall for seconds between two lines.

import Audio
import ClawvoiceCore
import Foundation
import Testing
@testable import Talk

@Suite struct EchoReferenceStopTests {
    @Test func `frames recorded before a stop read the clip; after it, silence`() async throws {
        let r = EchoReference()
        let tone = (0..<16_000 * 60).map { Int16(1_000 + $0 % 500) }   // a minute, never zero
        r.begin(PCMBuffer(format: .voice, samples: tone))
        try await Task.sleep(for: .milliseconds(200))
        let recordedBefore = ContinuousClock.now
        try await Task.sleep(for: .milliseconds(100))
        r.end()
        let stopped = ContinuousClock.now   // at or just after the stop
        // Read after the stop, as the canceller does, for a frame recorded before it.
        let before = try #require(r.position(at: recordedBefore), "a frame recorded before the stop still has the clip")
        let heard = r.samples(clip: before.clip, endingAt: before.index, count: 320)
        #expect(!heard.contains(0), "the samples played before the stop are the clip's")
        #expect(r.samples(endingAt: recordedBefore, count: 320) == heard)
        // After the stop nothing plays: the samples past it are silence, and so is a later frame.
        let later = r.samples(clip: before.clip, endingAt: EchoReference.index(stopped - recordedBefore) + before.index + 16_000, count: 320)
        #expect(later == [Int16](repeating: 0, count: 320), "nothing is heard after the stop")
        #expect(r.position(at: stopped + .milliseconds(1)) == nil)
        #expect(r.samples(endingAt: stopped + .milliseconds(100), count: 320) == [Int16](repeating: 0, count: 320))
        // A frame that straddles the stop, from the frame before it to 200 ms past it, reads the
        // clip up to the stop and silence after.
        let straddleEnd = stopped + .milliseconds(200)
        let straddling = r.samples(endingAt: straddleEnd, count: EchoReference.index(straddleEnd - recordedBefore))
        #expect(straddling.contains { $0 != 0 } && straddling.last == 0, "the clip up to the stop, then silence")
    }

    @Test func `the next clip replaces a stopped one, and a stopped clip is let go after its hold`() async throws {
        let r = EchoReference()
        r.begin(PCMBuffer(format: .voice, samples: [Int16](repeating: 7, count: 16_000)))
        let t = ContinuousClock.now
        r.end()
        #expect(r.position(at: t) != nil)
        r.begin(PCMBuffer(format: .voice, samples: [Int16](repeating: 9, count: 16_000)))
        let p = try #require(r.position(at: .now))
        #expect(r.samples(clip: p.clip, endingAt: max(p.index, 160), count: 160).allSatisfy { $0 == 9 || $0 == 0 })
        let beforeStop = ContinuousClock.now
        r.end()
        // A frame recorded before the stop reads the clip, however late it is read; once a frame
        // from past the hold has been read, no earlier one is still coming and the clip is let go.
        try await Task.sleep(for: .milliseconds(50))
        #expect(r.position(at: beforeStop) != nil, "kept for the frames recorded before the stop")
        _ = r.position(at: beforeStop + .milliseconds(500))   // within the hold of the stop, whenever it came
        #expect(r.position(at: beforeStop) != nil, "a frame inside the hold lets nothing go")
        #expect(r.position(at: beforeStop + EchoReference.stoppedHold + .seconds(10)) == nil)   // past the hold, however late the stop came
        #expect(r.position(at: beforeStop) == nil, "kept no longer than the hold")
    }
}
