// Tests for PreRollBuffer: capacity from milliseconds (clamped to 0–2000), oldest frames dropped
// first, drain in order.

import Audio
import ClawvoiceCore
import Testing

@Suite struct CapturePreRollBufferTests {
    static func frame(_ marker: Int16) -> PCMBuffer {
        PCMBuffer(format: .voice, samples: [Int16](repeating: marker, count: 320))
    }

    @Test(arguments: [(0, 0), (20, 1), (50, 3), (500, 25), (2_000, 100), (5_000, 100), (-10, 0)])
    func `capacity comes from milliseconds, rounded up and clamped`(milliseconds: Int, frames: Int) {
        #expect(PreRollBuffer(milliseconds: milliseconds).capacityFrames == frames)
    }

    @Test func `a full buffer keeps the newest frames, oldest first`() {
        var buffer = PreRollBuffer(milliseconds: 100)
        for i in 1...12 { buffer.append(Self.frame(Int16(i))) }
        #expect(buffer.count == 5)
        #expect(buffer.durationMilliseconds == 100)
        let drained = buffer.drain()
        #expect(drained.map { $0.samples[0] } == [8, 9, 10, 11, 12])
        #expect(buffer.isEmpty)
        #expect(buffer.drain().isEmpty)
    }

    @Test func `a partly filled buffer drains what it has, and refills after`() {
        var buffer = PreRollBuffer(milliseconds: 300)
        buffer.append(Self.frame(1))
        buffer.append(Self.frame(2))
        #expect(buffer.drain().map { $0.samples[0] } == [1, 2])
        for i in 3...20 { buffer.append(Self.frame(Int16(i))) }
        #expect(buffer.drain().map { $0.samples[0] } == Array(6...20).map(Int16.init))
    }

    @Test func `zero pre-roll keeps nothing`() {
        var buffer = PreRollBuffer(milliseconds: 0)
        buffer.append(Self.frame(1))
        #expect(buffer.isEmpty)
        #expect(buffer.drain().isEmpty)
    }
}
