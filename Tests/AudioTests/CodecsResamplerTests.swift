// Tests for Resampler (speexdsp) and G711 µ-law: lengths and pitch survive resampling, the
// µ-law code table matches ITU-T G.711 / G.191, and sox's u-law agrees within one code.
import ClawvoiceCore
import Foundation
import Testing
@testable import Audio

@Suite struct ResamplerTests {
    @Test func `one second at 22050 Hz becomes one second at 16 kHz`() throws {
        let resampler = try Resampler(from: 22_050, to: 16_000, channels: 1)
        let input = CodecFixtures.tone(hz: 440, milliseconds: 1000, rateHz: 22_050).samples
        var output: [Int16] = []
        for start in stride(from: 0, to: input.count, by: 441) {
            output += resampler.process(Array(input[start..<min(start + 441, input.count)]))
        }
        output += resampler.flush()
        #expect(abs(output.count - 16_000) <= 32, "\(output.count) samples")
        print("resampler 22050 → 16000: \(output.count) samples from \(input.count)")
    }

    @Test(arguments: [(48_000, 16_000), (16_000, 8_000), (24_000, 16_000), (8_000, 48_000), (44_100, 24_000)])
    func `a 1 kHz tone keeps its frequency`(_ from: Int, _ to: Int) throws {
        let input = CodecFixtures.tone(hz: 1000, milliseconds: 1000, rateHz: from)
        let output = try Resampler.convert(input, toRateHz: to)
        #expect(output.format.sampleRateHz == to)
        #expect(abs(output.frameCount - to) <= 2)
        let crossings = CodecFixtures.zeroCrossings(output.samples)
        #expect(abs(crossings - 2000) <= 8, "\(from) → \(to): \(crossings) zero crossings")
        #expect(abs(output.rms - input.rms) < 0.02)
    }

    @Test func `stereo keeps its channels apart`() throws {
        var pcm = CodecFixtures.tone(hz: 500, milliseconds: 200, rateHz: 48_000, channels: 2)
        for i in stride(from: 1, to: pcm.samples.count, by: 2) { pcm.samples[i] = 0 }   // right silent
        let out = try Resampler.convert(pcm, toRateHz: 16_000)
        let right = stride(from: 1, to: out.samples.count, by: 2).map { out.samples[$0] }
        let left = stride(from: 0, to: out.samples.count, by: 2).map { out.samples[$0] }
        #expect(right.allSatisfy { abs(Int($0)) <= 2 })
        #expect(PCMBuffer(format: .voice, samples: left).rms > 0.3)
    }

    @Test func `flush resets the resampler for the next stream`() throws {
        let resampler = try Resampler(from: 16_000, to: 8_000, channels: 1)
        for _ in 0..<2 {
            let out = resampler.process(CodecFixtures.tone(hz: 300, milliseconds: 500, rateHz: 16_000).samples) + resampler.flush()
            #expect(out.count == 4000)
        }
    }

    @Test func `impossible rates and channel counts are refused`() {
        #expect(throws: AudioCodecError.self) { _ = try Resampler(from: 0, to: 16_000, channels: 1) }
        #expect(throws: AudioCodecError.self) { _ = try Resampler(from: 16_000, to: 8_000, channels: 0) }
        #expect(throws: AudioCodecError.self) { _ = try Resampler(from: 16_000, to: 8_000, channels: 1, quality: 11) }
    }
}

@Suite struct G711Tests {
    @Test func `known code words match the G.711 table`() {
        #expect(G711.muLawByte(0) == 0xFF)
        #expect(G711.muLawByte(-1) == 0x7F)
        #expect(G711.muLawByte(32767) == 0x80)
        #expect(G711.muLawByte(-32768) == 0x00)
        #expect(G711.muLawByte(32124) == 0x80)
        #expect(G711.muLawSample(0x80) == 32124)
        #expect(G711.muLawSample(0x00) == -32124)
        #expect(G711.muLawSample(0xFF) == 0)
        #expect(G711.muLawSample(0x7F) == 0)
        #expect(G711.muLawSample(0xF0) == 120)   // 0xF0: segment 0, step 8
    }

    @Test func `decoding a code and encoding it again gives the same code`() {
        for code in 0...255 {
            let back = G711.muLawByte(G711.muLawSample(UInt8(code)))
            // 0x7F is negative zero and comes back as 0xFF.
            #expect(back == UInt8(code) || (code == 0x7F && back == 0xFF), "code \(code)")
        }
    }

    @Test func `encode then decode stays within one µ-law step`() {
        for value in stride(from: -32768, through: 32767, by: 7) {
            let sample = Int16(value)
            let decoded = Int(G711.muLaw(decode: G711.muLaw(encode: [sample]))[0])
            let magnitude = abs(value)
            // The step doubles per segment: 8 near zero, 1024 in the top segment (biased by 132).
            let step = 1 << (Int(log2(Double(magnitude + 132))) - 4)
            #expect(abs(decoded - value) <= step, "sample \(value) → \(decoded)")
        }
    }

    @Test func `sox u-law agrees with ours within one code`() throws {
        let dir = try CodecsTempDirectory()
        var samples = (Int(Int16.min)...Int(Int16.max)).map { Int16($0) }
        samples += CodecFixtures.tone(hz: 300, milliseconds: 200, rateHz: 8_000, amplitude: 0.9).samples
        let input = try dir.write(PCMBuffer(format: AudioFormat(sampleRateHz: 8_000, channels: 1), samples: samples).bytes, to: "in.raw")
        // -D: no dither, so sox maps each sample deterministically.
        try CodecFixtures.runTool("sox", ["-D", "-t", "raw", "-e", "signed", "-b", "16", "-r", "8000", "-c", "1", input,
                            "-t", "raw", "-e", "u-law", "-r", "8000", "-c", "1", dir.file("out.ul")])
        let theirs = try dir.read("out.ul")
        let ours = G711.muLaw(encode: samples)
        #expect(theirs.count == ours.count)
        // sox rounds to 14 bits where G.191 truncates, so codes may differ by one at segment
        // boundaries, and sox sends -1 and -2 to +0 (0xFF) where G.191 has -0 (0x7F).
        var differing = 0, signedZero = 0, worstGap = 0
        for i in 0..<min(theirs.count, ours.count) where theirs[i] != ours[i] {
            differing += 1
            if Set([theirs[i], ours[i]]) == [0x7F, 0xFF] { signedZero += 1; continue }
            worstGap = max(worstGap, abs(Int(G711.muLawSample(theirs[i])) - Int(G711.muLawSample(ours[i]))))
            #expect(abs(Int(theirs[i]) - Int(ours[i])) <= 1, "sample \(samples[i]): sox \(theirs[i]) ours \(ours[i])")
        }
        print("sox u-law vs ours: \(differing) of \(ours.count) codes differ (\(signedZero) are ±0), worst decoded gap \(worstGap)")
        #expect(Double(differing) / Double(ours.count) < 0.01)
    }
}
