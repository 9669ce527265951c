// Echo cancellation on the capture (issue 14): what the speaker plays is kept as the far-end
// reference (EchoReference, filled by the speech sink as each clip starts), and each 20 ms
// microphone frame is cleaned against the reference audio that was playing while it was
// recorded (CaptureCleaner, owned by the talk loop). With it, a loudspeaker need not mute the
// microphone while it speaks: barge-in and wake words work over the assistant's voice.

import Audio
import AudioFrontEnd
import Foundation
import GatewayClient

/// The speaker's current clip at 16 kHz mono, with the time it started, for the canceller.
public final class EchoReference: Sendable {
    private let state = Mutex<(start: ContinuousClock.Instant, samples: [Int16])?>(nil)
    public init() {}

    /// A clip starts playing now.
    public func begin(_ pcm: PCMBuffer) {
        let mono = pcm.mono()
        let at16k = (try? Resampler.convert(mono, toRateHz: 16_000).samples) ?? []
        state.withLock { $0 = (.now, at16k) }
    }

    /// The clip ended or was stopped.
    public func end() { state.withLock { $0 = nil } }

    /// The `count` samples that were playing up to `t` (zeros where nothing played).
    public func samples(endingAt t: ContinuousClock.Instant, count: Int) -> [Int16] {
        guard let (start, clip) = state.withLock({ $0 }) else { return [Int16](repeating: 0, count: count) }
        let d = t - start
        let endIndex = Int(d.components.seconds) * 16_000 + Int(d.components.attoseconds / 62_500_000_000_000)
        var out = [Int16](repeating: 0, count: count)
        for i in 0..<count {
            let j = endIndex - count + i
            if j >= 0 && j < clip.count { out[i] = clip[j] }
        }
        return out
    }
}

/// Cleans microphone frames against the reference; one per capture stream, used by one owner.
final class CaptureCleaner {
    private let frontEnd: AudioFrontEnd
    private let reference: EchoReference
    /// The speaker's and the microphone's buffering: how late the echo reaches the microphone.
    let delayMs: Int

    init(reference: EchoReference, delayMs: Int) throws {
        frontEnd = try AudioFrontEnd(options: AudioFrontEndOptions(echoCancel: true, noiseSuppress: true, gainControl: false, voiceDetect: true))
        self.reference = reference
        self.delayMs = delayMs
    }

    /// The frame with the speaker's echo taken out (same length; the front end works in 10 ms
    /// steps, so a 20 ms frame comes back whole).
    func clean(_ frame: PCMBuffer, at t: ContinuousClock.Instant) -> PCMBuffer {
        do {
            try frontEnd.far(reference.samples(endingAt: t, count: frame.samples.count))
            let (out, _) = try frontEnd.near(frame.samples, delayMs: delayMs)
            guard out.count == frame.samples.count else { return frame }
            return PCMBuffer(format: frame.format, samples: out)
        } catch {
            return frame
        }
    }
}
