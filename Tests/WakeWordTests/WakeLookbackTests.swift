// The lookback a rising relief reads again (issue 22 item 5): the pure value, and the detector
// waking on a trigger that peaked under the bar before a barge-in relaxed it.

import Foundation
import Testing
@testable import WakeWord

@Suite struct WakeLookbackTests {
    static func step(_ ms: Int, _ scores: [Float], relief: Float = 0.6) -> WakeLookback.Step {
        WakeLookback.Step(ms: ms, scores: scores, relief: relief)
    }
    static let bar = WakeDetector.logit(0.82)   // computer's threshold, in logits

    @Test func `it keeps the last second of steps and forgets them on removeAll`() {
        var l = WakeLookback(milliseconds: 1000)
        for k in 1...20 { l.record(Self.step(80 * k, [0.1])) }
        #expect(l.steps.first?.ms == 640)     // 1600 - 1000 < 640: the steps after 600 ms are kept
        #expect(l.steps.last?.ms == 1600)
        #expect(l.steps.count == 13)
        l.removeAll()
        #expect(l.steps.isEmpty)
    }

    @Test func `a run of steps over the newly relieved bar bids, stamped at the step that completes it`() throws {
        var l = WakeLookback()
        // 0.68 and 0.66: under computer's bar relieved by 0.6 logits (0.71), over it relieved by 1.0 (0.63).
        for (k, s) in [0.2, 0.68, 0.66, 0.3].enumerated() { l.record(Self.step(80 * (k + 1), [Float(s)])) }
        #expect(l.bid(thresholdLogits: [Self.bar], required: [2], relief: 0.6) == nil)
        let b = try #require(l.bid(thresholdLogits: [Self.bar], required: [2], relief: 1.0))
        #expect(b.model == 0 && b.ms == 240 && b.score == 0.66)
        #expect(abs(b.margin - (WakeDetector.logit(0.66) - Self.bar)) < 1e-5)
        // A single step over the bar is not a run of two.
        var one = WakeLookback()
        for (k, s) in [0.2, 0.68, 0.3, 0.66].enumerated() { one.record(Self.step(80 * (k + 1), [Float(s)])) }
        #expect(one.bid(thresholdLogits: [Self.bar], required: [2], relief: 1.0) == nil)
        #expect(one.bid(thresholdLogits: [Self.bar], required: [1], relief: 1.0)?.ms == 160)
    }

    @Test func `steps not heard over the node's voice are not read again`() {
        var l = WakeLookback()
        for (k, s) in [0.68, 0.66, 0.7].enumerated() { l.record(Self.step(80 * (k + 1), [Float(s)], relief: 0)) }
        #expect(l.bid(thresholdLogits: [Self.bar], required: [2], relief: 1.0) == nil)
    }

    @Test func `of several models the one furthest over its bar bids`() {
        var l = WakeLookback()
        for s: [Float] in [[0.66, 0.1], [0.68, 0.75], [0.1, 0.78]] { l.record(Self.step(80 * (l.steps.count + 1), s)) }
        let b = l.bid(thresholdLogits: [Self.bar, Self.bar], required: [2, 2], relief: 1.0)
        #expect(b?.model == 1 && b?.ms == 240)
    }
}

@Suite struct WakeDetectorLookbackTests {
    /// Thirteen 80 ms steps of a steady tone through the tiny head, and its scores.
    static func tone() -> [Int16] { (0..<(13 * 1280)).map { Int16(3000 * sin(Double($0) * 0.07)) } }

    /// A detector whose bar, relieved by 0.6 logits, sits just over every pair of steps in a row
    /// in the first twelve steps, and relieved by 1.0 under the best of them; and the step the
    /// lookback should wake at.
    static func rig() throws -> (WakeDetector, expected: Int) {
        let probe = WakeDetector(models: [try tinyModel(consecutiveSteps: 2)])
        var scores: [Float] = []
        _ = probe.process(tone()) { scores.append($0.scores[0]) }
        #expect(scores.count == 13)
        let pairs = (1..<12).map { min(scores[$0 - 1], scores[$0]) }
        let best = try #require(pairs.max())
        let all = (1..<13).map { min(scores[$0 - 1], scores[$0]) }.max()!
        let threshold = WakeDetector.logit(all) + 0.65
        // The best pair before the relief rises is within 0.35 logits of the best pair of all.
        try #require(WakeDetector.logit(best) > threshold - 1.0)
        let first = try #require(pairs.firstIndex { WakeDetector.logit($0) >= threshold - 1.0 })
        let d = WakeDetector(models: [try tinyModel(threshold: Double(1 / (1 + exp(-threshold))), consecutiveSteps: 2)])
        return (d, 80 * (first + 2))
    }

    @Test func `a relief that rises wakes on the trigger heard under the lower relief just before`() throws {
        let (d, expected) = try Self.rig()
        let audio = Self.tone()
        d.thresholdRelief = 0.6
        #expect(d.process(Array(audio[0..<(12 * 1280)])).isEmpty)  // under the reply: just under its bar
        d.thresholdRelief = 1.0                                     // a barge-in
        let found = d.process(Array(audio[(12 * 1280)...])) + d.finish()
        #expect(found.map(\.ms) == [expected], "\(found)")
    }

    @Test func `without the rise, or with the steps heard unrelieved, nothing wakes`() throws {
        let audio = Self.tone()
        let (same, _) = try Self.rig()
        same.thresholdRelief = 0.6
        #expect((same.process(audio) + same.finish()).isEmpty)
        let (unrelieved, _) = try Self.rig()
        #expect(unrelieved.process(Array(audio[0..<(12 * 1280)])).isEmpty)
        unrelieved.thresholdRelief = 1.0
        #expect((unrelieved.process(Array(audio[(12 * 1280)...])) + unrelieved.finish()).isEmpty)
        // A reset forgets the steps: the rise after it has nothing to read again.
        let (reset, _) = try Self.rig()
        reset.thresholdRelief = 0.6
        _ = reset.process(Array(audio[0..<(12 * 1280)]))
        reset.reset()
        reset.thresholdRelief = 1.0
        #expect(reset.lookback.steps.isEmpty)
        #expect((reset.process([Int16](repeating: 0, count: 1280)) + reset.finish()).isEmpty)
    }
}
