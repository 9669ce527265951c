// OwnWords: whether the node itself is saying a phrase right now. On an echo-cancelled
// loudspeaker the detectors hear what is left of the node's own voice (all of it while the linear
// canceller waits for a clip's echo delay), so a reply that says "computer" or "stop" could wake
// or stop the node by itself. The node knows the text it plays: a detection of a phrase the
// playing clip says, near where in the clip it says it, is its own voice. Pure.

import Foundation

public enum OwnWords {
    /// Where `phrase` is said in `text`, as fractions of the text's length (0 = its start). A
    /// match is one to three consecutive words whose letters begin with the phrase's letters and
    /// add at most three more ("computers", "stopped", "Open Claw" for "openclaw"): the word as
    /// the detectors would hear it.
    public static func offsets(of phrase: String, in text: String) -> [Double] {
        let target = letters(phrase)
        guard !target.isEmpty, !text.isEmpty else { return [] }
        var words: [(letters: String, at: Int)] = []
        var current = "", start = 0, index = 0
        for ch in text.lowercased() {
            if ch.isLetter || ch.isNumber {
                if current.isEmpty { start = index }
                current.append(ch)
            } else if ch != "'" && ch != "’" && !current.isEmpty {
                words.append((current, start))
                current = ""
            }
            index += 1
        }
        if !current.isEmpty { words.append((current, start)) }
        let length = Double(max(index, 1))
        var out: [Double] = []
        for i in words.indices {
            var joined = ""
            for k in i..<min(i + 3, words.count) {
                joined += words[k].letters
                if joined.count >= target.count {
                    if joined.hasPrefix(target) && joined.count <= target.count + 3 { out.append(Double(words[i].at) / length) }
                    break
                }
            }
        }
        return out
    }

    /// Whether the speaker is saying `phrase` about now: the playing clip (or the one that
    /// stopped less than `afterMs` ago) says it, and the time into the clip is within `beforeMs`
    /// before to `afterMs` after where the text puts it (speech runs about evenly through its
    /// characters; the windows cover a clip whose pace is uneven, and a detector that fires up to
    /// a second after the word).
    public static func saying(_ phrase: String, speaker: SpeakerState, beforeMs: Double = 2_000, afterMs: Double = 2_500) -> Bool {
        guard let text = speaker.saying, let clipMs = speaker.clipMs, let into = speaker.msIntoClip else { return false }
        // Once the clip has stopped, only for the echo's tail and the detector's delay.
        let recent = speaker.playing || (speaker.msSinceStopped.map { Double($0) < afterMs } ?? false)
        guard recent else { return false }
        let at = Double(into)
        return offsets(of: phrase, in: text).contains { f in
            let said = f * clipMs
            return at >= said - beforeMs && at <= said + afterMs
        }
    }

    static func letters(_ s: String) -> String {
        String(s.lowercased().filter { $0.isLetter || $0.isNumber })
    }
}
