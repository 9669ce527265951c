// SoundFileReader: an audio file a user hands the node (`wake detect --input`, wake.chime, the
// feedback sounds) read through libsndfile as 16-bit PCM, block by block: WAV of any depth or
// float, FLAC, AIFF, Ogg Vorbis and what else libsndfile opens. Gateway clips keep ClipDecoder:
// their formats are labelled, and a clip it cannot play goes to espeak-ng, as the spec says.
internal import CSndFile
public import ClawvoiceCore
import Foundation

/// One open file; one owner (not `Sendable`); closed in `deinit`.
public final class SoundFileReader {
    public let format: AudioFormat
    /// Frames in the file as its header says (libsndfile's count; 0 when it cannot tell).
    public let frameCount: Int
    private let file: OpaquePointer

    /// Opens `path` and checks its header: 1 or 2 channels, a rate inside `rates`. Nothing
    /// else is read yet.
    public init(path: String, rates: ClosedRange<Int> = WAVFile.sampleRates) throws(ClipDecodeError) {
        guard FileManager.default.isReadableFile(atPath: path) else { throw .corrupt(call: "open", reason: "no such file or not readable") }
        var info = SF_INFO()
        guard let f = sf_open(path, Int32(SFM_READ), &info) else {
            if (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) == 0 { throw .empty }
            throw .unsupported("not audio libsndfile reads (\(String(cString: sf_strerror(nil))))")
        }
        guard (1...2).contains(info.channels) else {
            sf_close(f)
            throw .unsupported("\(info.channels) channels; only mono and stereo are read")
        }
        guard rates.contains(Int(info.samplerate)) else {
            sf_close(f)
            throw .unsupported("audio at \(info.samplerate) Hz; only \(rates.lowerBound / 1000)–\(rates.upperBound / 1000) kHz is read")
        }
        file = f
        format = AudioFormat(sampleRateHz: Int(info.samplerate), channels: Int(info.channels))
        frameCount = Int(max(info.frames, 0))
    }

    deinit { sf_close(file) }

    /// The next block of at most `frames` frames (interleaved samples); empty at the end.
    public func next(frames: Int = 16_384) -> [Int16] {
        guard frames > 0 else { return [] }
        // As floats, which libsndfile scales to ±1 from any integer depth; its float-to-short path
        // does not scale float files. ×32768 gives 16-bit samples back exactly; past full scale clips.
        var block = [Float](repeating: 0, count: frames * format.channels)
        let read = block.withUnsafeMutableBufferPointer { sf_readf_float(file, $0.baseAddress, sf_count_t(frames)) }
        return block[0..<Int(max(read, 0)) * format.channels].map { x in
            x.isNaN ? 0 : Int16(max(-32_768, min(32_767, (x * 32_768).rounded())))
        }
    }

    /// The whole file, refused when it is longer than `maxMilliseconds` (checked on the header first).
    public static func decode(path: String, maxMilliseconds: Int? = nil) throws(ClipDecodeError) -> PCMBuffer {
        let reader = try SoundFileReader(path: path)
        let rate = reader.format.sampleRateHz
        let limit = maxMilliseconds.map { $0 * rate / 1000 }
        if let limit, reader.frameCount > limit {
            throw .unsupported("\(reader.frameCount * 1000 / rate) ms long; at most \(maxMilliseconds!) ms is read")
        }
        var samples: [Int16] = []
        while true {
            let block = reader.next()
            if block.isEmpty { break }
            samples += block
            if let limit, samples.count / reader.format.channels > limit {
                throw .unsupported("longer than \(maxMilliseconds!) ms; at most that is read")
            }
        }
        return PCMBuffer(format: reader.format, samples: samples)
    }
}
