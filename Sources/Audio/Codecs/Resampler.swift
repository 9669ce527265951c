// Resampler owns one speexdsp resampler (SpeexResamplerState *): s16 PCM from one rate to
// another, streaming, with a flush that returns the tail so totals come out exact.
// It is the only file that calls speex_resampler_*.
internal import CSpeexDSP
public import ClawvoiceCore

/// Streaming sample-rate converter (speexdsp, quality 0…10, default 5).
///
/// Output is aligned with input (the filter's leading zeros are skipped), and after `flush()`
/// the total output is `round(inputFrames × to / from)` frames. One owner: not `Sendable`.
public final class Resampler {
    public let inputFormat: AudioFormat
    public let outputFormat: AudioFormat
    private let state: OpaquePointer
    private var framesIn = 0
    private var framesOut = 0

    /// - Parameters:
    ///   - from: input rate in Hz.
    ///   - to: output rate in Hz.
    ///   - channels: interleaved channel count, 1…8.
    ///   - quality: 0 (fast) … 10 (best); 5 is speexdsp's VoIP default.
    public init(from: Int, to: Int, channels: Int, quality: Int = 5) throws(AudioCodecError) {
        guard from > 0, to > 0, (1...8).contains(channels), (0...10).contains(quality) else {
            throw .invalidInput("resampler needs positive rates, 1…8 channels and quality 0…10; got \(from) → \(to) Hz, \(channels) ch, quality \(quality)")
        }
        var error: Int32 = 0
        guard let state = speex_resampler_init(UInt32(channels), UInt32(from), UInt32(to), Int32(quality), &error),
              error == 0 else {
            throw .library(call: "speex_resampler_init", code: Int(error), message: String(cString: speex_resampler_strerror(error)))
        }
        self.state = state
        inputFormat = AudioFormat(sampleRateHz: from, channels: channels)
        outputFormat = AudioFormat(sampleRateHz: to, channels: channels)
        speex_resampler_skip_zeros(state)
    }

    deinit { speex_resampler_destroy(state) }

    /// Converts `samples` (interleaved; a whole number of frames) and returns what is ready.
    /// About `inputLatencyFrames` of the input stays inside the filter until more arrives or
    /// `flush()` is called.
    public func process(_ samples: [Int16]) -> [Int16] {
        let channels = inputFormat.channels
        precondition(samples.count % channels == 0, "Resampler.process: \(samples.count) samples is not a whole number of \(channels)-channel frames")
        framesIn += samples.count / channels
        return run(samples)
    }

    /// Pushes the filter's tail out (by feeding silence) and returns the rest of the output,
    /// so the total matches the input duration. The resampler is then reset for a new stream.
    public func flush() -> [Int16] {
        let channels = inputFormat.channels
        let expected = (framesIn * outputFormat.sampleRateHz + inputFormat.sampleRateHz / 2) / inputFormat.sampleRateHz
        var out: [Int16] = []
        let zeros = [Int16](repeating: 0, count: max(inputLatencyFrames, 16) * channels)
        var guardRounds = 0
        while framesOut + out.count / channels < expected, guardRounds < 64 {
            out += run(zeros, counting: false)
            guardRounds += 1
        }
        let wanted = max(0, expected - framesOut) * channels
        if out.count > wanted { out.removeLast(out.count - wanted) }
        speex_resampler_reset_mem(state)
        speex_resampler_skip_zeros(state)
        framesIn = 0
        framesOut = 0
        return out
    }

    /// Frames of input the filter holds back before they show in the output.
    public var inputLatencyFrames: Int { Int(speex_resampler_get_input_latency(state)) }

    /// Converts a whole buffer in one go (process + flush on a fresh resampler).
    public static func convert(_ pcm: PCMBuffer, toRateHz rate: Int, quality: Int = 5) throws(AudioCodecError) -> PCMBuffer {
        guard pcm.format.sampleRateHz != rate else { return pcm }
        let resampler = try Resampler(from: pcm.format.sampleRateHz, to: rate, channels: pcm.format.channels, quality: quality)
        let whole = pcm.samples.count - pcm.samples.count % pcm.format.channels
        let samples = resampler.process(Array(pcm.samples[0..<whole])) + resampler.flush()
        return PCMBuffer(format: resampler.outputFormat, samples: samples)
    }

    private func run(_ samples: [Int16], counting: Bool = true) -> [Int16] {
        let channels = inputFormat.channels
        let inFrames = samples.count / channels
        guard inFrames > 0 else { return [] }
        let from = inputFormat.sampleRateHz, to = outputFormat.sampleRateHz
        var out = [Int16](repeating: 0, count: (inFrames * to / from + 16) * channels)
        var consumed = 0
        var produced = 0
        let state = self.state
        // speexdsp may stop early when the output is full; loop until all input is taken.
        while consumed < inFrames {
            var inLength = UInt32(inFrames - consumed)
            var outLength = UInt32(out.count / channels - produced)
            if outLength == 0 {
                out += [Int16](repeating: 0, count: 256 * channels)
                outLength = UInt32(out.count / channels - produced)
            }
            samples.withUnsafeBufferPointer { input in
                out.withUnsafeMutableBufferPointer { output in
                    // Only fails on bad arguments (a null state), which init rules out.
                    _ = speex_resampler_process_interleaved_int(state, input.baseAddress! + consumed * channels, &inLength,
                                                                output.baseAddress! + produced * channels, &outLength)
                }
            }
            consumed += Int(inLength)
            produced += Int(outLength)
            if inLength == 0 && outLength == 0 { break }
        }
        if counting { framesOut += produced }
        out.removeLast(out.count - produced * channels)
        return out
    }
}
