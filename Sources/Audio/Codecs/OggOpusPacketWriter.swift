// The live uplink's Ogg Opus stream (RFC 7845), muxed here over libopus packets: libopusenc
// resamples everything to 48 kHz first, which costs ~1.8× a bare encode at 16 kHz, and the
// uplink encodes while the user speaks. Voice notes still go through libopusenc.
// Every call returns whole pages; all the calls of one stream concatenate to one valid file.

/// Opus packets from `OpusVoiceEncoder`, framed into Ogg pages of about `pageMilliseconds`.
public final class OggOpusPacketWriter {
    public let format: AudioFormat
    public let pageMilliseconds: Int
    private let encoder: OpusVoiceEncoder
    private let serial: UInt32
    private var sequence: UInt32 = 0
    private var granule: Int64 = 0
    private var pending: [[UInt8]] = []
    private var headersSent = false
    private var carry: [Int16] = []
    private var inputSamples: Int64 = 0
    private var finished = false
    private let preSkip: Int

    public init(sampleRateHz: Int = 16_000, channels: Int = 1, bitrate: Int = 20_000, complexity: Int = 5,
                pageMilliseconds: Int = 100, serial: UInt32 = UInt32.random(in: 1...UInt32.max)) throws(AudioCodecError) {
        encoder = try OpusVoiceEncoder(sampleRateHz: sampleRateHz, channels: channels, bitrate: bitrate, complexity: complexity)
        format = AudioFormat(sampleRateHz: sampleRateHz, channels: channels)
        self.pageMilliseconds = max(20, pageMilliseconds)
        self.serial = serial
        // Pre-skip is counted at 48 kHz whatever the input rate (RFC 7845 §4.2).
        preSkip = encoder.lookaheadSamples * 48_000 / sampleRateHz
    }

    /// Interleaved samples at `format`; returns the pages completed by them (possibly none).
    public func append(_ pcm: [Int16]) throws(AudioCodecError) -> [UInt8] {
        guard !finished else { throw .finished }
        var out = headersSent ? [] : headers()
        carry += pcm
        inputSamples += Int64(pcm.count / format.channels)
        let frame = encoder.samplesPerFrame * format.channels
        var offset = 0
        while carry.count - offset >= frame {
            pending.append(try encoder.encode(carry[offset..<offset + frame]))
            offset += frame
            granule += 960
        }
        carry.removeFirst(offset)
        if pending.count * encoder.frameMilliseconds >= pageMilliseconds {
            out += page(pending, granule: granule, flags: 0)
            pending.removeAll()
        }
        return out
    }

    /// Encodes what is left (padded with silence to a whole frame) and closes the stream.
    public func finish() throws(AudioCodecError) -> [UInt8] {
        guard !finished else { throw .finished }
        var out = headersSent ? [] : headers()
        if !carry.isEmpty {
            let frame = encoder.samplesPerFrame * format.channels
            carry += [Int16](repeating: 0, count: frame - carry.count)
            pending.append(try encoder.encode(carry[...]))
            granule += 960
            carry.removeAll()
        }
        // The end granule trims the padding: pre-skip plus the real input, at 48 kHz.
        let end = Int64(preSkip) + inputSamples * 48_000 / Int64(format.sampleRateHz)
        out += page(pending, granule: min(granule, end), flags: 0x04)
        pending.removeAll()
        finished = true
        return out
    }

    private func headers() -> [UInt8] {
        headersSent = true
        var head: [UInt8] = Array("OpusHead".utf8) + [1, UInt8(format.channels)]
        head += le16(UInt16(preSkip)) + le32(UInt32(format.sampleRateHz)) + le16(0) + [0]
        let vendor = Array("clawvoice".utf8)
        let tags: [UInt8] = Array("OpusTags".utf8) + le32(UInt32(vendor.count)) + vendor + le32(0)
        return page([head], granule: 0, flags: 0x02) + page([tags], granule: 0, flags: 0)
    }

    private func page(_ packets: [[UInt8]], granule: Int64, flags: UInt8) -> [UInt8] {
        var lacing: [UInt8] = []
        for p in packets {
            lacing += [UInt8](repeating: 255, count: p.count / 255)
            lacing.append(UInt8(p.count % 255))
        }
        // Voice packets at ≤ 128 kb/s are far below the 255 × 255 bytes a page can hold.
        var page: [UInt8] = Array("OggS".utf8) + [0, flags]
        page += le64(UInt64(bitPattern: granule)) + le32(serial) + le32(sequence) + [0, 0, 0, 0]
        page.append(UInt8(lacing.count))
        page += lacing
        for p in packets { page += p }
        let crc = OggCRC.checksum(page)
        page[22] = UInt8(crc & 0xff); page[23] = UInt8(crc >> 8 & 0xff)
        page[24] = UInt8(crc >> 16 & 0xff); page[25] = UInt8(crc >> 24)
        sequence += 1
        return page
    }

    private func le16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xff), UInt8(v >> 8)] }
    private func le32(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(v >> (8 * $0) & 0xff) } }
    private func le64(_ v: UInt64) -> [UInt8] { (0..<8).map { UInt8(v >> (8 * UInt64($0)) & 0xff) } }
}

/// The Ogg page checksum: CRC-32, polynomial 0x04c11db7, not reflected, initial 0, no final xor.
public enum OggCRC {
    static let table: [UInt32] = (0..<256).map { i -> UInt32 in
        var r = UInt32(i) << 24
        for _ in 0..<8 { r = r & 0x8000_0000 != 0 ? (r << 1) ^ 0x04c1_1db7 : r << 1 }
        return r
    }

    public static func checksum(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0
        for b in bytes { crc = (crc << 8) ^ table[Int((crc >> 24) ^ UInt32(b))] }
        return crc
    }
}
