// Issue 25, idle cost: with the speaker silent the capture's echo cancellers have nothing to do.
// CaptureCleaner runs them only from the first frame the speaker plays until 1.5 s of silent
// reference (an echo's tail, and a trigger's length for the detectors' path), and the frames in
// between still come out noise-suppressed. Pure compute: no sound server.

import Audio
import ClawvoiceCore
import Foundation
import Testing
@testable import Talk

@Suite struct IdleCleanerTests {
    static func tone(_ k: Int, amplitude: Double = 3000) -> [Int16] {
        (0..<320).map { i -> Int16 in
            let phase: Double = Double(k * 320 + i) * 2 * Double.pi * 440 / 16_000
            return Int16(amplitude * sin(phase))
        }
    }

    @Test func `no canceller runs while the speaker is silent, and it runs again while it plays`() throws {
        let cleaner = try CaptureCleaner(reference: EchoReference(), delayMs: 60)
        let silence = [Int16](repeating: 0, count: 320)
        var hiss = SplitMix64(seed: 3)
        func mic() -> PCMBuffer { PCMBuffer(format: .voice, samples: (0..<320).map { _ in Int16(Int(hiss.next() % 201) - 100) }) }
        for _ in 0..<100 {
            let out = cleaner.clean(mic(), far: silence)
            #expect(out.uplink.samples.count == 320 && out.detector.samples == out.uplink.samples)
        }
        #expect(cleaner.cancelledFrames == 0, "the cancellers ran on \(cleaner.cancelledFrames) frames of a silent speaker")
        for k in 0..<25 { _ = cleaner.clean(PCMBuffer(format: .voice, samples: Self.tone(k, amplitude: 1500)), far: Self.tone(k)) }
        #expect(cleaner.cancelledFrames == 25)
        // After the speaker stops the detectors keep the linear path for a trigger's length (1.5 s,
        // 24,000 samples: a trigger begun over the reply is heard through one path), so the frames
        // until then (76: the silent reference before each reaches 0…24,000) still run them.
        for _ in 0..<100 { _ = cleaner.clean(mic(), far: silence) }
        #expect(cleaner.cancelledFrames == 25 + 76, "\(cleaner.cancelledFrames)")
    }

    @Test func `every frame runs the cancellers when the idle path is off, as before`() throws {
        let cleaner = try CaptureCleaner(reference: EchoReference(), delayMs: 60)
        cleaner.idleSkip = false
        for _ in 0..<20 { _ = cleaner.clean(PCMBuffer(format: .voice, samples: [Int16](repeating: 5, count: 320)), far: [Int16](repeating: 0, count: 320)) }
        #expect(cleaner.cancelledFrames == 20)
    }
}
