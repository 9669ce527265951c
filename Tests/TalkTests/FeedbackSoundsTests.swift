// The generated feedback sounds (moved from TalkControlsTests when the machine's tests went to
// ClawvoiceCoreTests; FeedbackSounds and the chime stay in Talk).

import ClawvoiceCore
import Testing
@testable import Talk

@Suite struct FeedbackSoundsTests {
    @Test func `the generated cues differ from each other and from the chime`() {
        let all = TalkCue.allCases.map { FeedbackSounds.generated($0).samples }
        #expect(Set(all).count == TalkCue.allCases.count)
        #expect(!all.contains(WakeListener.chime().samples))
        let sounds = FeedbackSounds([.mute: .generated, .unmute: .off, .error: .file("/nonexistent.wav")])
        #expect(sounds.sounds[.mute] != nil && sounds.sounds[.unmute] == nil && sounds.sounds[.endOfListening] == nil)
        #expect(sounds.sounds[.error] == FeedbackSounds.generated(.error) && sounds.problems.count == 1)
    }
}
