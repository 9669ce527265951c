// Tests for SpeechSynthesizer (espeak-ng through its library) and VoiceSettings: real speech,
// rate changes, a bad voice, concurrent callers, streaming with abort, directive mapping.
import ClawvoiceCore
import Foundation
import Testing
@testable import Audio

@Suite struct SpeechSynthesizerTests {
    @Test func `hello world is half a second to three seconds of audible speech`() throws {
        let start = ContinuousClock.now
        let pcm = try SpeechSynthesizer.synthesize("hello world", settings: VoiceSettings())
        let elapsed = ContinuousClock.now - start
        #expect(pcm.format.channels == 1)
        #expect(pcm.format.sampleRateHz == 22_050)
        #expect((500...3000).contains(pcm.durationMilliseconds), "\(pcm.durationMilliseconds) ms")
        #expect(pcm.rms > 0.01, "rms \(pcm.rms)")
        print("espeak hello world: \(pcm.durationMilliseconds) ms at \(pcm.format), rms \(pcm.rms), took \(elapsed)")
    }

    @Test func `a faster rate gives shorter audio`() throws {
        let text = "The weather today is sunny with a light breeze from the west."
        let fast = try SpeechSynthesizer.synthesize(text, settings: VoiceSettings(rateWpm: 300))
        let slow = try SpeechSynthesizer.synthesize(text, settings: VoiceSettings(rateWpm: 120))
        #expect(fast.durationMilliseconds < slow.durationMilliseconds * 0.75,
                "300 wpm \(fast.durationMilliseconds) ms, 120 wpm \(slow.durationMilliseconds) ms")
        print("espeak 300 wpm \(fast.durationMilliseconds) ms vs 120 wpm \(slow.durationMilliseconds) ms")
    }

    @Test func `an unknown voice is an error that says how to list voices`() {
        #expect {
            _ = try SpeechSynthesizer.synthesize("hello", settings: VoiceSettings(voice: "xx-nosuchvoice"))
        } throws: { error in
            guard case .unknownVoice("xx-nosuchvoice") = error as? SpeechError else { return false }
            return String(describing: error).contains("espeak-ng --voices")
        }
        // A good voice still works after a bad one.
        #expect(throws: Never.self) { _ = try SpeechSynthesizer.synthesize("ok", settings: VoiceSettings()) }
    }

    @Test func `other languages speak with their own voice`() throws {
        let german = try SpeechSynthesizer.synthesize("Guten Tag, wie geht es Ihnen?", settings: VoiceSettings(voice: "de"))
        #expect(german.rms > 0.01)
        #expect(SpeechSynthesizer.voices().contains("de"))
        #expect(SpeechSynthesizer.voices().contains("en-us"))
    }

    @Test func `concurrent callers are serialised and each gets whole speech`() async throws {
        let phrases = (0..<8).map { "Message number \($0) is being spoken now." }
        // One at a time first: each phrase's own length. (espeak-ng's length for the same words
        // wanders by a few percent with what it spoke before, so lengths are compared loosely.)
        let alone = try phrases.map { try SpeechSynthesizer.synthesize($0, settings: VoiceSettings()).durationMilliseconds }
        let together = try await withThrowingTaskGroup(of: (Int, Double).self) { group in
            for (i, phrase) in phrases.enumerated() {
                group.addTask { (i, try SpeechSynthesizer.synthesize(phrase, settings: VoiceSettings()).durationMilliseconds) }
            }
            return try await group.reduce(into: [Int: Double]()) { $0[$1.0] = $1.1 }
        }
        #expect(together.count == 8)
        // A call that saw another's audio would be about twice as long (or cut short).
        for (i, ms) in together {
            #expect(abs(ms - alone[i]) < alone[i] * 0.15, "phrase \(i): \(ms) ms together, \(alone[i]) ms alone")
        }
    }

    @Test func `streaming hands out chunks early and stops when asked`() throws {
        var chunks = 0
        var firstChunkAt: Duration?
        let start = ContinuousClock.now
        let completed = try SpeechSynthesizer.synthesize("This sentence is long enough to need many chunks of audio.") { chunk in
            if firstChunkAt == nil { firstChunkAt = ContinuousClock.now - start }
            #expect(chunk.format.sampleRateHz == 22_050)
            chunks += 1
            return chunks < 3
        }
        #expect(!completed)
        #expect(chunks == 3)
        let full = try SpeechSynthesizer.synthesize("This sentence is long enough to need many chunks of audio.")
        #expect(full.durationMilliseconds > 2000)
        print("espeak text to first chunk: \(firstChunkAt.map { "\($0)" } ?? "none")")
    }
}

@Suite struct VoiceSettingsTests {
    @Test func `lang picks the voice and speed scales 175 wpm`() {
        let base = VoiceSettings()
        let next = base.applying(lang: "en_GB", speed: 1.2, rateWpm: nil)
        #expect(next.voice == "en-gb")
        #expect(next.rateWpm == 210)
        #expect(next.pitch == base.pitch && next.volume == base.volume)
    }

    @Test func `rate in words per minute wins over speed and is clamped to 80 to 450`() {
        #expect(VoiceSettings().applying(lang: nil, speed: 2, rateWpm: 200).rateWpm == 200)
        #expect(VoiceSettings().applying(lang: nil, speed: nil, rateWpm: 1000).rateWpm == 450)
        #expect(VoiceSettings().applying(lang: nil, speed: 0.1, rateWpm: nil).rateWpm == 80)
    }

    @Test func `missing, blank and nonsense values leave settings as they were`() {
        let base = VoiceSettings(voice: "de", rateWpm: 150)
        #expect(base.applying(lang: nil, speed: nil, rateWpm: nil) == base)
        #expect(base.applying(lang: "  ", speed: .nan, rateWpm: -3) == base)
        #expect(base.applying(lang: nil, speed: -1, rateWpm: 0) == base)
    }
}
