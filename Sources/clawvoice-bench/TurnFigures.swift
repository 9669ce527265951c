// The end-of-turn detector (issue 25) in the bench:
// `--turn-features LIST`: for each 16 kHz mono WAV named in LIST (one path a line), the features of
//   every frame in a pause after speech, as the Endpointer computes them: one JSON line per file
//   (models/training/turn_train.py reads them; one implementation of the features, this one).
// `endpointTurnRows`: the detector's rows of `--endpoint` and of `--json` (held-out voices only),
//   beside the windows, and continuous speech in noise (long turns that must be held open).

import Audio
import ClawvoiceCore
import ClawvoiceTesting
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

private func row(_ name: String, _ set: String, _ r: EndpointBench.WindowResult) -> String {
    "| \(name) | \(r.windowMs) ms | \(set) | \(pct(r.earlyCutShare)) (\(r.earlyCuts)/\(r.trials)) | \(pct(r.heldOpenShare)) | \(String(format: "%.0f", r.latencyPercentile(0.5))) ms | \(String(format: "%.0f", r.latencyPercentile(0.9))) ms |"
}

/// The end-of-turn rows of `--endpoint`: the held-out sentences said whole (flite's own phrasing at
/// the commas, pauses stretched to 150–600 ms) and the same sentences' clauses said one by one
/// (flite says "x," and "x." alike, so there nothing tells a pause from the end), the windows
/// alone and the detector under each; continuous speech in noise. Figures: `endpoint_turn_*` on
/// the whole sentences (the detector's goal), `endpoint_turn_clauses_*` on the clauses.
func endpointTurnRows(clips: [BenchClip], probs: [[Double]], detector: VoiceDetector, windows: [Int],
                      conditions: [(BenchNoise?, Double?)], sentences: Int, print: (String) -> Void) throws -> [Figure] {
    var out: [Figure] = []
    let th = detector.threshold
    let whole = try EndpointBench.endpointClips(sentences: sentences, seed: 2026, conditions: conditions, whole: true)
    let wholeProbs = whole.map { EndpointBench.probabilities($0, detector: detector) }
    let held = clips.indices.filter { clips[$0].voice.hasPrefix("flite") }
    let hClips = held.map { clips[$0] }, hProbs = held.map { probs[$0] }
    let wholeWin = EndpointBench.evaluate(whole, voice: wholeProbs, threshold: th, windowsMs: windows)
    let clauseWin = EndpointBench.evaluate(hClips, voice: hProbs, threshold: th, windowsMs: windows)
    let turn = loadTurnModel()
    let header = turn.map { "The end-of-turn detector (models/turn.json; threshold \(String(format: "%.2f", $0.threshold)), at least \(Int($0.minimumSilenceMs)) ms of pause) with each window as its ceiling, beside the windows alone" }
        ?? "No models/turn.json (make turn-model): the windows alone"
    print("\n\(header), on the held-out flite sentences: said whole (\(whole.count); flite's phrasing at each comma, the pause stretched to its drawn 150–600 ms) and said clause by clause (\(hClips.count); flite says \"x,\" and \"x.\" alike):\n")
    print("| detector | ceiling | held-out sentences | cut early | held open (> 3 s) | last word → decision, median | p90 |")
    print("|---|---|---|---|---|---|---|")
    for r in wholeWin { print(row("window alone", "said whole", r)) }
    for r in clauseWin { print(row("window alone", "clause by clause", r)) }
    func figures(_ prefix: String, _ t: EndpointBench.WindowResult, _ w: EndpointBench.WindowResult, _ what: String) {
        out.append(Figure(name: "\(prefix)_median", value: t.latencyPercentile(0.5), unit: "ms", baseline: 400, ratio: t.latencyPercentile(0.5) / 400,
                          detail: "last word → end-of-turn decision, median, \(what) (\(t.trials)), 900 ms window as ceiling; p90 \(String(format: "%.0f", t.latencyPercentile(0.9))) ms; the window alone: \(String(format: "%.0f", w.latencyPercentile(0.5))) ms; baseline column: the goal, 400 ms"))
        out.append(Figure(name: "\(prefix)_cut_early", value: t.earlyCutShare * 100, unit: "%", baseline: 2, ratio: t.earlyCutShare * 100 / 2,
                          detail: "\(what): decided before the last word (\(t.earlyCuts)/\(t.trials)); the window alone \(pct(w.earlyCutShare)); baseline column: the goal, 2 %"))
        out.append(Figure(name: "\(prefix)_held_open", value: t.heldOpenShare * 100, unit: "%", baseline: 5, ratio: t.heldOpenShare * 100 / 5,
                          detail: "\(what): no decision within 3 s of the last word (noise held them open); the window alone \(pct(w.heldOpenShare)); baseline column: the goal, 5 %"))
    }
    guard let turn else {
        out.append(Figure(name: "endpoint_turn_model", value: 0, unit: "loaded", baseline: nil, ratio: nil,
                          detail: "no models/turn.json in \(WakeModelCatalog.defaultDirectory()): turns end on the silence window (make turn-model)"))
        return out
    }
    let wholeTurn = EndpointBench.evaluate(whole, voice: wholeProbs, threshold: th, windowsMs: windows, turn: turn)
    let clauseTurn = EndpointBench.evaluate(hClips, voice: hProbs, threshold: th, windowsMs: windows, turn: turn)
    let allTurn = EndpointBench.evaluate(clips, voice: probs, threshold: th, windowsMs: windows, turn: turn)
    for r in wholeTurn { print(row("end-of-turn detector", "said whole", r)) }
    for r in clauseTurn { print(row("end-of-turn detector", "clause by clause", r)) }
    for r in allTurn { print(row("end-of-turn detector", "all \(clips.count) (espeak-ng too)", r)) }
    // Continuous speech in noise: long turns (5–6 clauses, pauses up to 800 ms) at 10 and 5 dB, held-out voices.
    let long = try continuousClips(count: max(sentences / 10, 12), seed: 2525, voices: [.flite("awb"), .flite("rms")])
    let longProbs = long.map { EndpointBench.probabilities($0, detector: detector) }
    let longWin = EndpointBench.evaluate(long, voice: longProbs, threshold: th, windowsMs: windows)
    let longTurn = EndpointBench.evaluate(long, voice: longProbs, threshold: th, windowsMs: windows, turn: turn)
    print("\nContinuous speech in noise (\(long.count) turns of 5–6 clauses with 150–800 ms pauses, flite awb/rms, noises cycled at 10 and 5 dB):\n")
    print("| detector | ceiling | cut early | held open (> 3 s) | last word → decision, median |")
    print("|---|---|---|---|---|")
    for (name, rs) in [("window alone", longWin), ("end-of-turn detector", longTurn)] {
        for r in rs { print("| \(name) | \(r.windowMs) ms | \(pct(r.earlyCutShare)) | \(pct(r.heldOpenShare)) | \(String(format: "%.0f", r.latencyPercentile(0.5))) ms |") }
    }
    let at900 = { (rs: [EndpointBench.WindowResult]) in rs.first { $0.windowMs == 900 } }
    if let t = at900(wholeTurn), let w = at900(wholeWin) { figures("endpoint_turn", t, w, "held-out flite sentences said whole") }
    if let t = at900(clauseTurn), let w = at900(clauseWin) { figures("endpoint_turn_clauses", t, w, "held-out flite sentences said clause by clause") }
    if let lt = at900(longTurn) {
        out.append(Figure(name: "endpoint_turn_continuous_cut_early", value: lt.earlyCutShare * 100, unit: "%", baseline: 2, ratio: lt.earlyCutShare * 100 / 2,
                          detail: "continuous speech in noise: long turns cut before their last word (\(lt.earlyCuts)/\(lt.trials)); held open \(pct(lt.heldOpenShare)); baseline column: the goal, 2 %"))
    }
    return out
}
