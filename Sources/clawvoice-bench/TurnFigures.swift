// The end-of-turn detector (issue 25) in the bench:
// `--turn-features LIST`: for each 16 kHz mono WAV named in LIST (one path a line), the features of
//   every frame in a pause after speech, as the Endpointer computes them: one JSON line per file
//   (models/training/turn_train.py reads them; one implementation of the features, this one).
// `endpointTurnRows`: the detector's rows of `--endpoint` and of `--json` (held-out voices only),
//   beside the windows, and continuous speech in noise (long turns that must be held open).

import Audio
import Foundation
import GatewayProtocol
import Talk
import WakeWord

func turnFeatures(list: String) throws {
    let detector = try loadVoiceDetector()
    guard let text = try? String(contentsOfFile: list, encoding: .utf8) else { throw BenchError("cannot read \(list)") }
    for path in text.split(separator: "\n").map(String.init) where !path.isEmpty {
        guard let data = FileManager.default.contents(atPath: path) else { throw BenchError("cannot read \(path)") }
        let pcm = try WAVFile.decode([UInt8](data))
        guard pcm.format == .voice else { throw BenchError("\(path) is \(pcm.format), not 16 kHz mono") }
        let clip = BenchClip(samples: pcm.samples, labels: [], lastWordEndMs: nil, noise: nil, snrDb: nil, voice: "")
        let probs = EndpointBench.probabilities(clip, detector: detector)
        let rows = EndpointBench.turnFeatures(pcm.samples, voice: probs, threshold: detector.threshold)
        let line: JSONValue = ["file": .string(path), "frames": .number(Double(pcm.samples.count / 320)),
                               "rows": .array(rows.map { .array([.number(Double($0.frame))] + $0.features.map { .number($0) }) })]
        print(try JSONCoding.string(line))
    }
}

/// Long turns said without stopping, in noise: five or six clauses with 150–800 ms pauses, at 10
/// and 5 dB: any decision before the last word is a turn cut short; none within 3 s, held open.
func continuousClips(count: Int, seed: UInt64, voices: [BenchVoice]) throws -> [BenchClip] {
    var rng = SplitMix64(seed: seed)
    let noises = BenchNoise.allCases
    return try (0..<count).map { i in
        let k = 5 + Int(rng.next() % 2)
        let cs = (0..<k).map { j in EndpointBench.clauses[Int(rng.next() % UInt64(EndpointBench.clauses.count))] + (j < k - 1 ? "," : ".") }
        let ps = (0..<(k - 1)).map { _ in 150 + 650 * Double(rng.next() >> 11) / Double(1 << 53) }
        let v = voices[i % voices.count]
        let parts = try cs.map { EndpointBench.trimmed(try v.say($0)) }
        return EndpointBench.clip(parts: parts, gapsMs: ps, leadMs: 800, tailMs: 3000, noise: noises[i % noises.count],
                                  snrDb: i % 2 == 0 ? 10 : 5, peakDbfs: -3 - 17 * Double(rng.next() >> 11) / Double(1 << 53),
                                  voice: v.description, rng: &rng)
    }
}

func loadTurnModel() -> TurnModel? { try? TurnModel.load(directory: WakeModelCatalog.defaultDirectory()) }
