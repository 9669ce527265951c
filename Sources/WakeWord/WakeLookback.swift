// WakeLookback: the detector's last second of step scores, read again when its threshold relief
// rises. Voice barge-in fires only once the user has talked over the reply for a while, so the
// relief a barge-in brings (TalkMachine.Settings.wakeReliefAfterBargeIn) also belongs to the
// moments just before it: a trigger that peaked a little under the bar over the node's voice and
// set off the barge-in afterwards is the same word as one finished after it (issue 22 item 5: a
// miss in WakeOverReplyTests peaked at 0.68 and 0.66 against 0.71, its barge-in 0.3 s later).
// Only steps heard under relief (over the node's own voice) are read again. A pure value.

public struct WakeLookback: Sendable, Equatable {
    /// One detector step as it was heard.
    public struct Step: Sendable, Equatable {
        /// Audio position at the end of the step, in milliseconds.
        public var ms: Int
        /// One score per model.
        public var scores: [Float]
        /// The threshold relief (logits) the step was judged with; 0: not over the node's voice.
        public var relief: Float

        public init(ms: Int, scores: [Float], relief: Float) {
            self.ms = ms
            self.scores = scores
            self.relief = relief
        }
    }

    /// A wake the kept steps make under a new relief: the model, the step that completed its run
    /// of steps over the bar, its margin over the relieved bar (logits) and its score.
    public struct Bid: Sendable, Equatable {
        public var model: Int
        public var ms: Int
        public var margin: Float
        public var score: Float
    }

    /// How far back steps are kept, in milliseconds of audio.
    public var milliseconds: Int
    public private(set) var steps: [Step] = []

    public init(milliseconds: Int = 1000) { self.milliseconds = milliseconds }

    /// Keeps a step, and lets go of those more than `milliseconds` before it.
    public mutating func record(_ step: Step) {
        steps.append(step)
        let oldest = step.ms - milliseconds
        if let first = steps.firstIndex(where: { $0.ms > oldest }), first > 0 { steps.removeFirst(first) }
    }

    /// A fresh stream, or a wake decided: nothing earlier is read again.
    public mutating func removeAll() { steps.removeAll(keepingCapacity: true) }

    /// The kept steps judged again at `relief`: per model, the first step at which a run of
    /// `required[i]` steps in a row, each heard under relief, is at or over `thresholdLogits[i]`
    /// less `relief`; of those, the one furthest over its bar. Nil: none.
    public func bid(thresholdLogits: [Float], required: [Int], relief: Float) -> Bid? {
        var best: Bid?
        for i in thresholdLogits.indices {
            var run = 0
            for s in steps {
                let logit = WakeDetector.logit(s.scores[i])
                let over = s.relief > 0 && logit >= thresholdLogits[i] - relief
                run = over ? run + 1 : 0
                guard run >= max(1, required[i]) else { continue }
                let margin = logit - thresholdLogits[i]
                if best.map({ margin > $0.margin }) ?? true { best = Bid(model: i, ms: s.ms, margin: margin, score: s.scores[i]) }
                break
            }
        }
        return best
    }
}
