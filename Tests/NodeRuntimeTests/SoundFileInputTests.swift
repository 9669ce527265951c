// Issue 27, item 7: the files a user names (wake.chime, sounds.*, `wake detect --input`) are read
// through libsndfile, so 24-bit, float and FLAC files work where only 16-bit WAV did. Real files
// made by sox in the test's scratch dir; gateway clips (ClipDecoder) are unchanged.

import ClawvoiceCore
import Foundation
import Testing
import Audio
import Talk
@testable import CLI
@testable import Daemon
@testable import NodeRuntime

@Suite struct `Sound files a user names` {
    @Test func `a FLAC chime and a 24-bit and a float feedback sound are accepted by the config`() throws {
        let scratch = try Scratch()
        for (name, encoding) in [("ding.flac", ["-b", "24"]), ("beep24.wav", ["-b", "24"]), ("beepf.wav", ["-e", "floating-point", "-b", "32"])] {
            #expect(try SoundServerProcess.tool("/usr/bin/sox", ["-n", "-r", "22050", "-c", "1"] + encoding
                                                + [scratch.sub(name), "synth", "0.3", "sine", "660", "vol", "0.5"]) == 0)
        }
        let file = scratch.sub("clawvoice.json5")
        let c = try ClawConfig.parse(#"{ wake: { chime: "ding.flac" }, sounds: { mute: "beep24.wav", unmute: "beepf.wav" } }"#, file: file)
        #expect(c.wake.chime == .file(scratch.sub("ding.flac")))
        for chime in [c.wake.chime, c.sounds.cues[.mute]!, c.sounds.cues[.unmute]!] {
            let sound = chime.sound()
            #expect(sound.problem == nil, "\(sound.problem ?? "")")
            #expect(sound.pcm?.format.sampleRateHz == 22_050 && sound.pcm?.samples.count == 6615, "\(String(describing: sound.pcm?.format))")
            #expect((sound.pcm?.samples.map { abs(Int($0)) }.max() ?? 0) > 15_000)
        }
        // Still one line naming the file when neither decoder can read it, and longer than 3 s is still refused.
        _ = FileManager.default.createFile(atPath: scratch.sub("junk.flac"), contents: Data("fLaC but not really".utf8))
        var junk: String?
        do { _ = try ClawConfig.parse(#"{ wake: { chime: "junk.flac" } }"#, file: file) } catch { junk = error.description }
        #expect(junk?.contains("'wake.chime': wake chime \(scratch.sub("junk.flac")):") == true && junk?.contains("\n") == false, "\(junk ?? "accepted")")
        #expect(try SoundServerProcess.tool("/usr/bin/sox", ["-n", "-r", "8000", "-c", "1", "-b", "24", scratch.sub("long.flac"), "synth", "4", "sine", "300"]) == 0)
        #expect { try ClawConfig.parse(#"{ wake: { chime: "long.flac" } }"#, file: file) } throws: { e in
            "\(e)".contains("a chime must be 3 s or shorter")
        }
    }

    @Test func `wake detect reads a 24-bit FLAC and a float WAV`() async throws {
        let models = repositoryRoot().appendingPathComponent("models").path
        try #require(FileManager.default.fileExists(atPath: models + "/openclaw.json"), "models/openclaw.json is missing")
        let env = try CLIEnvironment()
        let wav = env.scratch.sub("speech.wav")
        #expect(try SoundServerProcess.tool("/usr/bin/espeak-ng", ["-w", wav, "hello there, what time is it"]) == 0)
        for (name, encoding) in [("speech.flac", ["-b", "24"]), ("speechf.wav", ["-e", "floating-point", "-b", "32"])] {
            #expect(try SoundServerProcess.tool("/usr/bin/sox", [wav] + encoding + ["-r", "44100", env.scratch.sub(name)]) == 0)
            let o = try await env.run(["wake", "detect", "--input", env.scratch.sub(name), "--scores", "--phrases", "openclaw", "--models", models],
                                      timeout: .seconds(60))
            #expect(o.status == 0, "\(name): \(o)")
            // A score line per 80 ms step of the ~2 s of speech: the whole file was read.
            let steps = o.stdout.split(separator: "\n").filter { $0.hasPrefix("{\"ms\":") }.count
            #expect(steps >= 15, "\(name): \(steps) score lines")
        }
    }
}
