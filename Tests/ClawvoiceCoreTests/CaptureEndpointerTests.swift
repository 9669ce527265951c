// Tests for Endpointer: calibration of the noise floor, speech onset, the silence timeout counted
// in frames and the hard cap (real espeak-ng speech against −40 dBFS noise: AudioTests).

import ClawvoiceCore
import Foundation
import Testing

@Suite struct CaptureEndpointerTests {
    /// Deterministic noise: a fixed-seed generator, so every run feeds the same samples.
    struct Noise {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        mutating func next() -> Double {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Double(state >> 11) / Double(1 << 53) * 2 - 1  // uniform in -1…1, RMS 1/√3
        }

        /// One 20 ms frame of white noise at `dbfs` RMS.
        mutating func frame(dbfs: Double) -> PCMBuffer {
            let rms = pow(10, dbfs / 20)
            let scale = rms * 3.0.squareRoot() * 32767
            return PCMBuffer(format: .voice, samples: (0..<320).map { _ in Int16(clamping: Int((next() * scale).rounded())) })
        }
    }

    /// One 20 ms frame of a 300 Hz tone at `dbfs` RMS (a stand-in for a loud vowel).
    static func loud(dbfs: Double = -12) -> PCMBuffer {
        let amplitude: Double = pow(10, dbfs / 20) * 2.0.squareRoot() * 32767
        return PCMBuffer(format: .voice, samples: (0..<320).map { (i: Int) -> Int16 in Int16(amplitude * sin(2 * Double.pi * 300 * Double(i) / 16_000)) })
    }

    /// Feeds `frames` and returns each event with the 1-based index of the frame that caused it.
    static func run(_ endpointer: inout Endpointer, _ frames: [PCMBuffer]) -> [(Int, EndpointEvent)] {
        var events: [(Int, EndpointEvent)] = []
        for (i, frame) in frames.enumerated() {
            if let event = endpointer.feed(frame) { events.append((i + 1, event)) }
        }
        return events
    }

    @Test func `the floor is the mean of the quieter half of the first 22 frames`() {
        var noise = Noise()
        var endpointer = Endpointer()
        #expect(endpointer.thresholdDbfs == -30, "before calibration")
        for _ in 0..<11 { _ = endpointer.feed(noise.frame(dbfs: -60)) }
        for _ in 0..<10 { _ = endpointer.feed(noise.frame(dbfs: -10)) }
        #expect(endpointer.noiseFloorDbfs == nil)
        _ = endpointer.feed(noise.frame(dbfs: -10))
        let floor = try! #require(endpointer.noiseFloorDbfs)
        #expect(abs(floor - -60) < 1, "floor \(floor)")
        #expect(endpointer.thresholdDbfs == -35, "floor + 10 dB clamps up to the minimum")
    }

    @Test(arguments: [(-50.0, -35.0), (-40.0, -30.0), (-28.0, -20.0), (-15.0, -20.0)])
    func `the threshold is floor plus margin, clamped`(noiseDbfs: Double, expected: Double) {
        var noise = Noise()
        var endpointer = Endpointer()
        for _ in 0..<22 { _ = endpointer.feed(noise.frame(dbfs: noiseDbfs)) }
        #expect(abs(endpointer.thresholdDbfs - expected) < 0.5, "floor \(endpointer.noiseFloorDbfs ?? .nan)")
    }

    @Test func `speech then 900 ms of quiet ends the utterance on exactly the 45th quiet frame`() {
        var noise = Noise()
        var endpointer = Endpointer()
        let calibration = (0..<22).map { _ in noise.frame(dbfs: -50) }
        let speech = (0..<10).map { _ in Self.loud() }
        let quiet = (0..<60).map { _ in noise.frame(dbfs: -50) }
        let events = Self.run(&endpointer, calibration + speech + quiet)
        #expect(events.count == 2)
        #expect(events.first?.0 == 22 + 2 && events.first?.1 == .speechStarted, "two loud frames in a row")
        let quietFrames = Int((900.0 / 20).rounded(.up))
        #expect(events.last?.0 == 22 + 10 + quietFrames && events.last?.1 == .endOfUtterance(reason: .silence))
        #expect(endpointer.speechHeard && endpointer.isFinished)
        #expect(endpointer.feed(Self.loud()) == nil, "nothing after the end")
    }

    @Test func `a timeout that is not a whole number of frames rounds up`() {
        var noise = Noise()
        var endpointer = Endpointer(silenceTimeoutMs: 910)
        let frames = (0..<22).map { _ in noise.frame(dbfs: -50) } + [Self.loud(), Self.loud()]
            + (0..<60).map { _ in noise.frame(dbfs: -50) }
        let events = Self.run(&endpointer, frames)
        #expect(events.last?.0 == 24 + 46)
    }

    @Test func `a loud frame during the countdown starts it again`() {
        var noise = Noise()
        var endpointer = Endpointer()
        var frames = (0..<22).map { _ in noise.frame(dbfs: -50) } + [Self.loud(), Self.loud()]
        frames += (0..<40).map { _ in noise.frame(dbfs: -50) } + [Self.loud()] + (0..<60).map { _ in noise.frame(dbfs: -50) }
        let events = Self.run(&endpointer, frames)
        #expect(events.last?.0 == 24 + 40 + 1 + 45)
    }

    @Test func `quiet alone never ends with silence, only at the cap`() {
        var noise = Noise()
        var endpointer = Endpointer()
        let events = Self.run(&endpointer, (0..<700).map { _ in noise.frame(dbfs: -50) })
        #expect(events.count == 1)
        #expect(events.first?.0 == 12_000 / 20 && events.first?.1 == .endOfUtterance(reason: .maxDuration))
        #expect(!endpointer.speechHeard)
    }

    @Test func `the cap ends an utterance that is still going`() {
        var noise = Noise()
        var endpointer = Endpointer(maxCaptureMs: 2_000)
        let frames = (0..<22).map { _ in noise.frame(dbfs: -50) } + (0..<200).map { _ in Self.loud() }
        let events = Self.run(&endpointer, frames)
        #expect(events.map(\.1) == [.speechStarted, .endOfUtterance(reason: .maxDuration)])
        #expect(events.last?.0 == 100)
    }

    @Test func `a single click is not speech`() {
        var noise = Noise()
        var endpointer = Endpointer()
        var frames = (0..<22).map { _ in noise.frame(dbfs: -50) }
        for _ in 0..<5 { frames += [Self.loud(dbfs: -6)] + (0..<10).map { _ in noise.frame(dbfs: -50) } }
        #expect(Self.run(&endpointer, frames).isEmpty)
        #expect(!endpointer.speechHeard)
    }

    @Test func `-40 dBFS noise is not speech, even after calibrating on digital silence`() {
        var noise = Noise()
        var endpointer = Endpointer()
        let silence = PCMBuffer(format: .voice, samples: [Int16](repeating: 0, count: 320))
        let frames = Array(repeating: silence, count: 22) + (0..<300).map { _ in noise.frame(dbfs: -40) }
        #expect(Self.run(&endpointer, frames).isEmpty)
        #expect(endpointer.thresholdDbfs == -35)
    }
}
