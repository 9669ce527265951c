// The uplink's own Ogg muxer: whole pages per call, valid checksums, and a concatenation that
// opusdec decodes to the input's length and waveform.

import Audio
import ClawvoiceCore
import Foundation
import Testing

@Suite struct OggOpusPacketWriterTests {
    @Test func `the pages of a live stream concatenate to a file opusdec plays at the input's length`() throws {
        let dir = try CodecsTempDirectory()
        let speech = try Resampler.convert(try CodecFixtures.cliSpeech("Streaming the microphone to the gateway as Ogg Opus pages.", in: dir).mono(), toRateHz: 16_000)
        let writer = try OggOpusPacketWriter(sampleRateHz: 16_000, channels: 1, bitrate: 20_000, complexity: 5, pageMilliseconds: 100)
        var chunks: [[UInt8]] = []
        var i = 0
        while i < speech.samples.count {
            chunks.append(try writer.append(Array(speech.samples[i..<min(i + 320, speech.samples.count)])))
            i += 320
        }
        chunks.append(try writer.finish())
        let nonEmpty = chunks.filter { !$0.isEmpty }
        #expect(nonEmpty.count >= Int(speech.durationMilliseconds / 100) - 1, "a page about every 100 ms while appending")
        for c in nonEmpty {
            let lengths = try #require(CodecFixtures.oggPageLengths(c), "every chunk is whole pages")
            var offset = 0
            for len in lengths {
                var page = Array(c[offset..<offset + len])
                let stored = UInt32(page[22]) | UInt32(page[23]) << 8 | UInt32(page[24]) << 16 | UInt32(page[25]) << 24
                page[22] = 0; page[23] = 0; page[24] = 0; page[25] = 0
                #expect(CodecFixtures.oggCRC(page) == stored, "page checksum")
                offset += len
            }
        }
        let file = try dir.write(chunks.flatMap { $0 }, to: "live.opus")
        _ = try CodecFixtures.runTool("opusdec", ["--quiet", "--rate", "16000", file, dir.file("live.wav")])
        let decoded = try WAVFile.decode(try dir.read("live.wav"))
        #expect(abs(decoded.durationMilliseconds - speech.durationMilliseconds) <= 60,
                "decoded \(decoded.durationMilliseconds) ms of \(speech.durationMilliseconds) ms")
        let (corr, _) = CodecFixtures.bestCorrelation(speech.samples, decoded.samples, maxLag: 1600)
        #expect(corr > 0.8, "correlation \(corr)")
        // Our own clip decoder (opusfile) reads it too, as the loopback relay does.
        let viaOpusfile = try ClipDecoder.decode(chunks.flatMap { $0 }, outputFormat: "opus", mimeType: nil, fileExtension: nil)
        #expect(abs(viaOpusfile.durationMilliseconds - speech.durationMilliseconds) <= 60)
    }

    @Test func `an empty stream still finishes as a valid file and a finished writer refuses more`() throws {
        let writer = try OggOpusPacketWriter()
        let bytes = try writer.finish()
        #expect(CodecFixtures.oggPageLengths(bytes)?.count == 3)
        #expect(throws: AudioCodecError.finished) { _ = try writer.append([0, 0]) }
    }

    @Test func `voice notes of empty and one-sample captures do not crash libopusenc`() throws {
        for n in [0, 1, 319, 321] {
            let note = try OggOpusVoiceNote.encode(PCMBuffer(format: .voice, samples: [Int16](repeating: 100, count: n)))
            #expect(CodecFixtures.oggPageLengths(note) != nil, "\(n) samples")
        }
        let writer = try OggOpusStreamWriter()
        #expect(try writer.append([]) == [], "pages are not asked for before the first sample")
        #expect(try writer.finish().count > 0)
    }
}
