// Owns: open input device files and the libevdev calls on them. The only file that opens
// /dev/input nodes or calls libevdev on a device fd. Errors name the call and keep errno.

import Foundation
internal import CEvdev

/// What libevdev says about one device.
struct EvdevCapabilities: Sendable, Equatable {
    /// The kernel's device name ("Jabra Evolve 65", "AirPods Pro (AVRCP)").
    var name: String
    /// The device can send the push-to-talk key.
    var hasKey: Bool
    /// The device can send a headset key (`KeyCode.headsetKeys`).
    var hasHeadsetKeys: Bool
}

/// Which file a path named when it was looked at: a node re-created by the kernel (a headset
/// reconnecting) or a fifo re-made by a test differs in inode or change time, so the reader can
/// tell "the same dead node" from "a new device at the same path".
struct FileIdentity: Sendable, Equatable {
    var device: UInt64
    var inode: UInt64
    var changeSeconds: Int
    var changeNanoseconds: Int

    /// stat(2) of the path (following symlinks), or nil when it does not exist.
    init?(path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        changeSeconds = info.st_ctim.tv_sec
        changeNanoseconds = info.st_ctim.tv_nsec
    }
}

/// One open input device file (non-blocking, close-on-exec). Closes in deinit. Not Sendable:
/// the reader thread owns every open device.
final class InputDeviceFile {
    let fd: Int32
    /// The path that was opened (symlinks already resolved by the caller).
    let path: String

    /// Opens read-only and non-blocking, so a read on a quiet device returns EAGAIN instead of
    /// stalling the reader thread.
    init(path: String) throws(ButtonsError) {
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { throw .system(call: "open", path: path, errno: errno) }
        self.fd = fd
        self.path = path
    }

    deinit {
        // There is nothing useful to do if close fails (EINTR leaves it closed on Linux).
        close(fd)
    }

    /// What the device can send. Fails with ENOTTY for files that are not evdev nodes (a fifo,
    /// a regular file), and ENODEV for a node whose device is already gone.
    func probe(keyCode: UInt16) throws(ButtonsError) -> EvdevCapabilities {
        var handle: OpaquePointer?
        let rc = libevdev_new_from_fd(fd, &handle)
        guard rc == 0, let handle else { throw .system(call: "libevdev_new_from_fd", path: path, errno: -rc) }
        defer { libevdev_free(handle) }
        let name = libevdev_get_name(handle).map { String(cString: $0) } ?? ""
        let hasKey = libevdev_has_event_code(handle, UInt32(EV_KEY), UInt32(keyCode)) == 1
        let hasHeadsetKeys = KeyCode.headsetKeys.contains {
            libevdev_has_event_code(handle, UInt32(EV_KEY), UInt32($0)) == 1
        }
        return EvdevCapabilities(name: name, hasKey: hasKey, hasHeadsetKeys: hasHeadsetKeys)
    }

    /// Whether the key is down right now (libevdev reads the kernel's key bitmap with
    /// EVIOCGKEY), or nil when that cannot be asked (not an evdev node, device gone). Used after
    /// SYN_DROPPED, when the kernel threw away events and a release may be among them.
    func isKeyDown(_ keyCode: UInt16) -> Bool? {
        var handle: OpaquePointer?
        guard libevdev_new_from_fd(fd, &handle) == 0, let handle else { return nil }
        defer { libevdev_free(handle) }
        return libevdev_get_event_value(handle, UInt32(EV_KEY), UInt32(keyCode)) != 0
    }

    /// The outcome of one read(2).
    enum ReadResult {
        /// Bytes arrived (never empty).
        case bytes(ArraySlice<UInt8>)
        /// Nothing to read right now (EAGAIN).
        case wouldBlock
        /// End of stream: a recorded file or a fifo whose writer closed.
        case endOfStream
        /// The device is gone (ENODEV) or reading failed for good; the errno.
        case failed(Int32)
    }

    /// Reads what is there into `buffer`, retrying EINTR.
    func read(into buffer: inout [UInt8]) -> ReadResult {
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count > 0 { return .bytes(buffer[0..<count]) }
            if count == 0 { return .endOfStream }
            let code = errno
            if code == EINTR { continue }
            if code == EAGAIN || code == EWOULDBLOCK { return .wouldBlock }
            return .failed(code)
        }
    }
}
