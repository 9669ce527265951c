// Issue 27, item 7: files a user hands the node are read through libsndfile. Real files made by
// sox and ffmpeg in a temp dir: 24-bit and float WAV, FLAC, 48 kHz stereo; each must come out
// as the same tone at the same level, and what libsndfile cannot open is one clear line.

import Audio
import ClawvoiceCore
import Foundation
import Testing

@Suite struct SoundFileReaderTests {
    /// Peak of `samples` and the number of sign changes (a 440 Hz tone: 880 a second).
    static func shape(_ samples: [Int16]) -> (peak: Int, crossings: Int) {
        var crossings = 0
        for i in 1..<samples.count where (samples[i - 1] < 0) != (samples[i] < 0) { crossings += 1 }
        return (samples.map { abs(Int($0)) }.max() ?? 0, crossings)
    }

    @Test(arguments: [
        (["-b", "24"], "tone24.wav"),
        (["-e", "floating-point", "-b", "32"], "tonefloat.wav"),
        (["-b", "24"], "tone24.flac"),
        (["-b", "16"], "tone16.flac"),
    ])
    func `a one-second 440 Hz tone at half scale reads as one`(_ encoding: [String], _ name: String) throws {
        let dir = try CodecsTempDirectory()
        _ = try CodecFixtures.runTool("sox", ["-n", "-r", "16000", "-c", "1"] + encoding + [dir.file(name), "synth", "1", "sine", "440", "vol", "0.5"])
        let reader = try SoundFileReader(path: dir.file(name))
        #expect(reader.format == AudioFormat(sampleRateHz: 16_000, channels: 1))
        #expect(reader.frameCount == 16_000)
        var samples: [Int16] = []
        while true {
            let block = reader.next(frames: 4000)
            if block.isEmpty { break }
            #expect(block.count <= 4000)
            samples += block
        }
        #expect(samples.count == 16_000)
        let (peak, crossings) = Self.shape(samples)
        #expect(abs(peak - 16_384) < 200, "peak \(peak)")
        #expect(abs(crossings - 880) <= 2, "\(crossings) crossings")
    }

    @Test func `float samples past full scale are clipped, not wrapped`() throws {
        let dir = try CodecsTempDirectory()
        // ffmpeg's sine is at 1/8 of full scale; 16 times that is 2.0, which a float WAV keeps.
        _ = try CodecFixtures.runTool("ffmpeg", ["-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=16000:duration=0.1",
                                                 "-af", "volume=16", "-c:a", "pcm_f32le", dir.file("loud.wav")])
        let pcm = try SoundFileReader.decode(path: dir.file("loud.wav"))
        #expect(pcm.samples.count == 1600)
        // A wrapped sample would flip sign at the crest; clipped ones hold at full scale.
        #expect(pcm.samples.filter { $0 == .max || $0 == .min }.count > 100)
        #expect(Self.shape(pcm.samples).crossings <= 90, "\(Self.shape(pcm.samples).crossings) crossings in 0.1 s of 440 Hz")
    }

    @Test func `48 kHz stereo 24-bit from ffmpeg keeps its rate and channels`() throws {
        let dir = try CodecsTempDirectory()
        _ = try CodecFixtures.runTool("ffmpeg", ["-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=0.5",
                                                 "-ac", "2", "-c:a", "pcm_s24le", dir.file("stereo.wav")])
        let pcm = try SoundFileReader.decode(path: dir.file("stereo.wav"))
        #expect(pcm.format == AudioFormat(sampleRateHz: 48_000, channels: 2))
        #expect(pcm.samples.count == 48_000)
        #expect(Self.shape(pcm.samples).peak > 1000)
    }

    @Test func `what cannot be read is one line, and a long file is refused from its header`() throws {
        let dir = try CodecsTempDirectory()
        let junk = try dir.write(Array("not a sound at all".utf8), to: "junk.wav")
        #expect { _ = try SoundFileReader(path: junk) } throws: { e in
            guard case .unsupported(let why)? = e as? ClipDecodeError else { return false }
            return why.hasPrefix("not audio libsndfile reads") && !why.contains("\n")
        }
        #expect(throws: ClipDecodeError.corrupt(call: "open", reason: "no such file or not readable")) {
            _ = try SoundFileReader(path: dir.file("missing.flac"))
        }
        #expect(throws: ClipDecodeError.empty) { _ = try SoundFileReader(path: try dir.write([], to: "empty.wav")) }
        _ = try CodecFixtures.runTool("sox", ["-n", "-r", "8000", "-c", "1", "-b", "24", dir.file("long.flac"), "synth", "5", "sine", "300"])
        #expect { _ = try SoundFileReader.decode(path: dir.file("long.flac"), maxMilliseconds: 3000) } throws: { e in
            (e as? ClipDecodeError).map { "\($0)" }?.contains("5000 ms long") == true
        }
        _ = try CodecFixtures.runTool("sox", ["-n", "-r", "4000", "-c", "1", dir.file("slow.wav"), "synth", "0.1", "sine", "300"])
        #expect { _ = try SoundFileReader(path: dir.file("slow.wav")) } throws: { e in
            (e as? ClipDecodeError).map { "\($0)" }?.contains("4000 Hz; only 8–192 kHz") == true
        }
    }
}
