// OpusVoiceEncoder owns one libopus encoder (OpusEncoder *) for the voice uplink: 16 kHz mono,
// VOIP application, 20 ms frames. It is the only file that calls opus_encode.
internal import COpus
public import ClawvoiceCore

/// Encodes fixed 20 ms frames of s16 PCM into raw Opus packets.
///
/// One owner: libopus encoder state must not be shared, so this class is not `Sendable` and
/// the handle is freed in `deinit`. Packets of 2 bytes or fewer mean "nothing to transmit"
/// (DTX or digital silence); they are still returned, and `isDiscontinuous(_:)` names them.
public final class OpusVoiceEncoder {
    /// Opus frame length this encoder takes, in milliseconds.
    public let frameMilliseconds = 20
    /// Input format: rate and channel count given at `init`.
    public let format: AudioFormat
    /// Target bitrate in bits per second, as set on the encoder.
    public let bitrate: Int

    private let encoder: OpaquePointer
    /// Opus packets are at most 1275 bytes per frame; 4000 is the size opus_demo uses.
    private var packet = [UInt8](repeating: 0, count: 4000)

    /// - Parameters:
    ///   - sampleRateHz: 8000, 12000, 16000, 24000 or 48000 (libopus rejects others).
    ///   - channels: 1 or 2.
    ///   - bitrate: bits per second, 500…512000.
    ///   - complexity: 0…10; 5 keeps a Raspberry Pi well under real time.
    ///   - dtx: let the encoder send ≤ 2-byte packets during silence.
    public init(sampleRateHz: Int = 16_000, channels: Int = 1, bitrate: Int = 20_000,
                complexity: Int = 5, dtx: Bool = false) throws(AudioCodecError) {
        var error: Int32 = OPUS_OK
        guard let encoder = opus_encoder_create(Int32(clamping: sampleRateHz), Int32(clamping: channels),
                                                OPUS_APPLICATION_VOIP, &error), error == OPUS_OK else {
            throw Self.failure("opus_encoder_create", error)
        }
        self.encoder = encoder
        self.format = AudioFormat(sampleRateHz: sampleRateHz, channels: channels)
        self.bitrate = bitrate
        // From here on `deinit` frees the handle if a ctl below throws.
        try check("opus_encoder_ctl(OPUS_SET_BITRATE)", cv_opus_set_bitrate(encoder, Int32(clamping: bitrate)))
        try check("opus_encoder_ctl(OPUS_SET_COMPLEXITY)", cv_opus_set_complexity(encoder, Int32(clamping: complexity)))
        try check("opus_encoder_ctl(OPUS_SET_SIGNAL)", cv_opus_set_signal_voice(encoder))
        try check("opus_encoder_ctl(OPUS_SET_DTX)", cv_opus_set_dtx(encoder, dtx ? 1 : 0))
    }

    deinit { opus_encoder_destroy(encoder) }

    /// Samples per channel in one frame (320 at 16 kHz).
    public var samplesPerFrame: Int { format.frames(milliseconds: frameMilliseconds) }

    /// Encoder lookahead in samples per channel at the input rate: how far the decoded audio
    /// lags the PCM that went in (an Ogg muxer writes it, scaled to 48 kHz, as the pre-skip).
    public var lookaheadSamples: Int {
        var samples: Int32 = 0
        return cv_opus_get_lookahead(encoder, &samples) == OPUS_OK ? Int(samples) : 0
    }

    /// Encodes exactly one 20 ms frame (`samplesPerFrame × channels` interleaved samples).
    public func encode(_ frame: ArraySlice<Int16>) throws(AudioCodecError) -> [UInt8] {
        let expected = samplesPerFrame * format.channels
        guard frame.count == expected else {
            throw .invalidInput("opus_encode takes one \(frameMilliseconds) ms frame of \(expected) samples at \(format), got \(frame.count)")
        }
        let capacity = Int32(packet.count)
        let frameSize = Int32(samplesPerFrame)
        let encoder = self.encoder
        let length = frame.withUnsafeBufferPointer { pcm in
            packet.withUnsafeMutableBufferPointer { out in
                // Both buffers are non-empty (checked above), so their base addresses exist.
                opus_encode(encoder, pcm.baseAddress!, frameSize, out.baseAddress!, capacity)
            }
        }
        guard length >= 0 else { throw Self.failure("opus_encode", length) }
        return Array(packet[0..<Int(length)])
    }

    /// Encodes exactly one 20 ms frame.
    public func encode(_ frame: [Int16]) throws(AudioCodecError) -> [UInt8] {
        try encode(frame[...])
    }

    /// True for packets that carry no audio (DTX or silence): 2 bytes or fewer. Callers on a
    /// live uplink may skip them; a file writer must keep them to keep timing.
    public static func isDiscontinuous(_ packet: [UInt8]) -> Bool { packet.count <= 2 }

    private func check(_ call: String, _ code: Int32) throws(AudioCodecError) {
        if code != OPUS_OK { throw Self.failure(call, code) }
    }

    static func failure(_ call: String, _ code: Int32) -> AudioCodecError {
        .library(call: call, code: Int(code), message: String(cString: opus_strerror(code)))
    }
}
