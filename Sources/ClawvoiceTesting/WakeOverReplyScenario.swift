// Wake over the node's own voice (issue 22, item 5): the one scenario that WakeOverReplyTests runs
// inside the test process and `clawvoice-bench --wake-over-reply` runs against a real daemon: the
// node speaks a long reply on a loudspeaker looped into its microphone, and the user says the
// trigger over it at the echo's level.

import Audio
public import ClawvoiceCore

public enum WakeOverReplyScenario {
    /// What the node speaks in each try (also the echo and stop-word tests' reply).
    public static let reply = "Here is the forecast for the whole week. Monday will be sunny and warm, Tuesday brings clouds in the afternoon, and on Wednesday there will be rain from the morning until late in the evening."
    /// What the user says over it, and what the gateway hears in the turn.
    public static let said = "computer, what time is it"
    public static let transcript = "Computer, what time is it?"
    /// The trigger's level against espeak-ng's: the room gives the speaker back at 70 % (about
    /// −9 dB) and the reply plays at about half scale, so 0.35 meets the echo at its level (0 dB).
    public static let scale = 0.35
    /// How long a try waits for its turn before it counts as missed, in seconds.
    public static let turnWaitSeconds = 8

    /// How far into the reply try `k` says the trigger: 1.5 s, a quarter second later at each try.
    public static func delay(try k: Int) -> Duration { .milliseconds(1500 + 250 * k) }

    /// The trigger by espeak-ng at 16 kHz mono, at `scale`, then a second of silence (on which the
    /// wake capture ends).
    public static func trigger(scale: Double = scale) throws -> PCMBuffer {
        let words = try SpeechSynthesizer.synthesize(said, settings: VoiceSettings())
        let r = try Resampler(from: words.format.sampleRateHz, to: 16_000, channels: 1)
        let samples = (r.process(words.mono().samples) + r.flush()).map { Int16(clamping: Int((Double($0) * scale).rounded())) }
        return PCMBuffer(format: .voice, samples: samples + [Int16](repeating: 0, count: 16_000))
    }
}
