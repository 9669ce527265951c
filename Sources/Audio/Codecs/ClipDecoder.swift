// ClipDecoder: turns a gateway TTS clip (talk.speak / tts.speak result bytes plus their
// outputFormat, mimeType and fileExtension labels) into PCM, or into one ClipDecodeError that
// sends the caller to espeak-ng. Labels pick the decoder; magic bytes overrule a label that the
// bytes plainly contradict. Pure Swift routing; the C work is in MP3Decoder / OggOpusDecoder.

public import ClawvoiceCore

/// The containers a TTS clip can arrive in, as far as this node plays them.
public enum ClipFormat: Sendable, Equatable, CustomStringConvertible {
    /// Raw s16le mono at a rate the label names (`pcm_24000`).
    case pcm(sampleRateHz: Int)
    case wav
    case mp3
    case oggOpus

    public var description: String {
        switch self {
        case let .pcm(rate): "pcm_\(rate)"
        case .wav: "WAV"
        case .mp3: "MP3"
        case .oggOpus: "Ogg Opus"
        }
    }
}

/// Decodes TTS clips by label and by content (spec: talk-and-voice §3.1, §3.2).
public enum ClipDecoder {
    /// Lowest and highest rate a `pcm_<rate>` label may name.
    static let pcmRates = WAVFile.sampleRates

    /// Decodes `data` to PCM in the clip's own rate and channel count.
    ///
    /// `outputFormat` (the provider's format id, e.g. `pcm_24000`, `mp3_44100_128`, `opus`) is
    /// trusted first, then `mimeType`, then `fileExtension`. When the bytes carry an
    /// unmistakable header (RIFF/WAVE, OggS, ID3) that disagrees with the label, the header
    /// wins; a bare MPEG frame sync only earns MP3 a second try after the labelled decoder.
    /// Raw labels without a rate are refused, whatever the bytes look like.
    public static func decode(_ data: [UInt8], outputFormat: String?, mimeType: String?,
                              fileExtension: String?) throws(ClipDecodeError) -> PCMBuffer {
        guard !data.isEmpty else { throw .empty }
        let label = try labelledFormat(outputFormat: outputFormat, mimeType: mimeType, fileExtension: fileExtension)
        let sniff = sniffedFormat(data)

        var attempts: [ClipFormat] = []
        switch (label, sniff) {
        case (nil, nil):
            let head = data.prefix(4).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined(separator: " ")
            let labels = [outputFormat, mimeType, fileExtension].compactMap { $0 }.filter { !$0.isEmpty }
            throw .unsupported(labels.isEmpty ? "no format label and unrecognised bytes (\(head))"
                                              : "unknown format \(labels.joined(separator: " / ")) and unrecognised bytes (\(head))")
        case let (label?, nil):
            attempts = [label]
        case let (nil, sniff?):
            attempts = [sniff.format]
        case let (label?, sniff?):
            if case .pcm = label, !sniff.isStrong {
                // Raw samples can start with anything, including an MPEG sync word.
                attempts = [label]
            } else if label == sniff.format {
                attempts = [label]
            } else if sniff.isStrong {
                // The header is the truth. Falling back to the label here would feed, say, a
                // 24-bit WAV to the raw PCM path or an Ogg file to mpg123, and play noise.
                attempts = [sniff.format]
            } else {
                attempts = [label, sniff.format]
            }
        }

        var firstError: ClipDecodeError?
        for format in attempts {
            do throws(ClipDecodeError) {
                return try decode(data, as: format)
            } catch {
                firstError = firstError ?? error
            }
        }
        throw firstError!
    }

    /// Decodes `data` as `format`, with no label logic or sniffing.
    public static func decode(_ data: [UInt8], as format: ClipFormat) throws(ClipDecodeError) -> PCMBuffer {
        guard !data.isEmpty else { throw .empty }
        switch format {
        case let .pcm(rate):
            guard pcmRates.contains(rate) else { throw .unsupported("raw PCM at \(rate) Hz") }
            // An odd trailing byte is half a sample; drop it.
            return PCMBuffer(format: AudioFormat(sampleRateHz: rate, channels: 1), littleEndianBytes: data.prefix(data.count & ~1))
        case .wav: return try WAVFile.decode(data)
        case .mp3: return try MP3Decoder.decode(data)
        case .oggOpus: return try OggOpusDecoder.decode(data)
        }
    }

    // MARK: - Labels

    /// The format the labels name, trying outputFormat, then mimeType, then fileExtension.
    /// Returns nil when no label names a format this node knows; throws for headerless labels.
    public static func labelledFormat(outputFormat: String?, mimeType: String?,
                                      fileExtension: String?) throws(ClipDecodeError) -> ClipFormat? {
        if let label = normalized(outputFormat), let format = try formatFromOutputFormat(label) { return format }
        if let label = normalized(mimeType), let format = try formatFromMIME(label) { return format }
        if let label = normalized(fileExtension), let format = try formatFromExtension(label) { return format }
        return nil
    }

    private static func normalized(_ label: String?) -> String? {
        guard let trimmed = label?.trimmingWhitespace.lowercased(), !trimmed.isEmpty else { return nil }
        return trimmed
    }

    /// Provider format ids: ElevenLabs `pcm_24000` / `mp3_44100_128` / `opus_48000_64` /
    /// `ulaw_8000`, OpenAI `mp3` / `opus` / `wav` / `pcm`, Azure `riff-24khz-16bit-mono-pcm` /
    /// `ogg-24khz-16bit-mono-opus` / `raw-24khz-16bit-mono-pcm` / `audio-…-mp3`.
    private static func formatFromOutputFormat(_ id: String) throws(ClipDecodeError) -> ClipFormat? {
        if id.hasPrefix("pcm_"), let rate = Int(id.dropFirst(4)), pcmRates.contains(rate) { return .pcm(sampleRateHz: rate) }
        if id.hasPrefix("raw-") || id.hasPrefix("pcm") || id.hasPrefix("mulaw") || id.hasPrefix("ulaw")
            || id.hasPrefix("alaw") || id.hasPrefix("l16") {
            throw .headerless(label: "outputFormat \(id)")
        }
        if id.hasPrefix("mp3") || id.hasSuffix("-mp3") { return .mp3 }
        if id.hasPrefix("opus") || id.hasPrefix("ogg") { return .oggOpus }
        if id.hasPrefix("wav") || id.hasPrefix("riff-") { return .wav }
        return nil
    }

    private static func formatFromMIME(_ mime: String) throws(ClipDecodeError) -> ClipFormat? {
        // Parameters (`audio/L16; rate=24000`) do not change the type.
        let type = String(mime.split(separator: ";").first ?? "").trimmingWhitespace
        switch type {
        case "audio/pcm", "audio/l16", "audio/pcmu", "audio/pcma", "audio/x-raw", "audio/basic", "audio/raw":
            throw .headerless(label: "mimeType \(type)")
        case "audio/mpeg", "audio/mp3", "audio/mpeg3", "audio/x-mpeg", "audio/x-mp3": return .mp3
        case "audio/ogg", "audio/opus", "application/ogg", "audio/x-opus+ogg": return .oggOpus
        case "audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave", "audio/x-pn-wav": return .wav
        default: return nil
        }
    }

    private static func formatFromExtension(_ ext: String) throws(ClipDecodeError) -> ClipFormat? {
        let bare = ext.hasPrefix(".") ? String(ext.dropFirst()) : ext
        switch bare {
        case "pcm", "raw", "mulaw", "ulaw", "alaw", "l16", "ul", "al", "u8", "s16": throw .headerless(label: "fileExtension .\(bare)")
        case "mp3": return .mp3
        case "ogg", "opus", "oga": return .oggOpus
        case "wav", "wave": return .wav
        default: return nil
        }
    }

    // MARK: - Magic bytes

    /// What the first bytes say. `isStrong` marks a real header (RIFF/WAVE, OggS, ID3); a bare
    /// MPEG frame sync (0xFFEx/0xFFFx) is weak, since raw samples can look like one.
    static func sniffedFormat(_ data: [UInt8]) -> (format: ClipFormat, isStrong: Bool)? {
        if data.starts(with: "RIFF".utf8), data.dropFirst(8).starts(with: "WAVE".utf8) { return (.wav, true) }
        if data.starts(with: "OggS".utf8) { return (.oggOpus, true) }
        if data.starts(with: "ID3".utf8) { return (.mp3, true) }
        if data.count >= 2, data[0] == 0xFF, data[1] & 0xE0 == 0xE0, data[1] & 0x06 != 0 { return (.mp3, false) }
        return nil
    }
}

private extension String {
    var trimmingWhitespace: String {
        let scalars = unicodeScalars
        guard let start = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
              let end = scalars.lastIndex(where: { !$0.properties.isWhitespace }) else { return "" }
        return String(scalars[start...end])
    }
}
