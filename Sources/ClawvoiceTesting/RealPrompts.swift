// RealPrompts: real recordings for the end-of-speech bench (issue 25). The English voice prompts of
// Debian's asterisk-core-sounds-en packages: one professional speaker (Allison), studio-read
// prompts of several clauses or sentences, each pause inside them her own. The transcript the
// package ships says which prompts go on after a pause (a comma or a sentence's end inside), so a
// decision before the prompt's last word is a turn cut short. No training ever heard them.

import Audio
import ClawvoiceCore
import Foundation

public enum RealPrompts {
    public static let soundsDirectory = "/usr/share/asterisk/sounds/en"
    public static let transcript = "/usr/share/doc/asterisk-core-sounds-en/core-sounds-en.txt.gz"
    public static let install = "apt-get install asterisk-core-sounds-en asterisk-core-sounds-en-wav"

    /// A prompt that pauses inside: its name (the WAV's path under `soundsDirectory`, no extension) and text.
    public struct Prompt: Sendable, Equatable {
        public var name: String
        public var text: String
    }

    /// The prompts whose transcript goes on after a comma, semicolon, colon or sentence end, and is a
    /// whole utterance (not a fragment said to be joined to another: "…" at either end).
    public static func withPauses(transcriptText: String) -> [Prompt] {
        transcriptText.split(separator: "\n").compactMap { line in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            let name = line[..<colon].trimmingCharacters(in: .whitespaces)
            let text = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            guard !name.isEmpty, !name.contains(" "), !text.hasPrefix("..."), !text.hasSuffix("..."),
                  let last = text.last, ".?!".contains(last) else { return nil }
            let inner = text.dropLast()
            let pauses = zip(inner, inner.dropFirst()).filter { ",;:.?!".contains($0.0) && $0.1 == " " }.count
            return pauses > 0 ? Prompt(name: name, text: text) : nil
        }
    }

    /// The installed prompts that pause inside, as 16 kHz speech trimmed to its first and last
    /// sound; an error that says how to install them when the packages are missing.
    public static func load() throws -> [(prompt: Prompt, speech: [Int16])] {
        guard FileManager.default.fileExists(atPath: transcript) else {
            throw BenchError("no asterisk prompts here (\(transcript) is missing): \(install)")
        }
        let p = Process()
        let pipe = Pipe()
        p.executableURL = URL(fileURLWithPath: "/bin/zcat")
        p.arguments = [transcript]
        p.standardOutput = pipe
        p.standardError = FileHandle.nullDevice
        try p.run()
        let text = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        var out: [(Prompt, [Int16])] = []
        for prompt in withPauses(transcriptText: text) {
            let path = "\(soundsDirectory)/\(prompt.name).wav"
            guard let data = FileManager.default.contents(atPath: path) else { continue }
            let pcm = try WAVFile.decode([UInt8](data))
            out.append((prompt, EndpointBench.trimmed(try Resampler.convert(pcm.mono(), toRateHz: 16_000).samples)))
        }
        guard !out.isEmpty else { throw BenchError("no WAV prompts under \(soundsDirectory): \(install)") }
        return out
    }

    /// Bench clips of the prompts: each as recorded, and again in `noise` at `snrDb` when given
    /// (the noises cycled), with the bench's 800 ms before and 3 s after.
    public static func clips(_ prompts: [(prompt: Prompt, speech: [Int16])], noisy snrDb: Double?, seed: UInt64) -> [BenchClip] {
        var rng = SplitMix64(seed: seed)
        return prompts.enumerated().map { i, p in
            let noise = snrDb == nil ? nil : BenchNoise.allCases[i % BenchNoise.allCases.count]
            return EndpointBench.clip(parts: [p.speech], gapsMs: [], leadMs: 800, tailMs: 3000, noise: noise, snrDb: snrDb,
                                      peakDbfs: -3 - 17 * Double(rng.next() >> 11) / Double(1 << 53), voice: "asterisk en Allison", rng: &rng)
        }
    }
}
