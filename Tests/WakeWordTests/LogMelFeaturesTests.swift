import Foundation
import Testing
import Audio
@testable import WakeWord

@Suite struct LogMelFeaturesTests {
    @Test func `features match the numpy reference within 1e-3 in the log domain`() throws {
        let input = try Fixtures.wav("features-input.wav")
        let expected = try Fixtures.json("features.json")["frames"] as! [[Double]]
        let frames = LogMelFeatures().process(input.samples)
        #expect(frames.count == expected.count)
        var worst = 0.0
        for (a, b) in zip(frames, expected) {
            for (x, y) in zip(a, b) { worst = max(worst, abs(Double(x) - y)) }
        }
        #expect(worst < 1e-3, "largest difference \(worst)")
    }

    @Test func `chunk sizes do not change the frames`() throws {
        let samples = try Fixtures.wav("features-input.wav").samples
        let whole = LogMelFeatures().process(samples)
        for chunk in [1, 7, 160, 333, 4000] {
            let extractor = LogMelFeatures()
            var frames: [[Float]] = []
            var i = 0
            while i < samples.count {
                let piece = Array(samples[i..<min(i + chunk, samples.count)])
                frames += extractor.process(piece)
                i += chunk
            }
            #expect(frames == whole, "chunk \(chunk)")
        }
    }

    @Test func `one frame per 10 ms once the first 25 ms window is full`() {
        let f = LogMelFeatures()
        #expect(f.process([Int16](repeating: 0, count: 399)).isEmpty)
        #expect(f.process([0]).count == 1)
        #expect(f.process([Int16](repeating: 0, count: 159)).isEmpty)
        #expect(f.process([0]).count == 1)
        #expect(f.framesEmitted == 2)
        f.reset()
        #expect(f.process([Int16](repeating: 0, count: 16_000)).count == 98)   // 1 + (16000 − 400) / 160
    }

    @Test func `digital silence sits at the log floor`() {
        let frame = LogMelFeatures().process([Int16](repeating: 0, count: 400))[0]
        for v in frame { #expect(abs(Double(v) - log(1e-6)) < 1e-6) }
    }

    @Test func `the real FFT equals a direct DFT`() {
        var rng = SplitMix64(seed: 7)
        let n = 512
        let x = (0..<n).map { _ in Double(Int64(rng.next() % 20001) - 10000) / 10000 }
        let fft = RealFFT(size: n)
        var power = [Double](repeating: 0, count: n / 2 + 1)
        x.withUnsafeBufferPointer { xs in power.withUnsafeMutableBufferPointer { fft.powerSpectrum(xs, into: $0) } }
        for k in [0, 1, 2, 31, 100, 255, 256] {
            var re = 0.0, im = 0.0
            for t in 0..<n {
                let a = -2 * Double.pi * Double(k * t) / Double(n)
                re += x[t] * cos(a); im += x[t] * sin(a)
            }
            let direct = re * re + im * im
            #expect(abs(power[k] - direct) <= 1e-9 * max(1, direct), "bin \(k): \(power[k]) vs \(direct)")
        }
    }

    @Test func `the filterbank covers 60 to 7600 Hz with triangles peaking at 1`() {
        let (starts, weights) = LogMelFeatures.filterbank(.standard)
        #expect(starts.count == 40 && weights.count == 40)
        #expect(starts[0] == 2)                     // 60 Hz lies between bins 1 (31.25 Hz) and 2
        for w in weights {
            #expect(!w.isEmpty)
            #expect(w.allSatisfy { $0 > 0 && $0 <= 1 })
        }
        #expect(starts.last! + weights.last!.count - 1 <= 243)   // 7600 Hz = bin 243.2
    }
}
