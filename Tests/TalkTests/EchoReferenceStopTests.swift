// A stopped clip's echo is still cancelled in the frames recorded before the stop (issue 22,
// item 5): frames reach the canceller late, and at a barge-in those frames hold the echo at the
// user's own level, in the middle of the trigger the user is saying.
//
// The reference lets a stopped clip go by the wall clock, so these tests hold it long enough
// that a stall on a loaded machine (CI once took 50 s over the first test) cannot let it go early,
// and every read is placed relative to the stop, never to a later `.now`.

import Audio
import ClawvoiceCore
import Foundation
import Testing
@testable import Talk

@Suite struct EchoReferenceStopTests {
    @Test func `frames recorded before a stop read the clip; after it, silence`() async throws {
        let r = EchoReference(stoppedHold: .seconds(600))
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
        let hold = Duration.seconds(5)   // longer than a stall on a loaded machine between a stop and the read after it
        let r = EchoReference(stoppedHold: hold)
        r.begin(PCMBuffer(format: .voice, samples: [Int16](repeating: 7, count: 16_000)))
        let t = ContinuousClock.now
        r.end()
        #expect(r.position(at: t) != nil)
        r.begin(PCMBuffer(format: .voice, samples: [Int16](repeating: 9, count: 16_000)))
        let p = try #require(r.position(at: .now))
        #expect(r.samples(clip: p.clip, endingAt: max(p.index, 160), count: 160).allSatisfy { $0 == 9 || $0 == 0 })
        let beforeStop = ContinuousClock.now
        r.end()
        // A frame recorded before the stop reads the clip at once, and no longer once the hold is over.
        #expect(r.position(at: beforeStop) != nil, "kept for the frames recorded before the stop")
        try await Task.sleep(for: hold + .milliseconds(100))
        #expect(r.position(at: beforeStop) == nil, "kept no longer than the hold")
    }

    @Test func `the daemon's reference holds a stopped clip for a second`() {
        #expect(EchoReference().stoppedHold == .seconds(1))
    }
}
