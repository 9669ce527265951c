// Helpers for the codec tests: temp directories, external tools (opusdec, ffmpeg, sox,
// espeak-ng) run as subprocesses, test signals, an Ogg page walker and signal measures.
import ClawvoiceCore
import Foundation
import Testing
@testable import Audio

/// A fresh directory under the system temp dir, removed when the test ends.
final class CodecsTempDirectory {
    let path: String

    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("clawvoice-codecs-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    func file(_ name: String) -> String { (path as NSString).appendingPathComponent(name) }

    func write(_ bytes: [UInt8], to name: String) throws -> String {
        let target = file(name)
        try Data(bytes).write(to: URL(fileURLWithPath: target))
        return target
    }

    func read(_ name: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: URL(fileURLWithPath: file(name))))
    }
}

/// Signals, tools and measures shared by the codec tests (namespaced so other AudioTests
/// files can keep their own helpers).
enum CodecFixtures {
    struct ToolFailure: Error, CustomStringConvertible {
        let command: String
        let status: Int32
        let stderr: String
        var description: String { "\(command) exited \(status): \(stderr)" }
    }

    /// Runs `/usr/bin/<tool>` and returns stdout; throws with stderr when it exits non-zero.
    @discardableResult
    static func runTool(_ tool: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/\(tool)")
        process.arguments = arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        // Read both pipes before waiting, so a chatty tool cannot fill one and stall.
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        let errData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw ToolFailure(command: ([tool] + arguments).joined(separator: " "), status: process.terminationStatus,
                              stderr: String(decoding: errData, as: UTF8.self))
        }
        return String(decoding: outData, as: UTF8.self)
    }

    /// A sine tone, interleaved over `channels`.
    static func tone(hz: Double, milliseconds: Int, rateHz: Int, channels: Int = 1, amplitude: Double = 0.5) -> PCMBuffer {
        let frames = rateHz * milliseconds / 1000
        var samples = [Int16](repeating: 0, count: frames * channels)
        for i in 0..<frames {
            let v = Int16(amplitude * 32767 * sin(2 * Double.pi * hz * Double(i) / Double(rateHz)))
            for c in 0..<channels { samples[i * channels + c] = v }
        }
        return PCMBuffer(format: AudioFormat(sampleRateHz: rateHz, channels: channels), samples: samples)
    }

    /// Speech from the espeak-ng command line (independent of SpeechSynthesizer), as PCM.
    static func cliSpeech(_ text: String, in dir: CodecsTempDirectory) throws -> PCMBuffer {
        let wav = dir.file("speech-\(UUID().uuidString).wav")
        try runTool("espeak-ng", ["-w", wav, text])
        return try WAVFile.decode(try dir.read((wav as NSString).lastPathComponent))
    }

    /// Splits `bytes` into Ogg pages; nil unless it is a whole number of well-formed pages.
    static func oggPageLengths(_ bytes: [UInt8]) -> [Int]? {
        var lengths: [Int] = []
        var offset = 0
        while offset < bytes.count {
            // 27-byte header: "OggS", version, flags, granule (8), serial (4), sequence (4),
            // CRC (4), segment count; then the segment table, then the body.
            guard offset + 27 <= bytes.count, Array(bytes[offset..<offset + 4]) == Array("OggS".utf8) else { return nil }
            let segments = Int(bytes[offset + 26])
            guard offset + 27 + segments <= bytes.count else { return nil }
            let body = bytes[(offset + 27)..<(offset + 27 + segments)].reduce(0) { $0 + Int($1) }
            let length = 27 + segments + body
            guard offset + length <= bytes.count else { return nil }
            lengths.append(length)
            offset += length
        }
        return lengths
    }

    /// Largest normalised cross-correlation of `a` and `b` over lags within ±`maxLag` samples.
    static func bestCorrelation(_ a: [Int16], _ b: [Int16], maxLag: Int) -> (value: Double, lag: Int) {
        let x = a.map(Double.init), y = b.map(Double.init)
        var best = (value: -1.0, lag: 0)
        for lag in -maxLag...maxLag {
            var dot = 0.0, ex = 0.0, ey = 0.0
            let start = max(0, -lag), end = min(x.count, y.count - lag)
            guard end > start else { continue }
            for i in start..<end {
                let u = x[i], v = y[i + lag]
                dot += u * v; ex += u * u; ey += v * v
            }
            let value = dot / max((ex * ey).squareRoot(), 1)
            if value > best.value { best = (value, lag) }
        }
        return best
    }

    /// Sign changes in `samples` (twice the frequency times the duration for a clean tone).
    static func zeroCrossings(_ samples: [Int16]) -> Int {
        var count = 0
        for i in 1..<samples.count where (samples[i - 1] < 0) != (samples[i] < 0) { count += 1 }
        return count
    }

    static func randomBytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var rng = SplitMix64(seed: seed)  // the seed is in the test name
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
    }

    /// The Ogg page checksum (CRC-32, polynomial 0x04C11DB7, no reflection, initial value 0).
    static func oggCRC(_ page: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0
        for byte in page {
            crc ^= UInt32(byte) << 24
            for _ in 0..<8 { crc = crc & 0x8000_0000 != 0 ? (crc << 1) ^ 0x04C1_1DB7 : crc << 1 }
        }
        return crc
    }

    /// `file` with the granule position of its last page replaced and the page checksum redone.
    static func withLastGranule(_ granule: UInt64, in file: [UInt8]) throws -> [UInt8] {
        let lengths = try #require(oggPageLengths(file))
        let start = file.count - lengths.last!
        var out = file
        for i in 0..<8 { out[start + 6 + i] = UInt8((granule >> (8 * UInt64(i))) & 0xFF) }
        for i in 0..<4 { out[start + 22 + i] = 0 }
        let crc = oggCRC(Array(out[start...]))
        for i in 0..<4 { out[start + 22 + i] = UInt8((crc >> (8 * UInt32(i))) & 0xFF) }
        return out
    }
}
