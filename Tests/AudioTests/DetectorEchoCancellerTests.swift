// The detectors' linear echo canceller (speexdsp's, SpeexEchoCanceller) on a simulated room: the speaker's
// espeak-ng speech comes back 40 or 60 ms late, quieter and coloured, with a little noise, and
// the user talks over it. After convergence the echo must be gone, the user's voice kept whole
// through double talk (better than webrtc's suppressor keeps it, the reason this path exists),
// the filter must not diverge because of the user, and a moved echo path is learnt again.

import Audio
import AudioFrontEnd
import Foundation
import Testing

@Suite struct DetectorEchoCancellerTests {
    static let far = Result { try AudioFrontEndTests.speech("The weather today is sunny with a light breeze, and tomorrow will bring some rain in the afternoon. Remember to take an umbrella when you go out, and close the windows before you leave the house. The train to the city leaves at ten past eight from platform four.") }
    static let user = Result { try AudioFrontEndTests.speech("Stop, what about the weekend? Tell me about Saturday.", voice: "en", pitch: 20) }

    /// The room as AudioFrontEndTests builds it, `delayMs` late.
    static func room(_ far: [Int16], delayMs: Int) -> [Int16] { AudioFrontEndTests.room(far, delay: delayMs * 16) }

    static func mix(_ a: [Int16], _ b: [Int16]) -> [Int16] {
        zip(a, b).map { Int16(clamping: Int($0) + Int($1)) }
    }

    /// The canceller over the capture's 20 ms frames.
    static func run(_ aec: SpeexEchoCanceller, mic: [Int16], far: [Int16]) -> [Int16] {
        var out: [Int16] = []
        var i = 0
        while i + 320 <= mic.count {
            out += aec.process(near: Array(mic[i..<i + 320]), far: Array(far[i..<i + 320]))
            i += 320
        }
        return out
    }

    static func erle(_ mic: [Int16], _ out: [Int16], _ r: Range<Int>) -> Double {
        10 * log10(AudioFrontEndTests.power(mic[r]) / max(AudioFrontEndTests.power(out[r]), 1e-9))
    }

    @Test(arguments: [40, 60])
    func `the echo is cancelled by more than 25 dB after three seconds`(delayMs: Int) throws {
        let far = try Self.far.get()
        let mic = Self.room(far, delayMs: delayMs)
        let aec = SpeexEchoCanceller()
        let out = Self.run(aec, mic: mic, far: far)
        let erle = Self.erle(mic, out, 48_000..<out.count)
        print("linear canceller, \(delayMs) ms room: ERLE \(String(format: "%.1f", erle)) dB after 3 s")
        #expect(erle >= 25, "ERLE \(erle) dB")
        // The first second already takes most of it: adaptation is not stalled.
        #expect(Self.erle(mic, out, 16_000..<32_000) >= 6)
    }

    /// Double talk after convergence: the user speaks over the assistant. The output keeps their
    /// voice (correlation with it), where webrtc's suppressor, in the same room, keeps less; after
    /// the user stops, the echo is still cancelled (the filter did not learn the user).
    @Test func `the user's voice is kept whole in double talk and the filter does not diverge`() throws {
        let farSpeech = try Self.far.get(), userSpeech = try Self.user.get()
        let far = farSpeech + farSpeech
        let echo = Self.room(far, delayMs: 40)
        var near = [Int16](repeating: 0, count: far.count)
        let at = farSpeech.count - userSpeech.count / 2   // straddles the two halves: 3+ s of double talk
        for (i, s) in userSpeech.enumerated() { near[at + i] = s }
        let mic = Self.mix(echo, near)
        let aec = SpeexEchoCanceller()
        let out = Self.run(aec, mic: mic, far: far)
        let talk = (at + 800)..<(at + userSpeech.count - 800)
        let kept = AudioFrontEndTests.correlation(near[talk], out[talk])
        let raw = AudioFrontEndTests.correlation(near[talk], mic[talk])

        // The control: webrtc's front end (canceller + suppressor) on the same microphone.
        let fe = try AudioFrontEnd()
        var webrtc: [Int16] = []
        var i = 0
        while i + 320 <= mic.count {
            try fe.far(Array(far[i..<i + 320]))
            webrtc += try fe.near(Array(mic[i..<i + 320]), delayMs: 40).samples
            i += 320
        }
        let webrtcKept = stride(from: -400, through: 400, by: 4).map { lag in
            AudioFrontEndTests.correlation(near[talk], webrtc[(talk.lowerBound + lag)..<(talk.upperBound + lag)])
        }.max() ?? 0
        // After the user: the far end alone again, from 0.5 s after they stop.
        let after = (at + userSpeech.count + 8_000)..<out.count
        let erleAfter = Self.erle(mic, out, after)
        // The residual echo while the user talks, against the echo there.
        let residual = 10 * log10(AudioFrontEndTests.power(echo[talk]) / max(AudioFrontEndTests.power(ArraySlice(zip(out[talk], near[talk]).map { Int16(clamping: Int($0) - Int($1)) })), 1e-9))
        print(String(format: "linear canceller, double talk: user kept %.3f (webrtc %.3f, microphone %.3f); echo %.1f dB down during it, %.1f dB after",
                     kept, webrtcKept, raw, residual, erleAfter))
        // speexdsp slows its learning in double talk but does not stop it, so the echo is less far
        // down while the user talks (8.9 dB here; the hand-written filter it replaced, held still
        // by webrtc's verdict, 31.9) and the user's voice a little less whole (0.976 against 1.000).
        // Over the live room's replies the trade pays: triggers said over a reply became turns
        // 41 times of 45 against 4–6 of 9 (WakeOverReplyTests), because it learns each reply's
        // echo path again in about a second.
        #expect(residual >= 6, "echo during double talk \(residual) dB down")
        #expect(kept >= 0.95, "user's voice kept: correlation \(kept)")
        #expect(kept > webrtcKept + 0.05, "linear \(kept) against webrtc \(webrtcKept)")
        #expect(kept > raw, "better than the raw microphone (\(raw))")
        #expect(erleAfter >= 20, "ERLE after double talk \(erleAfter) dB")
        // Never louder than its input by more than a little, on any second.
        for s in stride(from: 0, to: out.count - 16_000, by: 16_000) {
            #expect(Self.erle(mic, out, s..<s + 16_000) > -1, "second \(s / 16_000) got louder")
        }
    }

    /// An echo path that changes (the speaker moved): the canceller follows it.
    @Test func `a changed echo path is learnt again`() throws {
        let farSpeech = try Self.far.get()
        let far = farSpeech + farSpeech
        let a = Self.room(farSpeech, delayMs: 40), b = Self.room(farSpeech, delayMs: 60)
        let mic = a + b.map { Int16(clamping: Int($0) / 2 * 3) }
        let out = Self.run(SpeexEchoCanceller(), mic: mic, far: far)
        let erle = Self.erle(mic, out, (farSpeech.count + 48_000)..<out.count)
        let soon = Self.erle(mic, out, (farSpeech.count + 32_000)..<(farSpeech.count + 64_000))
        print(String(format: "linear canceller, changed path: ERLE %.1f dB 2-4 s after the change, %.1f dB from 3 s on", soon, erle))
        // 28.1 dB from 3 s on and 19.3 dB over 2-4 s; the hand-written filter before it reached 20.5
        // and 11.0, too slow for a live room, whose echo delay moves between replies.
        #expect(erle >= 24, "ERLE \(erle) dB")
        #expect(soon >= 15, "ERLE 2-4 s after the change \(soon) dB")
    }

    @Test func `frames of any length come back the same length`() {
        let aec = SpeexEchoCanceller()
        for n in [160, 320, 100, 64, 1] {
            #expect(aec.process(near: [Int16](repeating: 100, count: n), far: [Int16](repeating: 0, count: n)).count == n)
        }
    }
}
