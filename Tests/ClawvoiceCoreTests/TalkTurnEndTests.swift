// The end-of-turn model in the talk machine (issue 25): a `once` turn ends when the model says the
// turn is over, sooner than its silence window; a held capture never asks the model; with the level
// rule (audio.voiceDetector "level") the window alone decides. Pure: frames and a clock of our own.

@testable import ClawvoiceCore
import Foundation
import Testing

@Suite struct TalkTurnEndTests {
    /// p = σ(−3 + pauseMs / 100): over 0.5 from 300 ms of pause on.
    static let model: TurnModel = {
        let n = TurnDetector.featureNames.count
        var w = [Double](repeating: 0, count: n)
        w[0] = 1
        return TurnModel(mean: [Double](repeating: 0, count: n), scale: [100] + [Double](repeating: 1, count: n - 1), weights: w,
                         bias: -3, threshold: 0.5, minimumSilenceMs: 200)
    }()

    /// Quiet frames after speech until the capture finishes (nil: not within 60).
    static func quietFramesToEnd(_ settings: TalkMachine.Settings, _ command: TalkMachine.Command) -> Int? {
        var d = MachineDriver(settings: settings)
        d.command(command)
        for _ in 0..<30 { d.feed(.frame(frame(loud: false), speaker: .silent)) }
        for _ in 0..<10 { d.feed(.frame(frame(loud: true), speaker: .silent)) }
        for k in 1...60 {
            d.feed(.frame(frame(loud: false), speaker: .silent))
            if d.count(\.isFinish) > 0 { return k }
        }
        return nil
    }

    @Test func `a once turn ends when the model hears the end, before the window`() {
        var s = TalkMachine.Settings()
        s.silenceTimeoutMs = 900
        #expect(Self.quietFramesToEnd(s, .once) == 45, "without a model: the 900 ms window")
        s.turnModel = Self.model
        #expect(Self.quietFramesToEnd(s, .once) == 15, "with it: 300 ms")
    }

    @Test func `the window stays the ceiling and the level rule ignores the model`() {
        var s = TalkMachine.Settings()
        s.turnModel = Self.model
        s.silenceTimeoutMs = 200
        #expect(Self.quietFramesToEnd(s, .once) == 10)
        s.silenceTimeoutMs = 900
        s.voiceDetector = .level
        #expect(Self.quietFramesToEnd(s, .once) == 45)
    }

    @Test func `a held capture does not end on the model`() {
        var s = TalkMachine.Settings()
        s.turnModel = Self.model
        #expect(Self.quietFramesToEnd(s, .start) == nil)
    }
}
