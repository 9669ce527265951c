// Tests for the end-of-turn detector (issue 25): TurnDetector's pitch and pause features on tones
// whose pitch falls or rises, the Endpointer ending a pause on the model's word after its shortest
// pause, the silence window staying the ceiling, speech resuming, and TurnModel's file checks.
// Pure values fed frame by frame: the audio is the clock.

import ClawvoiceCore
import Foundation
import Testing

@Suite struct CaptureTurnDetectorTests {
    /// 20 ms frames of a tone gliding from `from` to `to` Hz (continuous phase) at −12 dBFS.
    static func glide(from: Double, to: Double, frames: Int) -> [PCMBuffer] {
        var phase = 0.0
        let amplitude = pow(10, -12.0 / 20) * 2.0.squareRoot() * 32767
        return (0..<frames).map { j in
            PCMBuffer(format: .voice, samples: (0..<320).map { k in
                let t = Double(j * 320 + k) / Double(frames * 320)
                phase += 2 * .pi * (from + (to - from) * t) / 16_000
                return Int16(amplitude * sin(phase))
            })
        }
    }

    static func quiet(_ n: Int) -> [PCMBuffer] {
        (0..<n).map { j in PCMBuffer(format: .voice, samples: (0..<320).map { Int16(($0 * 7 + j) % 5) - 2 }) }
    }

    /// A model that looks at the pause alone: p = σ(bias + pauseMs / 100).
    static func pauseModel(bias: Double, threshold: Double = 0.5, minimumSilenceMs: Double = 200) -> TurnModel {
        let n = TurnDetector.featureNames.count
        var w = [Double](repeating: 0, count: n)
        w[0] = 1
        return TurnModel(mean: [Double](repeating: 0, count: n), scale: [100] + [Double](repeating: 1, count: n - 1), weights: w,
                         bias: bias, threshold: threshold, minimumSilenceMs: minimumSilenceMs)
    }

    /// Feeds speech (a steady 150 Hz tone), then quiet; returns (frame of the end, reason).
    static func endOf(_ e: inout Endpointer, speech: [PCMBuffer], quietFrames: Int) -> (Int, EndpointReason)? {
        let frames = quiet(25) + speech + quiet(quietFrames)
        for (i, f) in frames.enumerated() {
            if case .endOfUtterance(let r) = e.feed(f) { return (i + 1 - 25 - speech.count, r) }
        }
        return nil
    }

    @Test func `a falling pitch and a rising one give slopes of opposite sign`() {
        func features(_ frames: [PCMBuffer]) -> [Double]? {
            var t = TurnDetector()
            var last: [Double]?
            for f in frames { last = t.feed(f.samples, levelDbfs: -12, speech: true) }
            #expect(last == nil, "no features while speech goes on")
            return t.feed(Self.quiet(1)[0].samples, levelDbfs: -80, speech: false)
        }
        let steady = Self.glide(from: 160, to: 160, frames: 40)
        let falling = try! #require(features(steady + Self.glide(from: 160, to: 100, frames: 15)))
        let rising = try! #require(features(steady + Self.glide(from: 160, to: 240, frames: 15)))
        let names = TurnDetector.featureNames
        let slope = names.firstIndex(of: "pitchSlope")!, end = names.firstIndex(of: "pitchEnd")!
        #expect(falling[slope] < -10, "semitones per second, falling: \(falling[slope])")
        #expect(rising[slope] > 10, "rising: \(rising[slope])")
        #expect(falling[end] < -2 && rising[end] > 2, "end against the median: \(falling[end]), \(rising[end])")
        #expect(falling[names.firstIndex(of: "pauseMs")!] == 20)
        #expect(falling[names.firstIndex(of: "speechMs")!] == 1100)
    }

    @Test func `the model ends the pause once it says so, not before its shortest pause`() {
        // σ(−3 + pause/100) passes 0.5 at 300 ms.
        var e = Endpointer(silenceTimeoutMs: 900, maxCaptureMs: 0)
        e.turnModel = Self.pauseModel(bias: -3)
        let end = Self.endOf(&e, speech: Self.glide(from: 150, to: 150, frames: 30), quietFrames: 100)
        #expect(end?.0 == 15 && end?.1 == .turnEnd, "\(String(describing: end))")
        // Sure at once, but 200 ms of pause first.
        var e2 = Endpointer(silenceTimeoutMs: 900, maxCaptureMs: 0)
        e2.turnModel = Self.pauseModel(bias: 10, minimumSilenceMs: 200)
        let end2 = Self.endOf(&e2, speech: Self.glide(from: 150, to: 150, frames: 30), quietFrames: 100)
        #expect(end2?.0 == 10 && end2?.1 == .turnEnd, "\(String(describing: end2))")
    }

    @Test func `the silence window stays the ceiling`() {
        var never = Endpointer(silenceTimeoutMs: 900, maxCaptureMs: 0)
        never.turnModel = Self.pauseModel(bias: -40)
        let a = Self.endOf(&never, speech: Self.glide(from: 150, to: 150, frames: 30), quietFrames: 100)
        #expect(a?.0 == 45 && a?.1 == .silence, "\(String(describing: a))")
        // The model would wait 300 ms; a 240 ms window (a gateway's silenceTimeoutMs) ends it first.
        var short = Endpointer(silenceTimeoutMs: 240, maxCaptureMs: 0)
        short.turnModel = Self.pauseModel(bias: -3)
        let b = Self.endOf(&short, speech: Self.glide(from: 150, to: 150, frames: 30), quietFrames: 100)
        #expect(b?.0 == 12 && b?.1 == .silence, "\(String(describing: b))")
    }

    @Test func `speech that resumes inside a pause starts the pause again`() {
        var e = Endpointer(silenceTimeoutMs: 900, maxCaptureMs: 0)
        e.turnModel = Self.pauseModel(bias: -3)
        let tone = Self.glide(from: 150, to: 150, frames: 20)
        // 200 ms of pause (the model says 0.27), speech again, then a pause that ends at 300 ms.
        let frames = Self.quiet(25) + tone + Self.quiet(10) + tone + Self.quiet(100)
        var ended: (Int, EndpointReason)?
        for (i, f) in frames.enumerated() {
            if case .endOfUtterance(let r) = e.feed(f) { ended = (i + 1, r); break }
        }
        #expect(ended?.0 == 25 + 20 + 10 + 20 + 15 && ended?.1 == .turnEnd, "\(String(describing: ended))")
    }

    @Test func `a model file for other features is refused in one line`() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("turn-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(throws: TurnModelError.self) { try TurnModel.load(directory: dir) }
        var m = Self.pauseModel(bias: 0)
        m.features = ["pauseMs"]
        try JSONEncoder().encode(m).write(to: URL(fileURLWithPath: dir + "/turn.json"))
        do {
            _ = try TurnModel.load(directory: dir)
            Issue.record("loaded a model for other features")
        } catch {
            #expect("\(error)".contains("this build reads") && !"\(error)".contains("\n"), "\(error)")
        }
    }
}
