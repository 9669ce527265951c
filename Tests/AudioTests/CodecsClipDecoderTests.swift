// Tests for ClipDecoder and WAVFile: clips made by ffmpeg from a known 1.0 s tone in every
// format a gateway may send, the label rules (headerless, empty, disagreeing labels), and
// bad input that must end in a ClipDecodeError, never a crash.
import ClawvoiceCore
import Foundation
import Testing
@testable import Audio

/// Makes a 1.0 s 440 Hz sine clip with ffmpeg and returns its bytes.
private func ffmpegClip(_ dir: CodecsTempDirectory, name: String, rateHz: Int, channels: Int, output: [String]) throws -> [UInt8] {
    let target = dir.file(name)
    try CodecFixtures.runTool("ffmpeg", ["-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi",
                           "-i", "sine=frequency=440:duration=1:sample_rate=\(rateHz)",
                           "-ac", "\(channels)", "-ar", "\(rateHz)"] + output + [target])
    return try dir.read(name)
}

/// Zero crossings of the first channel per second; 880 for a 440 Hz tone.
private func crossingsPerSecond(_ pcm: PCMBuffer) -> Double {
    Double(CodecFixtures.zeroCrossings(pcm.mono().samples)) / (pcm.durationMilliseconds / 1000)
}

@Suite struct ClipDecoderTests {
    struct Case: CustomTestStringConvertible, Sendable {
        let name: String
        let rateHz: Int
        let channels: Int
        let ffmpeg: [String]
        let outputFormat: String?
        let mimeType: String?
        let fileExtension: String?
        let expectedRateHz: Int
        let toleranceMs: Double
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "tone.wav", rateHz: 22_050, channels: 1, ffmpeg: ["-c:a", "pcm_s16le"],
             outputFormat: nil, mimeType: "audio/wav", fileExtension: ".wav", expectedRateHz: 22_050, toleranceMs: 30),
        Case(name: "stereo.wav", rateHz: 44_100, channels: 2, ffmpeg: ["-c:a", "pcm_s16le"],
             outputFormat: "wav", mimeType: nil, fileExtension: nil, expectedRateHz: 44_100, toleranceMs: 30),
        Case(name: "tone.mp3", rateHz: 44_100, channels: 1, ffmpeg: ["-c:a", "libmp3lame", "-b:a", "128k"],
             outputFormat: "mp3_44100_128", mimeType: "audio/mpeg", fileExtension: ".mp3", expectedRateHz: 44_100, toleranceMs: 60),
        Case(name: "tone.opus", rateHz: 48_000, channels: 1, ffmpeg: ["-c:a", "libopus", "-b:a", "32k"],
             outputFormat: "opus", mimeType: "audio/ogg", fileExtension: ".opus", expectedRateHz: 48_000, toleranceMs: 30),
        Case(name: "stereo.ogg", rateHz: 48_000, channels: 2, ffmpeg: ["-c:a", "libopus", "-b:a", "64k"],
             outputFormat: nil, mimeType: nil, fileExtension: "ogg", expectedRateHz: 48_000, toleranceMs: 30),
        Case(name: "tone.pcm", rateHz: 24_000, channels: 1, ffmpeg: ["-f", "s16le", "-c:a", "pcm_s16le"],
             outputFormat: "pcm_24000", mimeType: "audio/pcm", fileExtension: ".pcm", expectedRateHz: 24_000, toleranceMs: 30),
    ]

    @Test(arguments: cases)
    func `a one second clip decodes to one second of the same tone`(_ clip: Case) throws {
        let dir = try CodecsTempDirectory()
        let bytes = try ffmpegClip(dir, name: clip.name, rateHz: clip.rateHz, channels: clip.channels, output: clip.ffmpeg)
        let pcm = try ClipDecoder.decode(bytes, outputFormat: clip.outputFormat, mimeType: clip.mimeType, fileExtension: clip.fileExtension)
        #expect(pcm.format == AudioFormat(sampleRateHz: clip.expectedRateHz, channels: clip.channels))
        #expect(abs(pcm.durationMilliseconds - 1000) <= clip.toleranceMs, "\(clip.name): \(pcm.durationMilliseconds) ms")
        #expect(pcm.rms > 0.03, "\(clip.name): rms \(pcm.rms)")
        let crossings = crossingsPerSecond(pcm)
        #expect(abs(crossings - 880) < 20, "\(clip.name): \(crossings) zero crossings per second")
        print("clip \(clip.name): \(pcm.format), \(pcm.durationMilliseconds) ms, rms \(pcm.rms), \(crossings) crossings/s")
    }

    @Test(arguments: [
        ("raw-24khz-16bit-mono-pcm", nil, nil), ("pcm", nil, nil), ("mulaw", nil, nil), ("alaw", nil, nil),
        ("ulaw_8000", nil, nil), ("pcm_abc", nil, nil),
        (nil, "audio/pcm", nil), (nil, "audio/L16; rate=24000", nil), (nil, "audio/pcmu", nil), (nil, "audio/pcma", nil),
        (nil, "audio/x-raw", nil),
        (nil, nil, ".pcm"), (nil, nil, "raw"), (nil, nil, ".mulaw"), (nil, nil, ".ulaw"), (nil, nil, ".alaw"),
    ] as [(String?, String?, String?)])
    func `labels without a sample rate are refused as headerless`(_ outputFormat: String?, _ mimeType: String?, _ fileExtension: String?) {
        #expect {
            _ = try ClipDecoder.decode([1, 2, 3, 4, 5, 6], outputFormat: outputFormat, mimeType: mimeType, fileExtension: fileExtension)
        } throws: { error in
            guard case .headerless = error as? ClipDecodeError else { return false }
            return true
        }
    }

    @Test func `an empty clip is refused as empty whatever its label`() {
        #expect(throws: ClipDecodeError.empty) { _ = try ClipDecoder.decode([], outputFormat: "pcm_24000", mimeType: nil, fileExtension: nil) }
        #expect(throws: ClipDecodeError.empty) { _ = try ClipDecoder.decode([], outputFormat: nil, mimeType: nil, fileExtension: nil) }
    }

    @Test func `the outputFormat label outranks mimeType and fileExtension`() throws {
        let pcm = try ClipDecoder.labelledFormat(outputFormat: "pcm_16000", mimeType: "audio/mpeg", fileExtension: ".mp3")
        #expect(pcm == .pcm(sampleRateHz: 16_000))
        #expect(try ClipDecoder.labelledFormat(outputFormat: "flac", mimeType: "audio/mpeg", fileExtension: nil) == .mp3)
        #expect(try ClipDecoder.labelledFormat(outputFormat: "riff-24khz-16bit-mono-pcm", mimeType: nil, fileExtension: nil) == .wav)
        #expect(try ClipDecoder.labelledFormat(outputFormat: "ogg-24khz-16bit-mono-opus", mimeType: nil, fileExtension: nil) == .oggOpus)
        #expect(try ClipDecoder.labelledFormat(outputFormat: "audio-24khz-48kbitrate-mono-mp3", mimeType: nil, fileExtension: nil) == .mp3)
        #expect(try ClipDecoder.labelledFormat(outputFormat: nil, mimeType: nil, fileExtension: nil) == nil)
    }

    @Test func `bytes whose header contradicts the label decode as what they are`() throws {
        let dir = try CodecsTempDirectory()
        let ogg = try ffmpegClip(dir, name: "t.opus", rateHz: 48_000, channels: 1, output: ["-c:a", "libopus"])
        let asMP3 = try ClipDecoder.decode(ogg, outputFormat: "mp3_44100_128", mimeType: "audio/mpeg", fileExtension: ".mp3")
        #expect(asMP3.format.sampleRateHz == 48_000)
        let wav = try ffmpegClip(dir, name: "t.wav", rateHz: 16_000, channels: 1, output: ["-c:a", "pcm_s16le"])
        let asPCM = try ClipDecoder.decode(wav, outputFormat: "pcm_24000", mimeType: nil, fileExtension: nil)
        #expect(asPCM.format.sampleRateHz == 16_000)
        #expect(abs(asPCM.durationMilliseconds - 1000) <= 30)
        let mp3 = try ffmpegClip(dir, name: "t.mp3", rateHz: 44_100, channels: 1, output: ["-c:a", "libmp3lame"])
        let asWAV = try ClipDecoder.decode(mp3, outputFormat: "wav", mimeType: "audio/wav", fileExtension: nil)
        #expect(asWAV.format.sampleRateHz == 44_100)
        let unlabelled = try ClipDecoder.decode(mp3, outputFormat: nil, mimeType: nil, fileExtension: nil)
        #expect(abs(unlabelled.durationMilliseconds - 1000) <= 60)
    }

    @Test func `a bad WAV labelled pcm_24000 is refused, not played as raw samples`() throws {
        let dir = try CodecsTempDirectory()
        let wav24 = try ffmpegClip(dir, name: "x.wav", rateHz: 24_000, channels: 1, output: ["-c:a", "pcm_s24le"])
        #expect {
            _ = try ClipDecoder.decode(wav24, outputFormat: "pcm_24000", mimeType: nil, fileExtension: nil)
        } throws: { error in
            guard case .unsupported(let what) = error as? ClipDecodeError else { return false }
            return what.contains("24-bit")
        }
    }

    @Test func `an MP3 without ID3 labelled wav still plays`() throws {
        let dir = try CodecsTempDirectory()
        let mp3 = try ffmpegClip(dir, name: "t.mp3", rateHz: 44_100, channels: 1,
                                 output: ["-c:a", "libmp3lame", "-id3v2_version", "0", "-write_xing", "0"])
        #expect(mp3.first == 0xFF)
        let pcm = try ClipDecoder.decode(mp3, outputFormat: "wav", mimeType: nil, fileExtension: nil)
        #expect(pcm.format.sampleRateHz == 44_100)
        #expect(abs(pcm.durationMilliseconds - 1000) <= 80)
    }

    @Test(arguments: [UInt64(1), 2, 3, 42, 2026])
    func `random bytes labelled mp3, opus or wav end in an error (seed)`(_ seed: UInt64) {
        let bytes = CodecFixtures.randomBytes(8192, seed: seed)
        for (format, mime) in [("mp3_44100_128", "audio/mpeg"), ("opus", "audio/ogg"), ("wav", "audio/wav"), ("pcm_fast", nil)] {
            #expect(throws: ClipDecodeError.self, "seed \(seed), \(format)") {
                _ = try ClipDecoder.decode(bytes, outputFormat: format, mimeType: mime, fileExtension: nil)
            }
        }
        #expect(throws: ClipDecodeError.self, "seed \(seed), unlabelled") {
            _ = try ClipDecoder.decode(bytes, outputFormat: nil, mimeType: nil, fileExtension: nil)
        }
    }

    @Test func `random bytes behind a real magic number end in an error`() {
        let tail = CodecFixtures.randomBytes(4096, seed: 7)
        for (magic, label) in [("OggS", "opus"), ("ID3", "mp3"), ("RIFF\u{0}\u{0}\u{0}\u{0}WAVE", "wav")] {
            #expect(throws: ClipDecodeError.self, "\(label)") {
                _ = try ClipDecoder.decode(Array(magic.utf8) + tail, outputFormat: label, mimeType: nil, fileExtension: nil)
            }
        }
    }

    @Test func `truncated mp3 and ogg clips decode what is there or fail cleanly`() throws {
        let dir = try CodecsTempDirectory()
        let mp3 = try ffmpegClip(dir, name: "t.mp3", rateHz: 44_100, channels: 1, output: ["-c:a", "libmp3lame"])
        let ogg = try ffmpegClip(dir, name: "t.opus", rateHz: 48_000, channels: 1, output: ["-c:a", "libopus"])
        for (bytes, format) in [(mp3, "mp3"), (ogg, "opus")] {
            for fraction in [0.02, 0.1, 0.33, 0.5, 0.77, 0.99] {
                let cut = Array(bytes.prefix(max(1, Int(Double(bytes.count) * fraction))))
                do {
                    let pcm = try ClipDecoder.decode(cut, outputFormat: format, mimeType: nil, fileExtension: nil)
                    #expect(pcm.durationMilliseconds <= 1100, "\(format) cut at \(fraction)")
                    print("truncated \(format) at \(fraction): \(pcm.durationMilliseconds) ms")
                } catch {
                    #expect(!error.description.isEmpty)
                    print("truncated \(format) at \(fraction): \(error)")
                }
            }
        }
    }

    @Test func `a streamed ogg cut part way decodes up to the cut`() throws {
        let writer = try OggOpusStreamWriter()
        let file = try writer.append(CodecFixtures.tone(hz: 440, milliseconds: 2000, rateHz: 16_000).samples) + writer.finish()
        // Pages are ~100 ms, so each cut loses at most the page it lands in, and longer cuts
        // keep more. (Bytes are not proportional to time: the headers come first.)
        var previous = 0.0
        for fraction in [0.3, 0.5, 0.8] {
            let cut = Array(file.prefix(Int(Double(file.count) * fraction)))
            let pcm = try ClipDecoder.decode(cut, outputFormat: "opus", mimeType: nil, fileExtension: nil)
            #expect(pcm.durationMilliseconds > previous + 200 && pcm.durationMilliseconds < 2000,
                    "cut at \(fraction): \(pcm.durationMilliseconds) ms")
            previous = pcm.durationMilliseconds
        }
    }

    @Test func `an ogg whose last page has a bad timestamp is read front to back instead`() throws {
        let writer = try OggOpusStreamWriter()
        let file = try writer.append(CodecFixtures.tone(hz: 440, milliseconds: 2000, rateHz: 16_000).samples) + writer.finish()
        // opusfile's seekable open rejects a last granule smaller than the ones before it.
        let broken = try CodecFixtures.withLastGranule(5, in: file)
        let pcm = try ClipDecoder.decode(broken, outputFormat: "opus", mimeType: "audio/ogg", fileExtension: nil)
        #expect(abs(pcm.durationMilliseconds - 2000) < 60, "\(pcm.durationMilliseconds) ms")
    }

    @Test func `every error is one line that says what was wrong`() {
        let errors: [ClipDecodeError] = [.empty, .headerless(label: "outputFormat pcm"), .unsupported("WAV with 24-bit PCM"),
                                         .corrupt(call: "mpg123_read", reason: "no MPEG audio frames found")]
        for error in errors {
            #expect(!error.description.contains("\n"))
            #expect(error.description.count > 10)
        }
    }
}

@Suite struct WAVFileTests {
    @Test func `encode then decode gives back the same samples and format`() throws {
        let pcm = CodecFixtures.tone(hz: 1000, milliseconds: 250, rateHz: 22_050, channels: 2)
        let bytes = WAVFile.encode(pcm)
        #expect(bytes.count == 44 + pcm.samples.count * 2)
        #expect(try WAVFile.decode(bytes) == pcm)
    }

    @Test func `sox reads what encode writes`() throws {
        let dir = try CodecsTempDirectory()
        let file = try dir.write(WAVFile.encode(CodecFixtures.tone(hz: 440, milliseconds: 500, rateHz: 16_000)), to: "ours.wav")
        let info = try CodecFixtures.runTool("sox", ["--i", file])
        #expect(info.contains("Sample Rate    : 16000"), "\(info)")
        #expect(info.contains("00:00:00.50"), "\(info)")
    }

    @Test(arguments: [
        (["-c:a", "pcm_s24le"], "24-bit"), (["-c:a", "pcm_f32le"], "float"), (["-c:a", "pcm_mulaw"], "µ-law"),
    ])
    func `WAVs that are not 16-bit PCM are refused as unsupported`(_ codec: [String], _ word: String) throws {
        let dir = try CodecsTempDirectory()
        let bytes = try ffmpegClip(dir, name: "x.wav", rateHz: 16_000, channels: 1, output: codec)
        #expect {
            _ = try WAVFile.decode(bytes)
        } throws: { error in
            guard case .unsupported(let what) = error as? ClipDecodeError else { return false }
            return what.contains(word)
        }
    }

    @Test func `a three channel WAV is refused as unsupported`() throws {
        let dir = try CodecsTempDirectory()
        let bytes = try ffmpegClip(dir, name: "x.wav", rateHz: 16_000, channels: 3, output: ["-c:a", "pcm_s16le"])
        #expect {
            _ = try WAVFile.decode(bytes)
        } throws: { error in
            guard case .unsupported(let what) = error as? ClipDecodeError else { return false }
            return what.contains("3 channels")
        }
    }

    @Test func `a streamed WAV with unset sizes and a truncated WAV keep the samples that are there`() throws {
        var bytes = WAVFile.encode(CodecFixtures.tone(hz: 440, milliseconds: 100, rateHz: 8_000))
        for i in 40..<44 { bytes[i] = 0xFF }
        #expect(try WAVFile.decode(bytes).frameCount == 800)
        let cut = Array(WAVFile.encode(CodecFixtures.tone(hz: 440, milliseconds: 100, rateHz: 8_000)).prefix(44 + 401))
        #expect(try WAVFile.decode(cut).frameCount == 200)
    }

    @Test func `headers that are cut short or lack chunks are corrupt`() {
        let full = WAVFile.encode(CodecFixtures.tone(hz: 440, milliseconds: 10, rateHz: 8_000))
        for length in [4, 12, 20, 30, 36] {
            #expect(throws: ClipDecodeError.self, "length \(length)") { _ = try WAVFile.decode(Array(full.prefix(length))) }
        }
    }
}
