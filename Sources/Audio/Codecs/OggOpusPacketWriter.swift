// The live uplink's Ogg Opus stream (RFC 7845): libopus packets framed into Ogg pages by libogg.
// Not libopusenc: it resamples everything to 48 kHz first, which costs ~1.8× a bare encode at
// 16 kHz, and the uplink encodes while the user speaks. Voice notes still go through libopusenc.
// Every call returns whole pages; all the calls of one stream concatenate to one valid file.
internal import COgg
public import ClawvoiceCore

/// Opus packets from `OpusVoiceEncoder`, framed into Ogg pages of about `pageMilliseconds`.
public final class OggOpusPacketWriter {
    public let format: AudioFormat
    public let pageMilliseconds: Int
    private let encoder: OpusVoiceEncoder
    /// libogg's stream: lacing, page sequence numbers and checksums (freed in deinit).
    private let stream = UnsafeMutablePointer<ogg_stream_state>.allocate(capacity: 1)
    private var packetNumber: Int64 = 0
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
        ogg_stream_init(stream, Int32(bitPattern: serial))
        // Pre-skip is counted at 48 kHz whatever the input rate (RFC 7845 §4.2).
        preSkip = encoder.lookaheadSamples * 48_000 / sampleRateHz
    }

    deinit {
        ogg_stream_clear(stream)
        stream.deallocate()
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
        // Ogg marks the end on a page that carries a packet, so an end with nothing left to
        // send gets one frame of silence, which the end granule below trims away again.
        if !carry.isEmpty || pending.isEmpty {
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

    /// One page holding `packets`; the last carries `granule`; flags 0x04 ends the stream
    /// (libogg marks the first page of the stream itself).
    private func page(_ packets: [[UInt8]], granule: Int64, flags: UInt8) -> [UInt8] {
        for (i, p) in packets.enumerated() {
            var bytes = p
            bytes.withUnsafeMutableBufferPointer { b in
                let last = i == packets.count - 1
                var op = ogg_packet(packet: b.baseAddress, bytes: b.count, b_o_s: packetNumber == 0 ? 1 : 0,
                                    e_o_s: last && flags & 0x04 != 0 ? 1 : 0,
                                    granulepos: last ? granule : -1, packetno: packetNumber)
                _ = ogg_stream_packetin(stream, &op)  // copies the bytes
            }
            packetNumber += 1
        }
        // Voice packets at ≤ 128 kb/s are far below the 255 × 255 bytes a page can hold, so one
        // flush is one page; the loop only guards that.
        var out: [UInt8] = []
        var og = ogg_page()
        while ogg_stream_flush(stream, &og) != 0 {
            out += UnsafeBufferPointer(start: og.header, count: og.header_len)
            out += UnsafeBufferPointer(start: og.body, count: og.body_len)
        }
        return out
    }

    private func le16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xff), UInt8(v >> 8)] }
    private func le32(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(v >> (8 * $0) & 0xff) } }
}
