// PCMFrameChunker: turns PCM arriving in pieces of any size into frames of exactly one length.
// Pure value; PulseCapture feeds it whatever libpulse hands over and sends out 20 ms frames.

public import ClawvoiceCore

/// Re-chunks a byte stream of s16le samples into fixed-length `PCMBuffer` frames.
public struct PCMFrameChunker: Sendable {
    public let format: AudioFormat
    /// Frames (samples per channel) in each output buffer: 320 for 20 ms at 16 kHz.
    public let framesPerChunk: Int

    private var pending: [Int16] = []
    private var oddByte: UInt8?

    public init(format: AudioFormat = .voice, frameMilliseconds: Int = 20) {
        self.format = format
        self.framesPerChunk = max(1, format.frames(milliseconds: frameMilliseconds))
    }

    /// Samples held back until a whole frame is there.
    public var pendingSamples: Int { pending.count }

    /// Appends little-endian bytes (any length, even split inside a sample) and returns the whole
    /// frames now complete.
    public mutating func append(littleEndianBytes bytes: UnsafeRawBufferPointer) -> [PCMBuffer] {
        var index = 0
        pending.reserveCapacity(pending.count + bytes.count / 2 + 1)
        if let low = oddByte, bytes.count > 0 {
            pending.append(Int16(bitPattern: UInt16(low) | UInt16(bytes[0]) << 8))
            oddByte = nil
            index = 1
        }
        while index + 1 < bytes.count {
            pending.append(Int16(bitPattern: UInt16(bytes[index]) | UInt16(bytes[index + 1]) << 8))
            index += 2
        }
        if index < bytes.count { oddByte = bytes[index] }
        return takeFrames()
    }

    /// Appends samples and returns the whole frames now complete.
    public mutating func append(samples: [Int16]) -> [PCMBuffer] {
        pending.append(contentsOf: samples)
        return takeFrames()
    }

    /// Forgets a partial frame, e.g. across a gap where the audio before and after do not join.
    public mutating func reset() {
        pending.removeAll(keepingCapacity: true)
        oddByte = nil
    }

    private mutating func takeFrames() -> [PCMBuffer] {
        let samplesPerChunk = framesPerChunk * format.channels
        guard pending.count >= samplesPerChunk else { return [] }
        var frames: [PCMBuffer] = []
        var start = 0
        while pending.count - start >= samplesPerChunk {
            frames.append(PCMBuffer(format: format, samples: Array(pending[start..<start + samplesPerChunk])))
            start += samplesPerChunk
        }
        pending.removeFirst(start)
        return frames
    }
}
