// PCM values: a format that travels with every buffer, and durations derived from bytes.

/// Sample layout of a PCM buffer. clawvoice uses signed 16-bit little-endian throughout.
public struct AudioFormat: Sendable, Hashable, CustomStringConvertible {
    public var sampleRateHz: Int
    public var channels: Int

    public init(sampleRateHz: Int, channels: Int) {
        self.sampleRateHz = sampleRateHz
        self.channels = channels
    }

    /// The capture format: 16 kHz mono.
    public static let voice = AudioFormat(sampleRateHz: 16_000, channels: 1)

    public var bytesPerFrame: Int { 2 * channels }
    public var description: String { "s16le \(channels)ch \(sampleRateHz) Hz" }

    /// Samples per channel in `milliseconds`.
    public func frames(milliseconds: Int) -> Int { sampleRateHz * milliseconds / 1000 }
}

/// Interleaved signed 16-bit samples with their format.
public struct PCMBuffer: Sendable, Equatable {
    public var format: AudioFormat
    public var samples: [Int16]

    public init(format: AudioFormat, samples: [Int16] = []) {
        self.format = format
        self.samples = samples
    }

    /// Frames (samples per channel).
    public var frameCount: Int { samples.count / max(format.channels, 1) }
    public var durationMilliseconds: Double { Double(frameCount) * 1000 / Double(format.sampleRateHz) }
    public var isEmpty: Bool { samples.isEmpty }

    /// Little-endian bytes, as PulseAudio and raw `pcm_<rate>` clips carry them.
    public var bytes: [UInt8] {
        var out = [UInt8](repeating: 0, count: samples.count * 2)
        for (i, s) in samples.enumerated() {
            let u = UInt16(bitPattern: s)
            out[2 * i] = UInt8(u & 0xff)
            out[2 * i + 1] = UInt8(u >> 8)
        }
        return out
    }

    public init(format: AudioFormat, littleEndianBytes bytes: some Collection<UInt8>) {
        let b = Array(bytes)
        var s = [Int16](repeating: 0, count: b.count / 2)
        for i in 0..<s.count { s[i] = Int16(bitPattern: UInt16(b[2 * i]) | UInt16(b[2 * i + 1]) << 8) }
        self.init(format: format, samples: s)
    }

    /// Down-mixes to mono by averaging channels.
    public func mono() -> PCMBuffer {
        guard format.channels > 1 else { return self }
        let c = format.channels
        var out = [Int16](repeating: 0, count: frameCount)
        for f in 0..<frameCount {
            var sum = 0
            for ch in 0..<c { sum += Int(samples[f * c + ch]) }
            out[f] = Int16(sum / c)
        }
        return PCMBuffer(format: AudioFormat(sampleRateHz: format.sampleRateHz, channels: 1), samples: out)
    }

    /// Root-mean-square level in 0…1 (full scale = 1).
    public var rms: Double {
        guard !samples.isEmpty else { return 0 }
        var acc = 0.0
        for s in samples { let v = Double(s) / 32768; acc += v * v }
        return (acc / Double(samples.count)).squareRoot()
    }
}
