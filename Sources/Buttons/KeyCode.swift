// Owns: evdev key names <-> codes, through libevdev's own tables (so every name the kernel
// headers know is accepted, and no table is copied into Swift).

import Foundation
internal import CEvdev

/// Evdev key codes (the `code` of an EV_KEY event) and their names.
public enum KeyCode {
    /// Keys that headsets send (Bluetooth AVRCP/HFP buttons, USB headset HID buttons). A device
    /// with any of these is preferred by `auto`.
    public static let headsetKeys: [UInt16] = [
        UInt16(KEY_PLAYPAUSE), UInt16(KEY_PHONE), UInt16(KEY_MEDIA),
        UInt16(KEY_PLAYCD), UInt16(KEY_PAUSECD), UInt16(KEY_MICMUTE),
    ]

    /// Names shown when a key name is not understood.
    public static let exampleNames = ["KEY_PLAYPAUSE", "KEY_PHONE", "KEY_MEDIA", "KEY_MICMUTE", "KEY_F13", "KEY_PAUSE"]

    /// The code for a key name. Accepts libevdev's names ("KEY_F13", "BTN_SIDE"), in any case,
    /// and key names without the "KEY_" prefix ("playpause", "f13"). Nil when unknown.
    public static func code(named name: String) -> UInt16? {
        let upper = name.trimmingCharacters(in: .whitespaces).uppercased()
        guard !upper.isEmpty else { return nil }
        let tries = upper.hasPrefix("KEY_") || upper.hasPrefix("BTN_") ? [upper] : ["KEY_" + upper, upper]
        for candidate in tries {
            let code = libevdev_event_code_from_name(UInt32(EV_KEY), candidate)
            // 0 is KEY_RESERVED and KEY_MAX is a bound, not a key.
            if code > 0, code < KEY_MAX { return UInt16(code) }
        }
        return nil
    }

    /// The code for a key name, or `ButtonsError.unknownKey` listing example names.
    public static func resolve(_ name: String) throws(ButtonsError) -> UInt16 {
        guard let code = code(named: name) else { throw .unknownKey(name) }
        return code
    }

    /// libevdev's name for a key code ("KEY_PLAYPAUSE"), or nil for a code with no name.
    public static func name(of code: UInt16) -> String? {
        guard let cName = libevdev_event_code_get_name(UInt32(EV_KEY), UInt32(code)) else { return nil }
        return String(cString: cName)
    }

    /// The name, or the number when the code has none: for status lines.
    static func label(_ code: UInt16) -> String { name(of: code) ?? "key code \(code)" }
}
