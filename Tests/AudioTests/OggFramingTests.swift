// Issue 27, item 7: the uplink's Ogg pages come from libogg. Ogg can only mark the end of a
// stream on a page that carries a packet, so a stream that ends on a page boundary (or holds no
// audio at all) ends with one frame of silence that the end granule trims: these check that the
// decoded length is still exactly the input's, through opusdec and through opusfile.

import Audio
import ClawvoiceCore
import Foundation
import Testing

@Suite struct OggFramingTests {
    /// The granule position of each page (bytes 6…13, little-endian).
    static func granules(_ bytes: [UInt8]) -> [Int64] {
        var out: [Int64] = []
        var offset = 0
        for len in CodecFixtures.oggPageLengths(bytes) ?? [] {
            out.append((0..<8).reduce(Int64(0)) { $0 | Int64(bytes[offset + 6 + $1]) << (8 * Int64($1)) })
            offset += len
        }
        return out
    }

    @Test func `a stream that ends on a page boundary decodes to exactly its input`() throws {
        let dir = try CodecsTempDirectory()
        let writer = try OggOpusPacketWriter(sampleRateHz: 16_000, channels: 1, pageMilliseconds: 100, serial: 7)
        let tone = (0..<1600).map { Int16(6000 * sin(Double($0) * 0.2)) }
        let pages = try writer.append(tone)
        #expect(CodecFixtures.oggPageLengths(pages)?.count == 3, "headers and one page of five frames")
        let end = try writer.finish()
        let file = pages + end
        let g = Self.granules(file)
        #expect(g.count == 4 && g[2] == 4800, "\(g)")
        // The end page's granule is pre-skip plus the input (1600 samples at 16 kHz = 4800 at 48 kHz).
        #expect(g.last.map { $0 - 4800 } ?? 0 > 0 && g.last! - 4800 < 960, "\(g)")
        let viaOpusfile = try ClipDecoder.decode(file, outputFormat: "opus", mimeType: nil, fileExtension: nil)
        #expect(viaOpusfile.durationMilliseconds == 100, "\(viaOpusfile.durationMilliseconds) ms")
        let path = try dir.write(file, to: "boundary.opus")
        _ = try CodecFixtures.runTool("opusdec", ["--quiet", "--rate", "16000", path, dir.file("boundary.wav")])
        #expect(try WAVFile.decode(try dir.read("boundary.wav")).samples.count == 1600)
    }

    @Test func `an empty stream decodes to no audio`() throws {
        let dir = try CodecsTempDirectory()
        let file = try OggOpusPacketWriter(serial: 9).finish()
        let path = try dir.write(file, to: "empty.opus")
        _ = try CodecFixtures.runTool("opusdec", ["--quiet", "--rate", "16000", path, dir.file("empty.wav")])
        #expect(try WAVFile.decode(try dir.read("empty.wav")).samples.isEmpty)
    }
}
