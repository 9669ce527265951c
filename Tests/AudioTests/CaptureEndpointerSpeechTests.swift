// Endpointer on real espeak-ng speech against −40 dBFS noise (moved from CaptureEndpointerTests
// when the endpointer went to ClawvoiceCore: this one runs espeak-ng and sox).

import Audio
import ClawvoiceCore
import ClawvoiceTesting
import Foundation
import Testing

@Suite struct CaptureEndpointerSpeechTests {
    /// Deterministic noise: a fixed-seed generator, so every run feeds the same samples.
    struct Noise {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        mutating func next() -> Double {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Double(state >> 11) / Double(1 << 53) * 2 - 1  // uniform in -1…1, RMS 1/√3
        }

        /// One 20 ms frame of white noise at `dbfs` RMS.
        mutating func frame(dbfs: Double) -> PCMBuffer {
            let rms = pow(10, dbfs / 20)
            let scale = rms * 3.0.squareRoot() * 32767
            return PCMBuffer(format: .voice, samples: (0..<320).map { _ in Int16(clamping: Int((next() * scale).rounded())) })
        }
    }

    /// Feeds `frames` and returns each event with the 1-based index of the frame that caused it.
    static func run(_ endpointer: inout Endpointer, _ frames: [PCMBuffer]) -> [(Int, EndpointEvent)] {
        var events: [(Int, EndpointEvent)] = []
        for (i, frame) in frames.enumerated() {
            if let event = endpointer.feed(frame) { events.append((i + 1, event)) }
        }
        return events
    }

    /// espeak-ng's default voice, resampled to 16 kHz mono s16le by sox, as 20 ms frames.
    static func espeak(_ text: String) throws -> [PCMBuffer] {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cvt-espeak-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let wav = dir.appendingPathComponent("speech.wav").path, raw = dir.appendingPathComponent("speech.raw").path
        let speak = try PulseTestServer.run("/usr/bin/espeak-ng", ["-w", wav, text])
        guard speak.status == 0 else { throw TestFailure("espeak-ng failed: \(speak.err)") }
        let convert = try PulseTestServer.run("/usr/bin/sox", [wav, "-r", "16000", "-c", "1", "-b", "16", "-e", "signed", "-t", "raw", raw])
        guard convert.status == 0 else { throw TestFailure("sox failed: \(convert.err)") }
        let bytes = try Data(contentsOf: URL(fileURLWithPath: raw))
        var chunker = PCMFrameChunker()
        return bytes.withUnsafeBytes { chunker.append(littleEndianBytes: $0) }
    }

    @Test func `espeak speech over -40 dBFS noise is an utterance that ends 900 ms after it`() throws {
        var noise = Noise()
        var endpointer = Endpointer()
        let speech = try Self.espeak("Hello computer, turn on the kitchen lights please.")
        #expect(speech.count > 50)
        // Speech and noise mixed, as a microphone in a quiet room would deliver it.
        let mixed = speech.map { frame in
            let hiss = noise.frame(dbfs: -40)
            return PCMBuffer(format: .voice, samples: zip(frame.samples, hiss.samples).map { Int16(clamping: Int($0) + Int($1)) })
        }
        let before = (0..<30).map { _ in noise.frame(dbfs: -40) }
        let after = (0..<100).map { _ in noise.frame(dbfs: -40) }
        let events = Self.run(&endpointer, before + mixed + after)
        #expect(events.map(\.1) == [.speechStarted, .endOfUtterance(reason: .silence)])
        let started = try #require(events.first?.0)
        #expect(started > 30 && started < 30 + 10, "speech starts within 200 ms of the first word")
        // espeak's own trailing quiet counts toward the timeout, so the end lands within the
        // last words plus 900 ms: after the speech began, and 45 frames after the last loud one.
        let ended = try #require(events.last?.0)
        let lastLoud = mixed.lastIndex { Endpointer.dbfs(rms: $0.rms) > endpointer.thresholdDbfs }! + 30 + 1
        #expect(ended == lastLoud + 45, "ended at \(ended), last loud frame \(lastLoud)")
        #expect(abs((endpointer.noiseFloorDbfs ?? 0) - -40) < 1.5)
    }
}
