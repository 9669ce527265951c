// The daemon's wake listener with `wake enroll`'s files under the state directory: an
// enrollment that fits is used and shown in status; one that does not fit is left out with
// its line, and the trigger is still listened for.

import Audio
import ClawvoiceCore
import Foundation
import GatewayProtocol
@testable import Talk
import Testing
import WakeWord

@Suite struct WakeListenerEnrollmentTests {
    static let modelsDir = TalkPulse.repoRoot + "/models"

    @Test func `an enrollment in the state directory is used, and one for another front end is not`() throws {
        let model = try #require(try? WakeModel.load(manifestPath: Self.modelsDir + "/openclaw.json"), "models/openclaw.json is missing")
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("wake-enroll-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: state) }
        let said = try Resampler.convert(try SpeechSynthesizer.synthesize("openclaw"), toRateHz: 16_000).samples
        let (e, _) = WakeEnrollment.from(takes: [said], model: model, takeNames: ["take-1.wav"])
        let store = WakeEnrollmentStore(stateDir: state)
        try store.save(e, takes: [said])

        var config = WakeConfig(modelsDirectory: Self.modelsDir)
        let without = WakeListener(config: config, triggers: ["openclaw"])
        #expect(without.status.enrolled.isEmpty, "no state directory given: no enrollment")
        config.stateDir = state
        let with = WakeListener(config: config, triggers: ["openclaw"])
        #expect(with.status.enrolled == ["openclaw"] && with.status.listening == ["openclaw"])
        #expect(with.detector?.enrollments.first??.templates.count == 1)
        #expect(with.status.json["enrolled"] == ["openclaw"])

        var moved = e
        moved.frontEndSHA256 = "0000"
        try store.save(moved, takes: [said])
        let stale = WakeListener(config: config, triggers: ["openclaw"])
        #expect(stale.status.enrolled.isEmpty && stale.status.listening == ["openclaw"])
        #expect(stale.status.error?.contains("another front end") == true, "\(String(describing: stale.status.error))")
    }
}
