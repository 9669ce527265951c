// OggOpusStreamWriter owns one libopusenc pull-API encoder (OggOpusEnc *): PCM in, whole Ogg
// pages out, so a live uplink can ship each batch as it is ready and the receiver still gets
// one valid Ogg Opus file (RFC 7845). OggOpusVoiceNote is the whole-buffer convenience on top.
internal import COpus
internal import COpusEnc
public import ClawvoiceCore

/// Streams s16 PCM into an Ogg Opus file, handing back whole pages as they are ready.
///
/// The concatenation of every byte array returned by `append` and `finish`, in order, is one
/// valid Ogg Opus file. Each non-empty array starts at a page boundary ("OggS") and holds only
/// whole pages. One owner: not `Sendable`; the encoder is freed in `deinit`.
///
/// Page timing: libopusenc normally holds up to 2 s of audio for its "decision delay" and packs
/// pages up to 1 s long, which is right for files and wrong for a live relay. This writer sets
/// the decision delay to 0, so every 20 ms of input is encoded at once, and the muxing delay to
/// `maxPageDelayMilliseconds`, so libopusenc closes a page once it spans that much audio. Pages
/// therefore come out of `append` about every `maxPageDelayMilliseconds` (plus the encoder's
/// one-frame lag); the two header pages come out of the first `append`.
public final class OggOpusStreamWriter {
    /// Input format (any rate: libopusenc resamples to 48 kHz itself; 1 or 2 channels).
    public let format: AudioFormat
    /// Longest span of audio one Ogg page holds before it is released, in milliseconds.
    public let maxPageDelayMilliseconds: Int

    private let encoder: OpaquePointer
    private var isFinished = false
    private var wroteAudio = false

    /// - Parameters:
    ///   - sampleRateHz: input rate in Hz (the Ogg header records it as the original rate).
    ///   - channels: 1 or 2 (mapping family 0).
    ///   - bitrate: bits per second for the Opus encoder.
    ///   - complexity: 0…10.
    ///   - comments: Vorbis comment tags (`TITLE`, `ARTIST`, …); a tag must not contain `=`.
    ///   - maxPageDelayMilliseconds: page cadence for live streaming, 20…1000 ms.
    public init(sampleRateHz: Int = 16_000, channels: Int = 1, bitrate: Int = 20_000, complexity: Int = 5,
                comments: [String: String] = [:], maxPageDelayMilliseconds: Int = 100) throws(AudioCodecError) {
        // Mapping family 0 (the only one a plain voice stream needs) is mono or stereo.
        guard (1...2).contains(channels), sampleRateHz > 0 else {
            throw .invalidInput("Ogg Opus writer takes 1 or 2 channels at a positive rate, got \(channels) at \(sampleRateHz) Hz")
        }
        guard (20...1000).contains(maxPageDelayMilliseconds) else {
            throw .invalidInput("maxPageDelayMilliseconds must be 20…1000, got \(maxPageDelayMilliseconds)")
        }
        guard let tags = ope_comments_create() else {
            throw Self.failure("ope_comments_create", OPE_ALLOC_FAIL)
        }
        // The encoder copies the comments at creation, so they are freed right after.
        defer { ope_comments_destroy(tags) }
        for (tag, value) in comments.sorted(by: { $0.key < $1.key }) {
            let code = ope_comments_add(tags, tag, value)
            guard code == OPE_OK else { throw Self.failure("ope_comments_add(\(tag))", code) }
        }
        var error: Int32 = OPE_OK
        guard let encoder = ope_encoder_create_pull(tags, Int32(clamping: sampleRateHz), Int32(clamping: channels), 0, &error),
              error == OPE_OK else {
            throw Self.failure("ope_encoder_create_pull", error)
        }
        self.encoder = encoder
        self.format = AudioFormat(sampleRateHz: sampleRateHz, channels: channels)
        self.maxPageDelayMilliseconds = maxPageDelayMilliseconds
        // Both delays are counted in 48 kHz samples whatever the input rate.
        try check("ope_encoder_ctl(OPUS_SET_APPLICATION)", cv_ope_set_application_voip(encoder))
        try check("ope_encoder_ctl(OPUS_SET_SIGNAL)", cv_ope_set_signal_voice(encoder))
        try check("ope_encoder_ctl(OPUS_SET_BITRATE)", cv_ope_set_bitrate(encoder, Int32(clamping: bitrate)))
        try check("ope_encoder_ctl(OPUS_SET_COMPLEXITY)", cv_ope_set_complexity(encoder, Int32(clamping: complexity)))
        try check("ope_encoder_ctl(OPE_SET_DECISION_DELAY)", cv_ope_set_decision_delay(encoder, 0))
        try check("ope_encoder_ctl(OPE_SET_MUXING_DELAY)", cv_ope_set_muxing_delay(encoder, Int32(maxPageDelayMilliseconds * 48)))
    }

    deinit { ope_encoder_destroy(encoder) }

    /// Encodes `pcm` (interleaved, any length that divides by the channel count) and returns
    /// the whole pages that are now complete, possibly none.
    public func append(_ pcm: [Int16]) throws(AudioCodecError) -> [UInt8] {
        guard !isFinished else { throw .finished }
        guard pcm.count % format.channels == 0 else {
            throw .invalidInput("\(pcm.count) samples do not divide into \(format.channels) channels")
        }
        if !pcm.isEmpty {
            let encoder = self.encoder
            let frames = Int32(pcm.count / format.channels)
            let code = pcm.withUnsafeBufferPointer { ope_encoder_write(encoder, $0.baseAddress!, frames) }
            try check("ope_encoder_write", code)
            wroteAudio = true
        }
        // libopusenc 0.2.1 dereferences its (still null) stream when asked for pages before the first sample.
        guard wroteAudio else { return [] }
        return try readyPages(flush: false)
    }

    /// Encodes what is buffered, ends the stream and returns its last pages.
    public func finish() throws(AudioCodecError) -> [UInt8] {
        guard !isFinished else { throw .finished }
        isFinished = true
        if !wroteAudio {
            // libopusenc asserts (aborts the process) when draining a stream that never got a
            // sample; one silent frame of one sample makes it a valid, empty-sounding file.
            let silence = [Int16](repeating: 0, count: format.channels)
            try check("ope_encoder_write", silence.withUnsafeBufferPointer { ope_encoder_write(encoder, $0.baseAddress!, 1) })
        }
        try check("ope_encoder_drain", ope_encoder_drain(encoder))
        return try readyPages(flush: true)
    }

    private func readyPages(flush: Bool) throws(AudioCodecError) -> [UInt8] {
        var out: [UInt8] = []
        while true {
            var page: UnsafeMutablePointer<UInt8>?
            var length: Int32 = 0
            let got = ope_encoder_get_page(encoder, &page, &length, flush ? 1 : 0)
            if got < 0 { throw Self.failure("ope_encoder_get_page", got) }
            // The page buffer belongs to libopusenc and is reused by the next call: copy now.
            guard got == 1, let page, length > 0 else { return out }
            out.append(contentsOf: UnsafeBufferPointer(start: page, count: Int(length)))
        }
    }

    private func check(_ call: String, _ code: Int32) throws(AudioCodecError) {
        if code != OPE_OK { throw Self.failure(call, code) }
    }

    static func failure(_ call: String, _ code: Int32) -> AudioCodecError {
        .library(call: call, code: Int(code), message: String(cString: ope_strerror(code)))
    }
}

/// A whole recording as one Ogg Opus file: the voice note that rides along a `chat.send`
/// as an `audio/ogg` attachment.
public enum OggOpusVoiceNote {
    /// MIME type of what `encode` returns.
    public static let mimeType = "audio/ogg"

    /// Encodes all of `pcm` (1 or 2 channels, any rate) into Ogg Opus bytes.
    public static func encode(_ pcm: PCMBuffer, bitrate: Int = 24_000, complexity: Int = 5,
                              comments: [String: String] = [:]) throws(AudioCodecError) -> [UInt8] {
        // Page cadence does not matter for a file; 1 s pages keep the overhead lowest.
        let writer = try OggOpusStreamWriter(sampleRateHz: pcm.format.sampleRateHz, channels: pcm.format.channels,
                                             bitrate: bitrate, complexity: complexity, comments: comments,
                                             maxPageDelayMilliseconds: 1000)
        var bytes = try writer.append(pcm.samples)
        bytes += try writer.finish()
        return bytes
    }
}
