// The stop word (issue 14): a wake head for "stop" (models/stop.json, trained with the wake
// pipeline) that hears the microphone only while the node speaks. TalkMachine decides when it
// listens (`listenForStop`) and what a detection does (`stopWordHeard`: stop the speech, as a
// barge-in, and only while speaking); this owns the detector and its stream.

import Audio
package import ClawvoiceCore
import Foundation
package import WakeWord

/// Owned by TalkController (one isolation domain); not Sendable.
///
/// The detector (its front end's layer buffers and patches: 2.3 MB) exists only while the node
/// speaks: made at the first frame fed, dropped at the gap after the last (issue 25: memory not
/// needed at rest is not held). The model's weights stay loaded.
package final class StopWordListener {
    static let phrase = "stop"
    private let model: WakeModel
    private let sensitivity: Double
    /// The stream's detector while frames are fed; nil at rest.
    private(set) var current: WakeDetector?
    /// The score a detection needs (the model's threshold at this sensitivity).
    let threshold: Float
    /// Whether the previous frame was fed: frames in between (silence, a capture) are a gap.
    private var fedLast = false
    /// The highest score since the node began speaking (for the debug log).
    private(set) var peak: Float = 0

    /// The stop head from `directory`, or why there is none (one line for the log).
    package static func load(directory: String, sensitivity: Double = 0.5) -> (StopWordListener?, String?) {
        do {
            let (models, missing) = try WakeModelCatalog(directory: directory).load([phrase])
            guard let model = models.first else {
                let m = missing.first
                return (nil, "no stop-word model (looked for \(m?.expectedPath ?? directory + "/stop.json")); train one with: \(m?.command ?? "make wake-model TRIGGER=stop"), or set talk.stopWord to false")
            }
            // A short refractory: a second "stop" over a second reply is a second stop.
            return (StopWordListener(model: model, sensitivity: sensitivity), nil)
        } catch {
            return (nil, "stop-word model: \(error)")
        }
    }

    private init(model: WakeModel, sensitivity: Double) {
        self.model = model
        self.sensitivity = sensitivity
        threshold = WakeDetector.thresholds([model], sensitivity).first ?? 0
    }

    // A short refractory: a second "stop" over a second reply is a second stop.
    private static func detector(_ model: WakeModel, _ sensitivity: Double) -> WakeDetector {
        WakeDetector(models: [model], sensitivity: sensitivity, refractoryMilliseconds: 1000)
    }

    /// One frame heard while speaking; true when it completed a "stop".
    package func feed(_ frame: PCMBuffer) -> WakeDetection? {
        if !fedLast || current == nil { current = Self.detector(model, sensitivity); peak = 0 }
        fedLast = true
        return current!.process(frame.samples) { [self] s in peak = max(peak, s.scores.first ?? 0) }.first
    }

    /// The node stopped speaking (a frame that was not fed): the next frame starts a fresh stream
    /// with a fresh detector; this one is let go. Returns whether a stream ended here.
    @discardableResult
    func gap() -> Bool {
        defer { fedLast = false; current = nil }
        return fedLast
    }
}
