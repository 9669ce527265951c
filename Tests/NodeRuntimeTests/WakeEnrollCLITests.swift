// `clawvoice wake enroll` as a user runs it: a real process capturing from a private PulseAudio's
// virtual microphone while takes are played into it; the takes and the enrollment kept, used by
// `wake detect`, shown by `wake status` and removed by --reset; a silent wait and a clipped take
// refused with their lines and asked for again.

import Audio
import ClawvoiceCore
import ClawvoiceTesting
import Foundation
@testable import NodeRuntime
import WakeWord
import Testing

@Suite(.serialized) struct WakeEnrollCLITests {
    static let models = repositoryRoot().appendingPathComponent("models").path

    /// `openclaw` said by espeak-ng at three rates and pitches, at `gain` (1: about -6 dBFS peaks).
    static func takes(gain: Double = 1) throws -> [[Int16]] {
        try [(150, 40), (175, 55), (200, 70)].map { rate, pitch in
            var settings = VoiceSettings()
            settings.rateWpm = rate
            settings.pitch = pitch
            let s = try Resampler.convert(try SpeechSynthesizer.synthesize("openclaw", settings: settings), toRateHz: 16_000).samples
            let peak = Double(s.map { abs(Int($0)) }.max() ?? 1)
            return s.map { Int16(clamping: Int(Double($0) / peak * 16_000 * gain)) }
        }
    }

    /// Plays `parts` into the virtual microphone, 1.5 s of silence after each.
    static func play(_ parts: [[Int16]], pulse: SoundServerProcess, env: CLIEnvironment, name: String) throws {
        let gap = [Int16](repeating: 0, count: 24_000)
        let audio = parts.reduce([Int16](repeating: 0, count: 8000)) { $0 + $1 + gap }
        let wav = env.scratch.sub(name)
        try Data(WAVFile.encode(PCMBuffer(format: .voice, samples: audio))).write(to: URL(fileURLWithPath: wav))
        #expect(try SoundServerProcess.tool("/usr/bin/paplay", ["-s", pulse.server, "-d", "cv_mic", wav]) == 0)
    }

    @Test func `three takes said into the microphone are kept, used by wake detect, shown by status and removed by reset`() async throws {
        try #require(FileManager.default.fileExists(atPath: Self.models + "/openclaw.json"), "models/openclaw.json is missing")
        let env = try CLIEnvironment()
        let pulse = try await SoundServerProcess.start(in: env.scratch)
        defer { pulse.stop() }
        var enrollEnv = env
        enrollEnv.extra["PULSE_SERVER"] = pulse.server
        let enroll = try enrollEnv.spawn(["wake", "enroll", "openclaw", "--takes", "3", "--wait", "30", "--source", "cv_mic.monitor",
                                          "--models", Self.models])
        let asked = await eventually(.seconds(15)) { enroll.stdout.contains("Take 1 of 3: say \"openclaw\" now.") }
        #expect(asked, "\(enroll.stdout)\n\(enroll.stderr)")
        try Self.play(try Self.takes(), pulse: pulse, env: env, name: "takes.wav")
        let status = await enroll.waitForExit(.seconds(60))
        #expect(status == 0, "stdout: \(enroll.stdout.suffix(1500))\nstderr: \(enroll.stderr)")
        let out = enroll.stdout
        for n in 1...3 { #expect(out.contains("take \(n): ok (peak "), "\(out.suffix(1500))") }
        #expect(out.contains("level "), "a live level meter: \(out.prefix(600))")
        let dir = env.stateDir + "/wake-enroll/openclaw"
        #expect(out.contains("Enrolled \"openclaw\": 3 takes kept in \(dir)"), "\(out.suffix(800))")

        // The takes are kept as WAV files, each holding one of the played takes.
        for n in 1...3 {
            let take = try WAVFile.decode([UInt8](try Data(contentsOf: URL(fileURLWithPath: "\(dir)/take-\(n).wav"))))
            let peak = take.samples.map { abs(Int($0)) }.max() ?? 0
            #expect(take.format == .voice && take.samples.count > 8000 && take.samples.count < 64_000 && peak > 8000,
                    "take \(n): \(take.samples.count) samples, peak \(peak)")
        }
        let enrollment = try JSONDecoder().decode(WakeEnrollment.self, from: Data(contentsOf: URL(fileURLWithPath: dir + "/enrollment.json")))
        #expect(enrollment.phrase == "openclaw" && enrollment.templates.count == 3 && enrollment.takes == ["take-1.wav", "take-2.wav", "take-3.wav"])

        // Used: wake detect over a kept take loads the enrollment and finds the take's own window in it.
        let detect = try await env.run(["wake", "detect", "--input", dir + "/take-2.wav", "--phrases", "openclaw", "--scores",
                                        "--models", Self.models], timeout: .seconds(60))
        #expect(detect.status == 0, "\(detect)")
        #expect(detect.stderr.contains("openclaw is enrolled (3 takes in \(dir))"), "\(detect.stderr)")
        let near = detect.stdout.split(separator: "\n").compactMap { line -> Double? in
            guard let r = line.range(of: "\"near\":{\"openclaw\":") else { return nil }
            return Double(line[r.upperBound...].prefix { $0 != "}" })
        }
        #expect((near.max() ?? 0) > 0.999, "the take's window matches its enrollment: \(near.max() ?? -1)")

        let shown = try await env.run(["wake", "status", "--phrases", "openclaw", "--models", Self.models])
        #expect(shown.stdout.contains("enrolled: 3 takes in \(dir)"), "\(shown)")
        let reset = try await env.run(["wake", "enroll", "openclaw", "--reset"])
        #expect(reset.status == 0 && reset.stdout.contains("removed the enrollment of \"openclaw\""), "\(reset)")
        #expect(!FileManager.default.fileExists(atPath: dir))
        let after = try await env.run(["wake", "status", "--phrases", "openclaw", "--models", Self.models])
        #expect(after.stdout.contains("not enrolled (clawvoice wake enroll openclaw"), "\(after)")
        let again = try await env.run(["wake", "enroll", "openclaw", "--reset"])
        #expect(again.stdout.contains("\"openclaw\" is not enrolled: nothing to remove"), "\(again)")
    }

    @Test func `a silent wait and a clipped take are refused with their lines and asked for again`() async throws {
        try #require(FileManager.default.fileExists(atPath: Self.models + "/openclaw.json"), "models/openclaw.json is missing")
        let env = try CLIEnvironment()
        let pulse = try await SoundServerProcess.start(in: env.scratch)
        defer { pulse.stop() }
        var enrollEnv = env
        enrollEnv.extra["PULSE_SERVER"] = pulse.server
        let enroll = try enrollEnv.spawn(["wake", "enroll", "openclaw", "--takes", "3", "--wait", "2", "--source", "cv_mic.monitor",
                                          "--models", Self.models])
        // Nothing is played at first: the first take is a silent one.
        let silent = await eventually(.seconds(20)) { enroll.stdout.contains("take 1 refused: heard nothing for 2 s") }
        #expect(silent, "\(enroll.stdout.suffix(800))\n\(enroll.stderr)")
        #expect(enroll.stdout.contains("Take 1 of 3 again: say \"openclaw\" now."), "\(enroll.stdout.suffix(800))")
        let good = try Self.takes()
        let clipped = good[0].map { Int16(clamping: Int($0) * 8) }
        // The listener waits 2 s at most for each take: one play, takes 1.5 s apart.
        try Self.play([clipped] + good, pulse: pulse, env: env, name: "clipped-then-good.wav")
        let status = await enroll.waitForExit(.seconds(60))
        let out = enroll.stdout
        #expect(out.contains("take 1 refused: the take clipped"), "\(out.suffix(1500))")
        #expect(out.contains("say it a little softer"), "the line says what to do: \(out.suffix(1500))")
        #expect(status == 0, "stdout: \(out.suffix(1500))\nstderr: \(enroll.stderr)")
        #expect(out.contains("take 3: ok"), "\(out.suffix(800))")
        let takes = (try? FileManager.default.contentsOfDirectory(atPath: env.stateDir + "/wake-enroll/openclaw")) ?? []
        #expect(takes.sorted() == ["enrollment.json", "take-1.wav", "take-2.wav", "take-3.wav"], "only the good takes are kept: \(takes)")
    }
}
