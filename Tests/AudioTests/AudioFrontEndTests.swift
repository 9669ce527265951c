// The echo-cancelling front end on a simulated room: the speaker's espeak-ng speech comes back
// to the microphone late, quieter and coloured, with the user's own speech on top. What comes
// out must have lost the echo (echo return loss enhancement) and kept the user.

import Audio
import AudioFrontEnd
import ClawvoiceCore
import Foundation
import Testing

@Suite struct AudioFrontEndTests {
    static func speech(_ text: String, voice: String = "en-us", pitch: Int = 50) throws -> [Int16] {
        let pcm = try SpeechSynthesizer.synthesize(text, settings: VoiceSettings(voice: voice, rateWpm: 170, pitch: pitch))
        return try Resampler.convert(pcm.mono(), toRateHz: 16_000).samples
    }

    static func power(_ s: ArraySlice<Int16>) -> Double {
        s.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(max(s.count, 1))
    }

    /// The room: 60 ms late, −6 dB, a short low-pass colouring, plus a little noise.
    static func room(_ far: [Int16], delay: Int = 960) -> [Int16] {
        let taps: [Double] = [0.25, 0.2, 0.05]
        var out = [Int16](repeating: 0, count: far.count)
        var rng = SplitMix64(seed: 7)
        for i in 0..<far.count {
            var acc = 0.0
            for (k, t) in taps.enumerated() where i - delay - k >= 0 { acc += t * Double(far[i - delay - k]) }
            acc += Double(Int(rng.next() % 61) - 30)
            out[i] = Int16(max(-32768, min(32767, acc)))
        }
        return out
    }

    static func correlation(_ a: ArraySlice<Int16>, _ b: ArraySlice<Int16>) -> Double {
        var ab = 0.0, aa = 0.0, bb = 0.0
        for (x, y) in zip(a, b) { ab += Double(x) * Double(y); aa += Double(x) * Double(x); bb += Double(y) * Double(y) }
        return ab / max((aa * bb).squareRoot(), 1e-9)
    }

    @Test func `the echo is cancelled and the user's speech is kept`() throws {
        let farSpeech = try Self.speech("The weather today is sunny with a light breeze, and tomorrow will bring some rain in the afternoon. Remember to take an umbrella when you go out.")
        let nearSpeech = try Self.speech("Stop, what about the weekend?", voice: "en", pitch: 20)
        // Far end alone for the first part, then the user alone while the speaker is silent.
        let n = farSpeech.count + nearSpeech.count + 16_000
        var far = farSpeech + [Int16](repeating: 0, count: n - farSpeech.count)
        far = Array(far.prefix(n))
        let echo = Self.room(far)
        var clean = [Int16](repeating: 0, count: n)
        let nearAt = farSpeech.count + 8_000
        for (i, s) in nearSpeech.enumerated() { clean[nearAt + i] = s }
        let mic = zip(echo, clean).map { Int16(max(-32768, min(32767, Int($0) + Int($1)))) }

        let fe = try AudioFrontEnd(options: AudioFrontEndOptions(echoCancel: true, noiseSuppress: true, gainControl: false, voiceDetect: true))
        var out: [Int16] = []
        var i = 0
        while i + 320 <= n {
            try fe.far(Array(far[i..<i + 320]))
            out += try fe.near(Array(mic[i..<i + 320]), delayMs: 60).samples
            i += 320
        }
        // ERLE over the far-only part after 2 s of convergence.
        let a = 32_000, b = farSpeech.count
        let erle = 10 * log10(Self.power(mic[a..<b]) / max(Self.power(out[a..<b]), 1e-9))
        #expect(erle >= 25, "echo return loss enhancement \(String(format: "%.1f", erle)) dB")
        // The library's band-splitting filters delay the output by ~13 ms: compare within ±50 ms.
        let near = (nearAt + 1_000)..<(nearAt + nearSpeech.count - 1_000)
        let kept = stride(from: -800, through: 800, by: 8).map { lag in
            Self.correlation(clean[near], out[(near.lowerBound + lag)..<(near.upperBound + lag)])
        }.max() ?? 0
        #expect(kept >= 0.8, "the user's speech kept: correlation \(String(format: "%.2f", kept))")
        print("front end: ERLE \(String(format: "%.1f", erle)) dB, near-end correlation \(String(format: "%.2f", kept))")
    }

    /// Double talk: the user speaks while the assistant does (a barge-in); after convergence the
    /// output still follows the user's speech.
    @Test func `the user talking over the speaker comes through`() throws {
        let farSpeech = try Self.speech("The weather today is sunny with a light breeze, and tomorrow will bring some rain in the afternoon. Remember to take an umbrella when you go out, and close the windows.")
        let nearSpeech = try Self.speech("Stop, what about the weekend?", voice: "en", pitch: 20)
        let n = farSpeech.count
        let echo = Self.room(farSpeech)
        var clean = [Int16](repeating: 0, count: n)
        let nearAt = n - nearSpeech.count - 8_000
        for (i, s) in nearSpeech.enumerated() { clean[nearAt + i] = s }
        let mic = zip(echo, clean).map { Int16(max(-32768, min(32767, Int($0) + Int($1)))) }
        let fe = try AudioFrontEnd()
        var out: [Int16] = []
        var i = 0
        while i + 320 <= n {
            try fe.far(Array(farSpeech[i..<i + 320]))
            out += try fe.near(Array(mic[i..<i + 320]), delayMs: 60).samples
            i += 320
        }
        let near = (nearAt + 1_000)..<(nearAt + nearSpeech.count - 1_000)
        let kept = stride(from: -800, through: 800, by: 8).map { lag in
            Self.correlation(clean[near], out[(near.lowerBound + lag)..<(near.upperBound + lag)])
        }.max() ?? 0
        let raw = Self.correlation(clean[near], mic[near])
        print("front end, double talk: correlation with the user's speech \(String(format: "%.2f", kept)) (microphone \(String(format: "%.2f", raw)))")
        #expect(kept >= 0.8, "double talk: correlation \(String(format: "%.2f", kept)), microphone \(String(format: "%.2f", raw))")
    }

    @Test func `rates the library does not take are refused with one line`() {
        #expect(throws: AudioFrontEndError.self) { _ = try AudioFrontEnd(sampleRateHz: 44_100) }
    }
}
