// The detectors' echo canceller: speexdsp's (MDF, a multidelay block frequency-domain adaptive
// filter whose learning rate follows its own estimate of the echo left in its output, so it slows
// down by itself in double talk and learns a moved echo path again within seconds), without
// speexdsp's residual-echo suppressor. webrtc's canceller (AudioFrontEnd) suppresses what its
// linear stage leaves and in double talk takes the user's voice with the echo; the wake and stop
// heads need the user's voice whole more than the last decibels of echo gone. It replaced a
// hand-written filter of the same kind that relearnt too slowly: the echo's delay moves between
// replies, and a trigger said 2 s into a reply met an unconverged filter (WakeOverReplyTests).

import CSpeexDSP

/// One linear echo canceller for one 16 kHz mono stream: feed the far end and the microphone
/// together, sample-aligned as the capture sees them (the far end being what was playing when
/// each microphone sample was recorded); the echo may lag it by 0 to `filterMs`. Not
/// thread-safe: one owner.
public final class SpeexEchoCanceller {
    /// Samples per speexdsp frame (10 ms at 16 kHz); the capture's 20 ms frames are two.
    public static let frameSamples = 160
    private let state: OpaquePointer
    private var nearPending: [Int16] = [], farPending: [Int16] = [], output: [Int16] = []

    /// `filterMs`: the span of echo delays covered (the room's path plus any misalignment of the
    /// reference: the rooms' 30–50 ms and the configured 60 ms inside 120, with room for a real
    /// room's reverberation after them). Tried once side by side on DetectorEchoCancellerTests'
    /// simulated room (that comparison is not kept): 200 and 250 ms, and 20 ms frames, relearnt a
    /// moved path more slowly; 64 ms faster, but it ends just past the configured 60 ms.
    public init(filterMs: Int = 120, sampleRateHz: Int = 16_000) {
        let n = Self.frameSamples
        let taps = (filterMs * sampleRateHz / 1000 + n - 1) / n * n
        state = speex_echo_state_init(Int32(n), Int32(taps))
        _ = cv_speex_echo_set_rate(state, Int32(sampleRateHz))
    }

    deinit { speex_echo_state_destroy(state) }

    /// The microphone samples with the linear estimate of the echo taken out, same length. With
    /// lengths that are multiples of 160 (the capture's 20 ms frames) there is no added delay;
    /// otherwise the output runs up to one speexdsp frame behind.
    public func process(near: [Int16], far: [Int16]) -> [Int16] {
        precondition(near.count == far.count, "near and far must be sample-aligned")
        nearPending += near
        farPending += far
        let n = Self.frameSamples
        var offset = 0
        var frame = [Int16](repeating: 0, count: n)
        while nearPending.count - offset >= n {
            nearPending.withUnsafeBufferPointer { mic in
                farPending.withUnsafeBufferPointer { play in
                    frame.withUnsafeMutableBufferPointer { out in
                        speex_echo_cancellation(state, mic.baseAddress! + offset, play.baseAddress! + offset, out.baseAddress!)
                    }
                }
            }
            output += frame
            offset += n
        }
        nearPending.removeFirst(offset)
        farPending.removeFirst(offset)
        if output.count < near.count { output.insert(contentsOf: [Int16](repeating: 0, count: near.count - output.count), at: 0) }
        let result = Array(output.prefix(near.count))
        output.removeFirst(near.count)
        return result
    }
}
