// The default silence window (issue 14): on a small fixed set of multi-clause sentences with
// pauses (espeak-ng at four settings, flite awb and rms held out), clean and in loud noise, the
// endpointer driven frame by frame with the audio position as its clock, the default
// talk.silenceTimeoutMs cuts at most 2 % of the sentences early and holds none open, while the
// shortest window (400 ms) cuts more. Which window is the shortest with at most 2 % is
// `clawvoice-bench --endpoint`'s figure on 300 sentences: 24 are too few to tell 700 from 900 ms
// (one cut is 4 %), and espeak-ng's rendering of a sentence varies a little with what the process
// spoke before, so on this set 700 ms comes out clean in some runs and not in others.

import Audio
import ClawvoiceCore
import ClawvoiceTesting
import Foundation
import Testing
import WakeWord
@testable import Talk

@Suite struct EndpointWindowTests {
    static let models = TalkPulse.repoRoot + "/models"

    @Test func `the default window cuts at most 2 % of sentences early and 400 ms cuts more`() throws {
        let detector = VoiceDetector(model: try VoiceDetectorModel.load(directory: Self.models))
        let conditions: [(BenchNoise?, Double?)] = [(nil, nil), (.pink, 10), (.clatter, 10), (.fan, 5)]
        let clips = try EndpointBench.endpointClips(sentences: 24, seed: 77, conditions: conditions)
        #expect(clips.filter { $0.voice.hasPrefix("flite") }.count == 8)
        let probs = clips.map { EndpointBench.probabilities($0, detector: detector) }
        let results = EndpointBench.evaluate(clips, voice: probs, threshold: detector.threshold, windowsMs: [400, 700, 900])
        let summary = results.map { "\($0.windowMs) ms: \($0.earlyCuts)/\($0.trials) cut early, \($0.heldOpen) held open" }.joined(separator: "; ")
        #expect(TalkMachine.Settings().silenceTimeoutMs == TalkConfig().silenceTimeoutMs)
        let chosen = try #require(results.first { $0.windowMs == TalkConfig().silenceTimeoutMs })
        #expect(Double(chosen.earlyCuts) <= 0.02 * Double(chosen.trials), "\(summary)")
        // And at that window the noise holds no capture open.
        #expect(chosen.heldOpen == 0, "\(summary)")
        // The rule tells windows apart: the shortest cuts sentences at their pauses.
        let shortest = try #require(results.first { $0.windowMs == 400 })
        #expect(Double(shortest.earlyCuts) > 0.02 * Double(shortest.trials), "\(summary)")
    }

    @Test func `the labels and the trimming see the speech the engines made`() throws {
        let said = EndpointBench.trimmed(try BenchVoice.espeak(voice: "en-us", rateWpm: 175, pitch: 50).say("turn on the lights,"))
        var rng = SplitMix64(seed: 1)
        let c = EndpointBench.clip(parts: [said, said], gapsMs: [400], leadMs: 500, tailMs: 1000, noise: .pink, snrDb: 10,
                                   peakDbfs: -6, voice: "espeak", rng: &rng)
        let speechMs = Double(said.count) / 16
        let last = try #require(c.lastWordEndMs)
        // The last word ends where the second part ends (within a frame or two of the labels' rule).
        #expect(abs(last - (500 + speechMs + 400 + speechMs)) <= 60, "last word at \(last) ms")
        // The 400 ms pause is not speech in the labels.
        let gapStart = Int((500 + speechMs) / 20) + 3, gapEnd = Int((500 + speechMs + 400) / 20) - 3
        #expect(c.labels[gapStart..<gapEnd].allSatisfy { !$0 })
    }

    @Test func `a held-out sentence said whole is cut at flite's comma pauses`() throws {
        let clauses = ["turn on the kitchen lights,", "and set a timer for ten minutes,", "when you get a moment."]
        let parts = try #require(try BenchVoice.flite("awb").sayWhole(clauses))
        #expect(parts.count == 3)
        // Each part is speech: its own clause said, no comma pause (quiet ≥ 100 ms) inside or at its ends.
        for p in parts {
            #expect(p.count > 16_000 / 2, "\(p.count) samples")
            let rms = stride(from: 0, to: p.count - 160, by: 160).map { j in
                (p[j..<j + 160].reduce(0.0) { $0 + Double($1) * Double($1) } / 160).squareRoot()
            }
            let top = rms.max() ?? 0
            var run = 0, longest = 0
            for r in rms { run = r < top / 100 ? run + 1 : 0; longest = max(longest, run) }
            #expect(longest < 10, "a quiet run of \(longest * 10) ms inside a part")
        }
        // A sentence flite does not pause in once per comma is left out, not split wrongly.
        #expect(try BenchVoice.flite("awb").sayWhole(["well, let me think,", "about it."]) == nil)
        #expect(try BenchVoice.espeak(voice: "en-us", rateWpm: 175, pitch: 50).sayWhole(clauses) == nil)
    }
}
