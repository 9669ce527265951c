// The microphone's pace (issue 25), TalkMachine state by state: relaxed (80 ms reads, four frames
// an item) only while nothing but the wake listener hears a frame; prompt for a capture, its
// ending, the speaker playing and a call's open microphone.

@testable import ClawvoiceCore
import Foundation
import Testing

@Suite struct MicrophonePacingTests {
    @Test func `relaxed only at rest with the speaker silent and no call`() {
        var d = MachineDriver()
        #expect(d.m.microphonePacing(speakerPlaying: false) == .relaxed)
        #expect(d.m.microphonePacing(speakerPlaying: true) == .prompt, "barge-in, the stop word and the canceller want each frame")
        d.command(.start)
        #expect(d.m.microphonePacing(speakerPlaying: false) == .prompt, "a capture hears each frame as it comes")
        d.command(.stop)
        #expect(!d.m.isIdle && d.m.microphonePacing(speakerPlaying: false) == .prompt, "still prompt while the turn goes out")
        d.feed(.relayFinished(id: "c1", transcript))
        #expect(d.m.microphonePacing(speakerPlaying: false) == .prompt, "delivering")
        d.feed(.delivered(id: "c1", .queued, idempotencyKey: "turn-c1"))
        #expect(d.m.isIdle && d.m.microphonePacing(speakerPlaying: false) == .relaxed)
        d.feed(.callStarted(id: "call-1"))
        #expect(d.m.microphonePacing(speakerPlaying: false) == .prompt, "the call's microphone")
        d.feed(.callEnded(id: "call-1"))
        #expect(d.m.microphonePacing(speakerPlaying: false) == .relaxed)
    }

    @Test func `relaxed reads are one wake front-end hop, prompt ones a frame`() {
        #expect(MicrophonePacing.relaxed.fragmentMilliseconds == 80 && MicrophonePacing.relaxed.framesPerItem == 4)
        #expect(MicrophonePacing.prompt.fragmentMilliseconds == 20 && MicrophonePacing.prompt.framesPerItem == 1)
        #expect(MicrophonePacing.relaxed.fragmentMilliseconds == 20 * MicrophonePacing.relaxed.framesPerItem)
    }
}
