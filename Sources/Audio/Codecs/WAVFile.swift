// WAVFile: RIFF/WAVE in Swift, both ways. Reads 16-bit PCM (1–2 channels, 8–192 kHz), including
// WAVE_FORMAT_EXTENSIBLE and streamed files whose sizes were left as 0 or 0xFFFFFFFF; writes
// the canonical 44-byte header. Everything else is refused with a line that says what it was.
// Files a user hands the node are read by SoundFileReader (libsndfile) instead.

public import ClawvoiceCore
import Foundation

/// 16-bit PCM WAV files.
public enum WAVFile {
    /// Rates accepted when reading, as for `pcm_` labels: outside them the header is broken or
    /// hostile (2000 bytes labelled 100 Hz would hold the speaker for 10 s), not speech.
    public static let sampleRates = 8_000...192_000

    /// A canonical 44-byte-header WAV of `pcm`.
    public static func encode(_ pcm: PCMBuffer) -> [UInt8] {
        let data = pcm.bytes
        let channels = pcm.format.channels
        let rate = pcm.format.sampleRateHz
        var out: [UInt8] = []
        out.reserveCapacity(44 + data.count)
        out += Array("RIFF".utf8); out.appendLE32(36 + data.count); out += Array("WAVE".utf8)
        out += Array("fmt ".utf8); out.appendLE32(16)
        out.appendLE16(1)                       // WAVE_FORMAT_PCM
        out.appendLE16(channels)
        out.appendLE32(rate)
        out.appendLE32(rate * channels * 2)     // byte rate
        out.appendLE16(channels * 2)            // block align
        out.appendLE16(16)                      // bits per sample
        out += Array("data".utf8); out.appendLE32(data.count)
        out += data
        return out
    }

    /// Reads a 16-bit PCM WAV with 1 or 2 channels.
    public static func decode(_ bytes: [UInt8]) throws(ClipDecodeError) -> PCMBuffer {
        guard !bytes.isEmpty else { throw .empty }
        guard bytes.count >= 12, bytes.ascii(0, 4) == "RIFF" || bytes.ascii(0, 4) == "RIFX",
              bytes.ascii(8, 4) == "WAVE" else {
            throw .corrupt(call: "WAV parser", reason: "no RIFF/WAVE header")
        }
        if bytes.ascii(0, 4) == "RIFX" { throw .unsupported("big-endian (RIFX) WAV") }

        var format: AudioFormat?
        var offset = 12
        while offset + 8 <= bytes.count {
            let id = bytes.ascii(offset, 4)
            let declared = bytes.le32(offset + 4)
            let body = offset + 8
            let available = bytes.count - body
            switch id {
            case "fmt ":
                guard declared >= 16, available >= 16 else {
                    throw .corrupt(call: "WAV parser", reason: "fmt chunk of \(declared) bytes is too short")
                }
                format = try pcmFormat(bytes, at: body, size: min(declared, available))
            case "data":
                guard let format else { throw .corrupt(call: "WAV parser", reason: "data chunk before fmt chunk") }
                // Streamed WAVs (ffmpeg to a pipe, some TTS services) leave the size at 0 or
                // 0xFFFFFFFF: take what is there. A truncated file likewise keeps what arrived.
                let size = (declared == 0 || declared == 0xFFFF_FFFF || declared > available) ? available : declared
                let whole = size - size % format.bytesPerFrame
                return PCMBuffer(format: format, littleEndianBytes: bytes[body..<body + whole])
            default:
                break
            }
            guard declared <= available else { break }
            offset = body + declared + (declared & 1)   // chunks are padded to even sizes
        }
        throw .corrupt(call: "WAV parser", reason: format == nil ? "no fmt chunk" : "no data chunk")
    }

    static func pcmFormat(_ b: [UInt8], at i: Int, size: Int) throws(ClipDecodeError) -> AudioFormat {
        var tag = b.le16(i)
        let channels = b.le16(i + 2)
        let rate = b.le32(i + 4)
        let bits = b.le16(i + 14)
        // WAVE_FORMAT_EXTENSIBLE keeps the real format in the first two bytes of its GUID.
        if tag == 0xFFFE {
            guard size >= 40 else { throw .corrupt(call: "WAV parser", reason: "extensible fmt chunk of \(size) bytes is too short") }
            tag = b.le16(i + 24)
        }
        let names = [3: "32-bit float", 6: "A-law", 7: "µ-law", 0x55: "MP3", 2: "ADPCM", 0x11: "IMA ADPCM"]
        guard tag == 1 else { throw .unsupported("WAV with \(names[tag] ?? "format tag \(tag)") samples; only 16-bit PCM is played") }
        guard bits == 16 else { throw .unsupported("WAV with \(bits)-bit PCM; only 16-bit PCM is played") }
        guard (1...2).contains(channels) else { throw .unsupported("WAV with \(channels) channels; only mono and stereo are played") }
        guard sampleRates.contains(rate) else {
            throw .unsupported("WAV at \(rate) Hz; only \(sampleRates.lowerBound / 1000)–\(sampleRates.upperBound / 1000) kHz is played")
        }
        return AudioFormat(sampleRateHz: rate, channels: channels)
    }
}

private extension [UInt8] {
    func ascii(_ at: Int, _ count: Int) -> String {
        guard at >= 0, at + count <= self.count else { return "" }
        return String(decoding: self[at..<at + count], as: UTF8.self)
    }

    func le16(_ at: Int) -> Int { Int(self[at]) | Int(self[at + 1]) << 8 }
    func le32(_ at: Int) -> Int { le16(at) | le16(at + 2) << 16 }

    mutating func appendLE16(_ v: Int) { append(UInt8(v & 0xff)); append(UInt8((v >> 8) & 0xff)) }
    mutating func appendLE32(_ v: Int) { appendLE16(v & 0xffff); appendLE16((v >> 16) & 0xffff) }
}
