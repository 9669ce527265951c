// The stop word (issue 14): a wake head for "stop" (models/stop.json, trained with the wake
// pipeline) that hears the microphone only while the node speaks. TalkMachine decides when it
// listens (`listenForStop`) and what a detection does (`stopWordHeard`: stop the speech, as a
// barge-in, and only while speaking); this owns the detector and its stream.

import Audio
import Foundation
import WakeWord

/// Owned by TalkController (one isolation domain); not Sendable.
final class StopWordListener {
    static let phrase = "stop"
    let detector: WakeDetector
    /// Whether the previous frame was fed: frames in between (silence, a capture) are a gap.
    private var fedLast = false
    /// The highest score since the node began speaking (for the debug log).
    private(set) var peak: Float = 0

    /// The stop head from `directory`, or why there is none (one line for the log).
    static func load(directory: String, sensitivity: Double = 0.5) -> (StopWordListener?, String?) {
        do {
            let (models, missing) = try WakeModelCatalog(directory: directory).load([phrase])
            guard let model = models.first else {
                let m = missing.first
                return (nil, "no stop-word model (looked for \(m?.expectedPath ?? directory + "/stop.json")); train one with: \(m?.command ?? "make wake-model TRIGGER=stop"), or set talk.stopWord to false")
            }
            // A short refractory: a second "stop" over a second reply is a second stop.
            return (StopWordListener(WakeDetector(models: [model], sensitivity: sensitivity, refractoryMilliseconds: 1000)), nil)
        } catch {
            return (nil, "stop-word model: \(error)")
        }
    }

    private init(_ detector: WakeDetector) { self.detector = detector }

    /// One frame heard while speaking; true when it completed a "stop".
    func feed(_ frame: PCMBuffer) -> WakeDetection? {
        if !fedLast { detector.reset(); peak = 0 }
        fedLast = true
        return detector.process(frame.samples) { [self] s in peak = max(peak, s.scores.first ?? 0) }.first
    }

    /// The node stopped speaking (a frame that was not fed): the next frame starts a fresh stream.
    /// Returns whether a stream ended here.
    @discardableResult
    func gap() -> Bool {
        defer { fedLast = false }
        return fedLast
    }
}
