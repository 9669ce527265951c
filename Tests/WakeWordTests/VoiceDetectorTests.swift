// The shipped voice detector (models/voice.json): it loads, and the Swift arithmetic gives the
// probabilities models/training/voice_train.py computed for its golden signal.

import Foundation
import Testing
@testable import WakeWord

@Suite struct VoiceDetectorTests {
    /// voice_train.golden_signal: a gliding, amplitude-modulated tone over LCG pseudo-noise.
    static func goldenSignal() -> [Int16] {
        var state: UInt64 = 12345
        return (0..<32_000).map { i in
            let t = Double(i) / 16_000
            let tone = 6000 * sin(2 * .pi * (150 * t + 200 * t * t)) * (0.5 + 0.5 * sin(2 * .pi * 4 * t))
            state = (state &* 1_103_515_245 &+ 12345) % (1 << 31)
            let noise = (Double(state) / Double(1 << 31) - 0.5) * 2000
            return Int16(clamping: Int((tone + noise).rounded()))
        }
    }

    @Test func matchesTheTrainingScriptOnItsGoldenSignal() throws {
        let model = try VoiceDetectorModel.load(directory: Fixtures.modelsDirectory)
        let golden = try #require(model.manifest.golden).probabilities
        let d = VoiceDetector(model: model)
        let x = Self.goldenSignal()
        var worst = 0.0
        for j in 0..<golden.count {
            let p = d.probability(Array(x[j * 320..<(j + 1) * 320]))
            worst = max(worst, abs(p - golden[j]))
        }
        #expect(golden.count == 100)
        #expect(worst < 2e-3, "largest difference from voice_train.py: \(worst)")
    }

    @Test func namesOnlyTrainingEngines() throws {
        let model = try VoiceDetectorModel.load(directory: Fixtures.modelsDirectory)
        let allowed: Set<String> = ["espeak-ng", "piper-joe", "pico-en-US", "pico-en-GB", "alsa-utils recordings"]
        #expect(!model.manifest.trainingEngines.isEmpty)
        #expect(Set(model.manifest.trainingEngines).isSubset(of: allowed), "\(model.manifest.trainingEngines)")
        #expect(model.manifest.threshold > 0 && model.manifest.threshold < 1)
    }

    @Test func aMissingOrDamagedModelIsAClearError() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("vd-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(throws: WakeWordError.self) { try VoiceDetectorModel.load(directory: dir) }
        for f in ["voice.json", "frontend.json", "frontend.bin"] {
            try FileManager.default.copyItem(atPath: Fixtures.modelsDirectory + "/" + f, toPath: dir + "/" + f)
        }
        try Data(count: 100).write(to: URL(fileURLWithPath: dir + "/voice.bin"))
        do {
            _ = try VoiceDetectorModel.load(directory: dir)
            Issue.record("a truncated voice.bin loaded")
        } catch {
            #expect("\(error)".contains("damaged"), "\(error)")
        }
    }
}
