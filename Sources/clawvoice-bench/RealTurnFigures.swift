// Real recordings in `--endpoint` (issue 25): the asterisk-core-sounds-en prompts that pause inside
// (RealPrompts), as recorded and in the bench's noises at 10 dB, through the windows alone and the
// end-of-turn detector when models/turn.json exists. Figures `endpoint_real_*` in `--json`.

import ClawvoiceTesting
import Foundation
import WakeWord

func realPromptRows(detector: VoiceDetector, windows: [Int], print: (String) -> Void) -> [Figure] {
    let prompts: [(prompt: RealPrompts.Prompt, speech: [Int16])]
    do { prompts = try RealPrompts.load() } catch {
        print("\nReal recordings: none (\(error)).")
        return [Figure(name: "endpoint_real_prompts", value: 0, unit: "prompts", baseline: nil, ratio: nil,
                       detail: "no real recordings for the end-of-speech rows: \(RealPrompts.install)")]
    }
    let th = detector.threshold
    let turn = loadTurnModel()
    let sets = [("as recorded", "recorded", RealPrompts.clips(prompts, noisy: nil, seed: 4040)),
                ("in noise, 10 dB", "noise", RealPrompts.clips(prompts, noisy: 10, seed: 4041))]
    note("endpoint: \(prompts.count) real prompts, computing voice probabilities")
    print("\nReal recordings (\(prompts.count) English voice prompts of asterisk-core-sounds-en that pause inside: one speaker, Allison, her own pauses; the bench's 8 noises cycled at 10 dB):\n")
    print("| detector | ceiling | prompts | cut early | held open (> 3 s) | last word → decision, median | p90 |")
    print("|---|---|---|---|---|---|---|")
    var out: [Figure] = [Figure(name: "endpoint_real_prompts", value: Double(prompts.count), unit: "prompts", baseline: nil, ratio: nil,
                                detail: "asterisk-core-sounds-en prompts that pause inside (one speaker, read speech)")]
    for (set, setKey, clips) in sets {
        let probs = clips.map { EndpointBench.probabilities($0, detector: detector) }
        var rows = [("window alone", "window", EndpointBench.evaluate(clips, voice: probs, threshold: th, windowsMs: windows))]
        if let turn { rows.append(("end-of-turn detector", "turn", EndpointBench.evaluate(clips, voice: probs, threshold: th, windowsMs: windows, turn: turn))) }
        for (name, rowKey, rs) in rows {
            for r in rs {
                print("| \(name) | \(r.windowMs) ms | \(set) | \(pct(r.earlyCutShare)) (\(r.earlyCuts)/\(r.trials)) | \(pct(r.heldOpenShare)) | \(String(format: "%.0f", r.latencyPercentile(0.5))) ms | \(String(format: "%.0f", r.latencyPercentile(0.9))) ms |")
            }
            guard let r = rs.first(where: { $0.windowMs == 900 }) else { continue }
            let key = "endpoint_real_\(rowKey)_\(setKey)"
            let what = "real prompts \(set) (\(r.trials)), \(name), 900 ms ceiling"
            out.append(Figure(name: "\(key)_median", value: r.latencyPercentile(0.5), unit: "ms", baseline: 400, ratio: r.latencyPercentile(0.5) / 400,
                              detail: "last word → decision, median, \(what); p90 \(String(format: "%.0f", r.latencyPercentile(0.9))) ms; baseline column: the goal, 400 ms"))
            out.append(Figure(name: "\(key)_cut_early", value: r.earlyCutShare * 100, unit: "%", baseline: 2, ratio: r.earlyCutShare * 100 / 2,
                              detail: "\(what): decided before the last word (\(r.earlyCuts)/\(r.trials)); baseline column: the goal, 2 %"))
            out.append(Figure(name: "\(key)_held_open", value: r.heldOpenShare * 100, unit: "%", baseline: 5, ratio: r.heldOpenShare * 100 / 5,
                              detail: "\(what): no decision within 3 s of the last word; baseline column: the goal, 5 %"))
        }
    }
    return out
}
