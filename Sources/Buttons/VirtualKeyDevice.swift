// Owns: a uinput virtual key device: the kernel makes a real /dev/input/eventN for it, so
// discovery, hot-plug and reading are exercised end to end. The only file that calls
// libevdev_uinput_*. Used by tests; needs write access to /dev/uinput.

import Foundation
internal import CEvdev

/// A virtual input device that can send the given keys. Created in `init`, destroyed in
/// `deinit` (its /dev/input node disappears, as when a headset disconnects). Not Sendable: one
/// owner sends its events.
public final class VirtualKeyDevice {
    /// The kernel device name, as libevdev_get_name reports it to readers.
    public let name: String
    private let device: OpaquePointer
    private let uinput: OpaquePointer

    /// Whether /dev/uinput exists and may be written: the condition for making a device.
    public static var isAvailable: Bool {
        FileManager.default.isWritableFile(atPath: "/dev/uinput")
    }

    /// - Parameters:
    ///   - name: the device name readers see.
    ///   - keys: EV_KEY codes it can send (`KeyCode.code(named:)`).
    /// - Throws: `.system(call: "libevdev_uinput_create_from_device", …)` without /dev/uinput
    ///   (ENOENT) or without permission to write it (EACCES).
    public init(name: String, keys: [UInt16]) throws(ButtonsError) {
        guard let device = libevdev_new() else { throw .system(call: "libevdev_new", path: nil, errno: ENOMEM) }
        libevdev_set_name(device, name)
        libevdev_set_id_bustype(device, Int32(BUS_VIRTUAL))
        libevdev_enable_event_type(device, UInt32(EV_KEY))
        for key in keys {
            libevdev_enable_event_code(device, UInt32(EV_KEY), UInt32(key), nil)
        }
        var uinput: OpaquePointer?
        let rc = libevdev_uinput_create_from_device(device, CEvdev_uinput_open_managed(), &uinput)
        guard rc == 0, let uinput else {
            libevdev_free(device)
            throw .system(call: "libevdev_uinput_create_from_device", path: "/dev/uinput", errno: -rc)
        }
        self.name = name
        self.device = device
        self.uinput = uinput
    }

    deinit {
        // Destroying removes the kernel device and its /dev/input node.
        libevdev_uinput_destroy(uinput)
        libevdev_free(device)
    }

    /// The /dev/input/eventN node the kernel made, when libevdev can tell (it looks in sysfs).
    public var devnode: String? {
        libevdev_uinput_get_devnode(uinput).map { String(cString: $0) }
    }

    /// Sends one key event and a SYN_REPORT: value 1 down, 0 up, 2 repeat.
    public func send(key: UInt16, value: Int32) throws(ButtonsError) {
        try write(type: UInt16(EV_KEY), code: key, value: value)
        try write(type: UInt16(EV_SYN), code: UInt16(SYN_REPORT), value: 0)
    }

    /// Presses (down + report).
    public func press(_ key: UInt16) throws(ButtonsError) { try send(key: key, value: 1) }

    /// Releases (up + report).
    public func release(_ key: UInt16) throws(ButtonsError) { try send(key: key, value: 0) }

    private func write(type: UInt16, code: UInt16, value: Int32) throws(ButtonsError) {
        let rc = libevdev_uinput_write_event(uinput, UInt32(type), UInt32(code), value)
        guard rc == 0 else { throw .system(call: "libevdev_uinput_write_event", path: devnode, errno: -rc) }
    }
}
