// Tests for PCMFrameChunker: bytes arriving in pieces of any size, even split inside a sample,
// come out as exact 20 ms frames with every sample in place.

import Audio
import ClawvoiceCore
import Testing

@Suite struct CaptureFrameChunkerTests {
    static func bytes(count samples: Int) -> [UInt8] {
        PCMBuffer(format: .voice, samples: (0..<samples).map { Int16(truncatingIfNeeded: $0 * 37 - 20_000) }).bytes
    }

    @Test(arguments: [1, 3, 640, 641, 1000, 4096])
    func `pieces of any size become exact 320-sample frames`(piece: Int) {
        let input = Self.bytes(count: 320 * 7 + 100)
        var chunker = PCMFrameChunker()
        var frames: [PCMBuffer] = []
        var offset = 0
        while offset < input.count {
            let end = min(offset + piece, input.count)
            frames += input[offset..<end].withUnsafeBytes { chunker.append(littleEndianBytes: $0) }
            offset = end
        }
        #expect(frames.count == 7)
        #expect(frames.allSatisfy { $0.samples.count == 320 && $0.format == .voice })
        #expect(frames.flatMap(\.bytes) == Array(input.prefix(320 * 7 * 2)))
        #expect(chunker.pendingSamples == 100)
    }

    @Test func `reset drops a partial frame`() {
        var chunker = PCMFrameChunker()
        _ = chunker.append(samples: [Int16](repeating: 5, count: 300))
        chunker.reset()
        let frames = chunker.append(samples: [Int16](repeating: 7, count: 320))
        #expect(frames.count == 1 && frames[0].samples.allSatisfy { $0 == 7 })
    }

    @Test func `other formats and frame lengths work too`() {
        var chunker = PCMFrameChunker(format: AudioFormat(sampleRateHz: 48_000, channels: 2), frameMilliseconds: 10)
        let frames = chunker.append(samples: [Int16](repeating: 1, count: 480 * 2 * 3))
        #expect(frames.count == 3 && frames.allSatisfy { $0.frameCount == 480 })
    }
}
