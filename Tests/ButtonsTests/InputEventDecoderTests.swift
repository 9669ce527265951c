// InputEventDecoder: bytes in, events and edges out, in any slicing; nothing blows up on junk.

import ClawvoiceCore
import Foundation
import Testing
import Buttons

/// A small seeded generator (SplitMix64), so a failing slicing or junk test can be rerun.
private struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

private func seed() -> UInt64 {
    if let text = ProcessInfo.processInfo.environment["BUTTONS_TEST_SEED"], let value = UInt64(text) { return value }
    return UInt64.random(in: 1...UInt64.max)
}

@Suite struct `Input event decoding` {
    @Test func `records are 24 bytes on this platform, as the fixture assumes`() {
        #expect(InputEvent.byteCount == 24)
    }

    @Test func `the headset fixture decodes to the recorded events`() throws {
        let bytes = try HeadsetFixture.bytes()
        #expect(bytes.count == HeadsetFixture.events.count * InputEvent.byteCount)
        var decoder = InputEventDecoder(keyCode: playPause)
        let events = decoder.decode(bytes)
        #expect(events == HeadsetFixture.events)
        #expect(decoder.pendingByteCount == 0)
    }

    @Test func `encoding the fixture's events reproduces the file byte for byte`() throws {
        #expect(encode(HeadsetFixture.events) == (try HeadsetFixture.bytes()))
    }

    @Test func `the fixture's edges are a press with repeats, a release, and a second press and release`() throws {
        var decoder = InputEventDecoder(keyCode: playPause)
        #expect(decoder.edges(from: try HeadsetFixture.bytes()) == HeadsetFixture.edges)
    }

    @Test func `the volume key in the fixture is ignored, and is found when it is the configured key`() throws {
        var decoder = InputEventDecoder(keyCode: volumeUp)
        #expect(decoder.edges(from: try HeadsetFixture.bytes()) == [.down, .up])
    }

    @Test func `feeding one byte at a time gives the same events`() throws {
        var decoder = InputEventDecoder(keyCode: playPause)
        var events: [InputEvent] = []
        for byte in try HeadsetFixture.bytes() {
            events += decoder.decode([byte])
            #expect(decoder.pendingByteCount < InputEvent.byteCount)
        }
        #expect(events == HeadsetFixture.events)
        #expect(decoder.pendingByteCount == 0)
    }

    @Test func `feeding random slices gives the same events`() throws {
        let seed = seed()
        var random = SeededGenerator(state: seed)
        let bytes = try HeadsetFixture.bytes()
        for _ in 0..<50 {
            var decoder = InputEventDecoder(keyCode: playPause)
            var edges: [KeyEdge] = []
            var offset = 0
            while offset < bytes.count {
                let length = Int.random(in: 0...60, using: &random)
                let end = min(offset + length, bytes.count)
                edges += decoder.edges(from: bytes[offset..<end])
                offset = end
            }
            #expect(edges == HeadsetFixture.edges, "rerun with BUTTONS_TEST_SEED=\(seed)")
        }
    }

    @Test func `a truncated tail is held until the rest arrives`() throws {
        let bytes = try HeadsetFixture.bytes()
        var decoder = InputEventDecoder(keyCode: playPause)
        let cut = bytes.count - 10
        let first = decoder.decode(bytes[..<cut])
        #expect(first == Array(HeadsetFixture.events.dropLast()))
        #expect(decoder.pendingByteCount == InputEvent.byteCount - 10)
        #expect(decoder.decode(bytes[cut...]) == [HeadsetFixture.events.last!])
        #expect(decoder.pendingByteCount == 0)
    }

    @Test func `a garbage tail is held, not decoded and not a crash`() throws {
        var decoder = InputEventDecoder(keyCode: playPause)
        let junk: [UInt8] = [0xFF, 0x00, 0x13, 0x37, 0xDE, 0xAD, 0xBE, 0xEF, 0x01, 0x02, 0x03]
        #expect(decoder.edges(from: try HeadsetFixture.bytes() + junk) == HeadsetFixture.edges)
        #expect(decoder.pendingByteCount == junk.count)
        decoder.reset()
        #expect(decoder.pendingByteCount == 0)
    }

    @Test func `random junk decodes without crashing and only exact key events become edges`() {
        let seed = seed()
        var random = SeededGenerator(state: seed)
        for _ in 0..<200 {
            let count = Int.random(in: 0...400, using: &random)
            var bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &random) }
            // Plant a real press now and then, so the edge path is exercised too.
            if Bool.random(using: &random) { bytes += InputEvent.key(playPause, value: 1).encoded() }
            var decoder = InputEventDecoder(keyCode: playPause)
            var events: [InputEvent] = []
            var offset = 0
            while offset < bytes.count {
                let end = min(offset + Int.random(in: 1...50, using: &random), bytes.count)
                events += decoder.decode(bytes[offset..<end])
                offset = end
            }
            #expect(events.count == bytes.count / InputEvent.byteCount, "rerun with BUTTONS_TEST_SEED=\(seed)")
            #expect(decoder.pendingByteCount == bytes.count % InputEvent.byteCount)
            let expected = events.filter { $0.type == InputEvent.keyType && $0.code == playPause && (0...2).contains($0.value) }
            #expect(events.compactMap { decoder.edge(for: $0) }.count == expected.count, "rerun with BUTTONS_TEST_SEED=\(seed)")
        }
    }

    @Test(arguments: [Int32(3), -1, 255, Int32.max, Int32.min])
    func `key values other than 0, 1 and 2 are not edges`(value: Int32) {
        let decoder = InputEventDecoder(keyCode: playPause)
        #expect(decoder.edge(for: .key(playPause, value: value)) == nil)
    }

    @Test func `other event types with the key's code are not edges`() {
        let decoder = InputEventDecoder(keyCode: playPause)
        #expect(decoder.edge(for: InputEvent(type: mscType, code: playPause, value: 1)) == nil)
        #expect(decoder.edge(for: InputEvent(type: InputEvent.synType, code: playPause, value: 1)) == nil)
        #expect(decoder.edge(for: .key(playPause, value: 1)) == .down)
        #expect(decoder.edge(for: .key(playPause, value: 0)) == .up)
        #expect(decoder.edge(for: .key(playPause, value: 2)) == .repeat)
    }

    @Test func `events describe themselves with libevdev names`() {
        #expect(InputEvent.key(playPause, value: 1).description == "EV_KEY KEY_PLAYPAUSE 1")
        #expect(InputEvent.report().description == "EV_SYN SYN_REPORT 0")
    }

    @Test func `timestamps survive encoding to microseconds`() {
        let event = InputEvent.key(playPause, value: 1, time: .seconds(1_737_264_002) + .microseconds(350_001))
        var decoder = InputEventDecoder(keyCode: playPause)
        #expect(decoder.decode(event.encoded()) == [event])
    }
}
