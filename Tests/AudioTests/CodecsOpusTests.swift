// Tests for the Opus side of the codecs: raw packets from OpusVoiceEncoder, live Ogg pages
// from OggOpusStreamWriter, and whole voice notes, checked with opusdec and opusinfo.
import ClawvoiceCore
import Foundation
import Testing
@testable import Audio

@Suite struct OpusVoiceEncoderTests {
    @Test func `one second of tone at 16 kHz gives fifty packets near the set bitrate`() throws {
        let encoder = try OpusVoiceEncoder(sampleRateHz: 16_000, channels: 1, bitrate: 20_000, complexity: 5)
        #expect(encoder.samplesPerFrame == 320)
        let pcm = CodecFixtures.tone(hz: 440, milliseconds: 1000, rateHz: 16_000).samples
        var packets: [[UInt8]] = []
        for start in stride(from: 0, to: pcm.count, by: 320) {
            packets.append(try encoder.encode(pcm[start..<start + 320]))
        }
        #expect(packets.count == 50)
        let bytes = packets.reduce(0) { $0 + $1.count }
        // 20 kb/s for one second is 2500 bytes; VBR on a pure tone lands below or near it.
        #expect((1000...3500).contains(bytes), "total \(bytes) bytes")
        #expect(packets.allSatisfy { !OpusVoiceEncoder.isDiscontinuous($0) })
        print("opus 440 Hz 1 s at 20 kb/s: \(bytes) bytes in \(packets.count) packets")
    }

    @Test func `silence with DTX on yields packets of two bytes or fewer that are still returned`() throws {
        let encoder = try OpusVoiceEncoder(dtx: true)
        let silence = [Int16](repeating: 0, count: 320)
        var sizes: [Int] = []
        for _ in 0..<50 { sizes.append(try encoder.encode(silence).count) }
        #expect(sizes.count == 50)
        #expect(sizes.filter { $0 <= 2 }.count >= 20, "sizes \(sizes)")
    }

    @Test func `a sample rate libopus does not take is an error naming opus_encoder_create`() {
        #expect {
            _ = try OpusVoiceEncoder(sampleRateHz: 22_050)
        } throws: { error in
            let text = String(describing: error)
            return text.contains("opus_encoder_create") && text.contains("invalid argument")
        }
    }

    @Test func `a frame of the wrong length is refused`() throws {
        let encoder = try OpusVoiceEncoder()
        #expect(throws: AudioCodecError.self) { _ = try encoder.encode([Int16](repeating: 0, count: 319)) }
    }
}

@Suite struct OggOpusStreamWriterTests {
    /// Three seconds or so of espeak-ng speech at 16 kHz mono.
    static func speech16k(in dir: CodecsTempDirectory) throws -> PCMBuffer {
        let speech = try CodecFixtures.cliSpeech("The quick brown fox jumps over the lazy dog, and then it sleeps in the sun.", in: dir)
        return try Resampler.convert(speech, toRateHz: 16_000)
    }

    @Test func `pages streamed in 20 ms chunks concatenate to an Ogg Opus file that decodes to the input`() throws {
        let dir = try CodecsTempDirectory()
        let input = try Self.speech16k(in: dir)
        #expect(input.durationMilliseconds > 2500)

        let writer = try OggOpusStreamWriter(sampleRateHz: 16_000, channels: 1, bitrate: 24_000, complexity: 5,
                                             comments: ["TITLE": "clawvoice test"])
        var chunks: [[UInt8]] = []
        var chunksBeforeFinish = 0
        for start in stride(from: 0, to: input.samples.count, by: 320) {
            let chunk = try writer.append(Array(input.samples[start..<min(start + 320, input.samples.count)]))
            if !chunk.isEmpty { chunks.append(chunk); chunksBeforeFinish += 1 }
        }
        let last = try writer.finish()
        if !last.isEmpty { chunks.append(last) }
        #expect(throws: AudioCodecError.finished) { _ = try writer.append([0]) }

        // (b) every chunk is whole pages, starting with "OggS".
        for chunk in chunks {
            #expect(Array(chunk.prefix(4)) == Array("OggS".utf8))
            #expect(CodecFixtures.oggPageLengths(chunk) != nil, "chunk of \(chunk.count) bytes is not whole pages")
        }
        // (c) pages leave while audio is still going in: headers plus one per ~100 ms.
        let seconds = input.durationMilliseconds / 1000
        #expect(Double(chunksBeforeFinish) >= seconds * 5, "\(chunksBeforeFinish) chunks before finish for \(seconds) s")

        // (a) opusdec reads the concatenation; duration and waveform match the input.
        let file = try dir.write(chunks.flatMap { $0 }, to: "stream.opus")
        try CodecFixtures.runTool("opusdec", ["--quiet", "--rate", "16000", file, dir.file("stream.wav")])
        let decoded = try WAVFile.decode(try dir.read("stream.wav"))
        #expect(decoded.format == AudioFormat(sampleRateHz: 16_000, channels: 1))
        let drift = abs(decoded.durationMilliseconds - input.durationMilliseconds)
        #expect(drift <= 60, "decoded \(decoded.durationMilliseconds) ms vs input \(input.durationMilliseconds) ms")
        let correlation = CodecFixtures.bestCorrelation(input.samples, decoded.samples, maxLag: 1600)
        #expect(correlation.value > 0.8, "correlation \(correlation.value) at lag \(correlation.lag)")
        let pages = chunks.reduce(0) { $0 + (CodecFixtures.oggPageLengths($1)?.count ?? 0) }
        print("""
            ogg stream: \(chunks.count) chunks (\(chunksBeforeFinish) before finish), \(pages) pages, \
            \(chunks.reduce(0) { $0 + $1.count }) bytes for \(input.durationMilliseconds) ms; decoded \
            \(decoded.durationMilliseconds) ms; correlation \(correlation.value) at lag \(correlation.lag)
            """)
    }

    @Test func `the first append returns the two header pages`() throws {
        let writer = try OggOpusStreamWriter()
        let first = try writer.append([Int16](repeating: 0, count: 320))
        let lengths = try #require(CodecFixtures.oggPageLengths(first))
        #expect(lengths.count >= 2)
        #expect(String(decoding: first[28..<36], as: UTF8.self) == "OpusHead")
    }

    @Test func `finishing an empty stream still gives a file opusdec accepts`() throws {
        let dir = try CodecsTempDirectory()
        let writer = try OggOpusStreamWriter()
        let bytes = try writer.finish()
        #expect(CodecFixtures.oggPageLengths(bytes) != nil)
        let file = try dir.write(bytes, to: "empty.opus")
        try CodecFixtures.runTool("opusdec", ["--quiet", file, dir.file("empty.wav")])
    }

    @Test func `a sample count that does not divide by the channels is refused`() throws {
        let writer = try OggOpusStreamWriter(channels: 2)
        #expect(throws: AudioCodecError.self) { _ = try writer.append([1, 2, 3]) }
    }

    @Test func `a page delay outside 20 to 1000 ms is refused`() {
        #expect(throws: AudioCodecError.self) { _ = try OggOpusStreamWriter(maxPageDelayMilliseconds: 5) }
    }
}

@Suite struct OggOpusVoiceNoteTests {
    @Test func `a voice note decodes with opusdec and passes opusinfo`() throws {
        let dir = try CodecsTempDirectory()
        let speech = try CodecFixtures.cliSpeech("This is a voice note for the gateway.", in: dir)
        let bytes = try OggOpusVoiceNote.encode(speech, bitrate: 24_000, comments: ["TITLE": "note"])
        let file = try dir.write(bytes, to: "note.ogg")
        let info = try CodecFixtures.runTool("opusinfo", [file])
        #expect(info.contains("Opus"))
        #expect(!info.lowercased().contains("warning"), "\(info)")
        try CodecFixtures.runTool("opusdec", ["--quiet", "--rate", "48000", file, dir.file("note.wav")])
        let decoded = try WAVFile.decode(try dir.read("note.wav"))
        #expect(abs(decoded.durationMilliseconds - speech.durationMilliseconds) <= 60)
        // Our own clip decoder reads it too, at 48 kHz.
        let ours = try ClipDecoder.decode(bytes, outputFormat: nil, mimeType: OggOpusVoiceNote.mimeType, fileExtension: nil)
        #expect(ours.format.sampleRateHz == 48_000)
        #expect(abs(ours.durationMilliseconds - speech.durationMilliseconds) <= 60)
    }

    @Test func `stereo 44.1 kHz input makes a valid note`() throws {
        let dir = try CodecsTempDirectory()
        let bytes = try OggOpusVoiceNote.encode(CodecFixtures.tone(hz: 440, milliseconds: 500, rateHz: 44_100, channels: 2))
        let file = try dir.write(bytes, to: "stereo.ogg")
        let info = try CodecFixtures.runTool("opusinfo", [file])
        #expect(info.contains("Channels: 2"), "\(info)")
    }
}
