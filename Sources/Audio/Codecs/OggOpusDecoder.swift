// OggOpusDecoder owns one opusfile handle (OggOpusFile *) per decode: a whole Ogg Opus clip
// from memory to 48 kHz s16 PCM. It is the only file that calls opusfile.
internal import COpusFile
import ClawvoiceCore

/// Decodes Ogg Opus bytes held in memory. Used by `ClipDecoder`.
enum OggOpusDecoder {
    /// opusfile always decodes at 48 kHz, whatever rate the header says the input had.
    static let outputRateHz = 48_000

    static func decode(_ data: [UInt8]) throws(ClipDecodeError) -> PCMBuffer {
        // opusfile reads the caller's buffer in place for the file's whole life, so the handle
        // is opened, read and freed inside one withUnsafeBufferPointer.
        let result: Result<PCMBuffer, ClipDecodeError> = data.withUnsafeBufferPointer { bytes in
            var error: Int32 = 0
            if let file = op_open_memory(bytes.baseAddress, bytes.count, &error) {
                defer { op_free(file) }
                return Result { () throws(ClipDecodeError) in try read(file, seekable: true) }
            }
            // Opening seekable makes opusfile check the last page too, and a clip cut short
            // fails that (OP_EBADTIMESTAMP, OP_EBADLINK). Read front to back instead, as a
            // stream, and keep whatever decodes.
            let seekableError = ClipDecodeError.corrupt(call: "op_open_memory", reason: name(error))
            var callbacks = OpusFileCallbacks()
            guard let stream = op_mem_stream_create(&callbacks, bytes.baseAddress, bytes.count) else {
                return .failure(seekableError)
            }
            callbacks.seek = nil
            guard let file = op_open_callbacks(stream, &callbacks, nil, 0, &error) else {
                // On failure the stream is still ours to close.
                _ = callbacks.close?(stream)
                return .failure(seekableError)
            }
            defer { op_free(file) }
            return Result { () throws(ClipDecodeError) in try read(file, seekable: false) }
        }
        return try result.get()
    }

    private static func read(_ file: OpaquePointer, seekable: Bool) throws(ClipDecodeError) -> PCMBuffer {
        // Mono or stereo as the stream has it. Surround streams, and seekable chains whose
        // links disagree, are read down-mixed to stereo so one buffer has one format. An
        // unseekable source only knows its current link.
        let counts = seekable ? Set((0..<max(op_link_count(file), 1)).map { op_channel_count(file, $0) })
                              : [op_channel_count(file, -1)]
        let stereoMix = counts.count > 1 || counts.contains { $0 > 2 }
        let channels = stereoMix ? 2 : Int(counts.first ?? 1)
        let call = stereoMix ? "op_read_stereo" : "op_read"

        var samples: [Int16] = []
        var chunk = [Int16](repeating: 0, count: 120 * 48 * 2)   // 120 ms of 48 kHz stereo
        var holes = 0
        while true {
            var link: Int32 = 0
            let frames = chunk.withUnsafeMutableBufferPointer { out in
                stereoMix ? op_read_stereo(file, out.baseAddress, Int32(out.count))
                          : op_read(file, out.baseAddress, Int32(out.count), &link)
            }
            if frames == 0 { break }
            if frames == OP_HOLE {
                // A missing or damaged page: opusfile skips it and carries on; a clip that is
                // mostly holes is garbage, though.
                holes += 1
                if holes > 16 { throw .corrupt(call: call, reason: "too many holes (OP_HOLE)") }
                continue
            }
            if frames < 0 {
                // A clip cut short mid-packet still plays up to the cut.
                if !samples.isEmpty { break }
                throw .corrupt(call: call, reason: name(frames))
            }
            if !stereoMix, Int(op_channel_count(file, link)) != channels {
                throw .unsupported("Ogg Opus chain changes from \(channels) to \(op_channel_count(file, link)) channels")
            }
            samples += chunk[0..<Int(frames) * channels]
        }
        guard !samples.isEmpty else { throw .corrupt(call: call, reason: "no audio in the Ogg Opus stream") }
        return PCMBuffer(format: AudioFormat(sampleRateHz: outputRateHz, channels: channels), samples: samples)
    }

    /// opusfile has no strerror; these are its error macros and what its header says of them.
    static func name(_ code: Int32) -> String {
        switch code {
        case OP_FALSE: "OP_FALSE (request did not succeed)"
        case OP_EOF: "OP_EOF (end of file)"
        case OP_HOLE: "OP_HOLE (gap in the stream)"
        case OP_EREAD: "OP_EREAD (read failed)"
        case OP_EFAULT: "OP_EFAULT (internal error or out of memory)"
        case OP_EIMPL: "OP_EIMPL (feature not implemented)"
        case OP_EINVAL: "OP_EINVAL (invalid argument)"
        case OP_ENOTFORMAT: "OP_ENOTFORMAT (not Ogg, or no Opus stream in it)"
        case OP_EBADHEADER: "OP_EBADHEADER (bad Opus header)"
        case OP_EVERSION: "OP_EVERSION (unsupported Opus header version)"
        case OP_ENOTAUDIO: "OP_ENOTAUDIO (not audio)"
        case OP_EBADPACKET: "OP_EBADPACKET (undecodable packet)"
        case OP_EBADLINK: "OP_EBADLINK (damaged link; file truncated or corrupt)"
        case OP_ENOSEEK: "OP_ENOSEEK (stream not seekable)"
        case OP_EBADTIMESTAMP: "OP_EBADTIMESTAMP (invalid granule position)"
        default: "opusfile error \(code)"
        }
    }
}
