// Test fixtures: files under Fixtures/ (written by models/training) and the shipped models.

import Audio
import ClawvoiceCore
import Foundation
import WakeWord

enum Fixtures {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures").path
    /// The repository's models/ directory, where the shipped wake models live.
    static let modelsDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("models").path

    static func data(_ name: String) throws -> Data {
        try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name))
    }

    static func json(_ name: String) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: try data(name)) as! [String: Any]
    }

    static func wav(_ name: String) throws -> PCMBuffer {
        try WAVFile.decode([UInt8](try data(name)))
    }

    /// Golden inference fixtures present (one per trained model).
    static func goldenNames() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
            .filter { $0.hasPrefix("golden-") && $0.hasSuffix(".json") }.sorted()
    }

    /// A model from models/, or nil when it has not been trained.
    static func model(_ stem: String) -> WakeModel? {
        try? WakeModel.load(manifestPath: modelsDirectory + "/" + stem + ".json")
    }

    /// espeak-ng speech at 16 kHz mono.
    static func speak(_ text: String, voice: String = "en-us", rateWpm: Int = 175) throws -> [Int16] {
        let pcm = try SpeechSynthesizer.synthesize(text, settings: VoiceSettings(voice: voice, rateWpm: rateWpm))
        return try Resampler.convert(pcm, toRateHz: 16_000).samples
    }

    /// Last sample index of speech in a clean clip: the end of the last 10 ms block within 35 dB
    /// of the loudest (the rule models/training/speech.py labels triggers with).
    static func speechEnd(_ clip: [Int16]) -> Int {
        let n = clip.count / 160
        var rms = [Double](repeating: 0, count: n)
        for b in 0..<n {
            var acc = 0.0
            for i in 0..<160 { let v = Double(clip[b * 160 + i]); acc += v * v }
            rms[b] = (acc / 160 + 1e-9).squareRoot()
        }
        let peak = rms.max() ?? 1
        let last = rms.lastIndex { 20 * log10($0 / peak) > -35 } ?? (n - 1)
        return (last + 1) * 160
    }
}
