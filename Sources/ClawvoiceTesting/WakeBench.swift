// WakeBench: what always-on wake detection costs, as CPU seconds per second of audio for the
// whole pipeline (the embedding front end once, every head on every 80 ms step), measured on this thread.

import Audio
import ClawvoiceCore
import Foundation
public import WakeWord

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// CPU cost of the detector, for clawvoice-bench.
public enum WakeBench {
    /// Runs features plus every model in `phrases` over `secondsOfAudio` of espeak-ng speech
    /// with a little noise, fed in 20 ms chunks as the capture delivers them, and returns the
    /// audio duration and the thread CPU time it took. `cpuSeconds / secondsOfAudio` is the
    /// fraction of one core. Throws when a model is missing or espeak-ng cannot speak.
    public static func measure(modelsDirectory: String, phrases: [String] = WakeModelCatalog.defaultPhrases,
                               secondsOfAudio: Double = 600) throws -> (secondsOfAudio: Double, cpuSeconds: Double) {
        let (models, missing) = try WakeModelCatalog(directory: modelsDirectory).load(phrases)
        guard missing.isEmpty else { throw WakeWordError.noModels(missing) }
        let clip = try benchAudio()
        let total = Int(secondsOfAudio * 16_000)
        let detector = WakeDetector(models: models)
        let chunk = 320
        let start = threadCPUSeconds()
        var fed = 0
        var wakes = 0
        clip.withUnsafeBufferPointer { audio in
            var offset = 0
            while fed < total {
                let n = min(chunk, audio.count - offset, total - fed)
                wakes += detector.process(UnsafeBufferPointer(rebasing: audio[offset..<offset + n])).count
                offset = (offset + n) % audio.count
                fed += n
            }
        }
        let cpu = threadCPUSeconds() - start
        _ = wakes
        return (Double(fed) / 16_000, cpu)
    }

    /// The bench audio, `secondsOfAudio` of it as one 16 kHz mono WAV (for running the same
    /// audio through another detector, e.g. pyopen-wakeword in models/training/bench_oww.py).
    public static func writeBenchAudio(to path: String, secondsOfAudio: Double) throws {
        let clip = try benchAudio()
        let total = Int(secondsOfAudio * 16_000)
        let samples = (0..<total).map { clip[$0 % clip.count] }
        let wav = WAVFile.encode(PCMBuffer(format: .voice, samples: samples))
        guard FileManager.default.createFile(atPath: path, contents: Data(wav)) else {
            throw WakeWordError.unreadable(path: path, reason: "cannot write the bench audio")
        }
    }

    /// About 30 s of ordinary speech with low-level noise, 16 kHz.
    static func benchAudio() throws -> [Int16] {
        let text = """
        The weather today is mild with a light breeze from the west. We walked to the market, \
        bought some bread and apples, and came home before the rain started. Later in the evening \
        the neighbours came over for tea and we talked about the garden and the new bicycle path.
        """
        let speech = try SpeechSynthesizer.synthesize(text)
        let pcm = try Resampler.convert(speech, toRateHz: 16_000)
        var rng = SplitMix64(seed: 42)
        return pcm.samples.map { s in
            let noise = Int32(truncatingIfNeeded: rng.next() % 401) - 200
            return Int16(clamping: Int32(s) + noise)
        }
    }

    static func threadCPUSeconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
