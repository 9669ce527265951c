// MP3Decoder owns one libmpg123 handle per decode: a whole MP3 clip from memory to s16 PCM.
// It is the only file that calls mpg123. Feed mode, so no file or reader callbacks are needed.
internal import CMpg123
import ClawvoiceCore

/// Decodes MP3 bytes held in memory. Used by `ClipDecoder`.
enum MP3Decoder {
    /// mpg123_init is a no-op since libmpg123 1.27 but required before it; run it once.
    private static let initialized: Int32 = mpg123_init()

    static func decode(_ data: [UInt8]) throws(ClipDecodeError) -> PCMBuffer {
        guard initialized == MPG123_OK.rawValue else { throw failure("mpg123_init", initialized) }
        var error: Int32 = 0
        guard let handle = mpg123_new(nil, &error) else { throw failure("mpg123_new", error) }
        defer { mpg123_delete(handle) }

        // Quiet: junk in a bad clip must not print to stderr. Force s16 at every rate libmpg123
        // knows, in whatever channel count the stream has.
        try check(handle, "mpg123_param2(MPG123_ADD_FLAGS)",
                  mpg123_param2(handle, Int32(MPG123_ADD_FLAGS.rawValue), Int(MPG123_QUIET.rawValue), 0))
        try check(handle, "mpg123_format_none", mpg123_format_none(handle))
        var rates: UnsafePointer<Int>?
        var rateCount = 0
        mpg123_rates(&rates, &rateCount)
        for i in 0..<rateCount {
            try check(handle, "mpg123_format", mpg123_format(handle, rates![i], Int32(MPG123_MONO.rawValue | MPG123_STEREO.rawValue),
                                                             Int32(MPG123_ENC_SIGNED_16.rawValue)))
        }
        try check(handle, "mpg123_open_feed", mpg123_open_feed(handle))
        defer { mpg123_close(handle) }
        // mpg123_feed copies the bytes into its own buffers.
        try check(handle, "mpg123_feed", data.withUnsafeBufferPointer { mpg123_feed(handle, $0.baseAddress, $0.count) })

        var format: AudioFormat?
        var samples: [Int16] = []
        var chunk = [UInt8](repeating: 0, count: 32 * 1024)
        decoding: while true {
            var done = 0
            let code = chunk.withUnsafeMutableBufferPointer { mpg123_read(handle, $0.baseAddress, $0.count, &done) }
            if done > 0 {
                guard let format else { throw .corrupt(call: "mpg123_read", reason: "audio before any format") }
                samples += PCMBuffer(format: format, littleEndianBytes: chunk[0..<done]).samples
            }
            switch code {
            case MPG123_OK.rawValue:
                continue
            case MPG123_NEW_FORMAT.rawValue:
                var rate = 0
                var channels: Int32 = 0
                var encoding: Int32 = 0
                try check(handle, "mpg123_getformat", mpg123_getformat(handle, &rate, &channels, &encoding))
                let next = AudioFormat(sampleRateHz: rate, channels: Int(channels))
                if let format, format != next, !samples.isEmpty {
                    throw .unsupported("MP3 changes from \(format) to \(next) mid-clip")
                }
                format = next
            case MPG123_NEED_MORE.rawValue, MPG123_DONE.rawValue:
                // Everything was fed up front, so "need more" is the end of the clip (or of a
                // truncated one: what decoded so far is kept).
                break decoding
            default:
                throw .corrupt(call: "mpg123_read", reason: String(cString: mpg123_strerror(handle)))
            }
        }
        guard let format, !samples.isEmpty else {
            throw .corrupt(call: "mpg123_read", reason: "no MPEG audio frames found")
        }
        return PCMBuffer(format: format, samples: samples)
    }

    private static func check(_ handle: OpaquePointer, _ call: String, _ code: Int32) throws(ClipDecodeError) {
        if code != MPG123_OK.rawValue { throw .corrupt(call: call, reason: String(cString: mpg123_strerror(handle))) }
    }

    private static func failure(_ call: String, _ code: Int32) -> ClipDecodeError {
        .corrupt(call: call, reason: String(cString: mpg123_plain_strerror(code)))
    }
}
