// KeyCode: names to codes through libevdev's tables; bad names fail with a line that says what
// to write instead.

import Testing
import Buttons

@Suite struct `Key names` {
    @Test(arguments: [("KEY_F13", 183), ("KEY_PLAYPAUSE", 164), ("KEY_PHONE", 169), ("KEY_MICMUTE", 248),
                      ("BTN_SIDE", 275)])
    func `libevdev names resolve`(name: String, code: Int) {
        #expect(KeyCode.code(named: name) == UInt16(code))
    }

    @Test(arguments: ["key_playpause", "PlayPause", "playpause", " KEY_PLAYPAUSE "])
    func `names are accepted in any case and without the KEY_ prefix`(name: String) {
        #expect(KeyCode.code(named: name) == playPause)
    }

    @Test func `a bare function key name resolves`() {
        #expect(KeyCode.code(named: "f13") == 183)
    }

    @Test(arguments: ["", "KEY_BOGUS", "KEY_", "REL_X", "EV_KEY", "SYN_REPORT", "KEY_MAX", "KEY_RESERVED", "164", "play pause"])
    func `names that are not keys resolve to nothing`(name: String) {
        #expect(KeyCode.code(named: name) == nil)
    }

    @Test func `an unknown name throws an error that lists example names`() throws {
        let error = #expect(throws: ButtonsError.self) { try KeyCode.resolve("KEY_BOGUS") }
        #expect(error == .unknownKey("KEY_BOGUS"))
        let line = try #require(error).description
        #expect(line.contains("\"KEY_BOGUS\""))
        #expect(line.contains("ptt.key"))
        for example in ["KEY_PLAYPAUSE", "KEY_PHONE", "KEY_F13"] { #expect(line.contains(example)) }
    }

    @Test func `codes have names`() {
        #expect(KeyCode.name(of: playPause) == "KEY_PLAYPAUSE")
        #expect(KeyCode.name(of: 183) == "KEY_F13")
        #expect(KeyCode.name(of: 0xFFFF) == nil)
    }

    @Test func `headset keys are the media and phone keys`() {
        let names = KeyCode.headsetKeys.compactMap { KeyCode.name(of: $0) }
        #expect(Set(names) == ["KEY_PLAYPAUSE", "KEY_PHONE", "KEY_MEDIA", "KEY_PLAYCD", "KEY_PAUSECD", "KEY_MICMUTE"])
    }
}
