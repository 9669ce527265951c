// Issue 11, items 2 and 3: a WAV header's rate was trusted down to 1 Hz (a 10 KB clip held the
// speaker for 83 minutes), and a damaged Ogg Opus clip that decodes to 13 ms "spoke" silently.
// WAVFile now refuses rates outside 8–192 kHz, and ClipPlayability judges what is left.

import Audio
import ClawvoiceCore
import Foundation
import Testing

@Suite struct `Clip playability` {
    @Test func `clips shorter than 200 ms or longer than their text allows are unplayable`() {
        #expect(ClipPlayability.problem(durationMs: 13, characters: 44)?.contains("too short") == true)
        #expect(ClipPlayability.problem(durationMs: .nan, characters: 44) != nil)
        #expect(ClipPlayability.problem(durationMs: 200, characters: 3) == nil)
        #expect(ClipPlayability.problem(durationMs: 3_000, characters: 44) == nil)
        // 44 characters: 5 s + 44 × 250 ms = 16 s.
        #expect(ClipPlayability.maximumMs(characters: 44) == 16_000)
        #expect(ClipPlayability.problem(durationMs: 16_000, characters: 44) == nil)
        let long = ClipPlayability.problem(durationMs: 16_001, characters: 44)
        #expect(long?.contains("longer than 16.0 s allowed for 44 characters") == true, "\(long ?? "nil")")
        // 83 minutes for a sentence.
        #expect(ClipPlayability.problem(durationMs: 83 * 60_000, characters: 60) != nil)
    }

    @Test(arguments: [1, 100, 7_999, 192_001, 384_000])
    func `a WAV whose header names a rate outside 8-192 kHz is refused`(rate: Int) throws {
        var wav = WAVFile.encode(PCMBuffer(format: AudioFormat(sampleRateHz: 8_000, channels: 1), samples: [Int16](repeating: 500, count: 1000)))
        let le = [UInt8(rate & 0xff), UInt8(rate >> 8 & 0xff), UInt8(rate >> 16 & 0xff), UInt8(rate >> 24 & 0xff)]
        wav.replaceSubrange(24..<28, with: le)
        #expect(throws: ClipDecodeError.unsupported("WAV at \(rate) Hz; only 8–192 kHz is played")) {
            _ = try ClipDecoder.decode(wav, outputFormat: "wav", mimeType: nil, fileExtension: nil)
        }
    }

    @Test(arguments: [8_000, 192_000])
    func `WAVs at the edges of the range still decode`(rate: Int) throws {
        let pcm = PCMBuffer(format: AudioFormat(sampleRateHz: rate, channels: 1), samples: [Int16](repeating: 500, count: rate / 2))
        let back = try WAVFile.decode(WAVFile.encode(pcm))
        #expect(back.format.sampleRateHz == rate)
        #expect(ClipPlayability.problem(back, text: "Half a second.") == nil)
    }

    @Test func `a damaged Ogg Opus clip never counts as playable`() throws {
        // One real 20 ms packet, then garbage where the rest of the stream was.
        let head = CodecFixtures.tone(hz: 440, milliseconds: 20, rateHz: 16_000)
        let clip = try OggOpusVoiceNote.encode(head, bitrate: 32_000) + CodecFixtures.randomBytes(4096, seed: 11)
        let text = "The quick brown fox jumps over the lazy dog."
        do {
            let pcm = try ClipDecoder.decode(clip, outputFormat: "opus", mimeType: "audio/ogg", fileExtension: ".opus")
            #expect(ClipPlayability.problem(pcm, text: text) != nil, "\(pcm.durationMilliseconds) ms judged playable")
        } catch {
            // Failing to decode is just as good: the caller falls back either way.
        }
    }
}
