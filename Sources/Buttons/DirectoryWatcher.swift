// Owns: the inotify fd that tells the reader when input devices come and go. The only file
// that calls inotify_*. Watches are (re)added on every scan, so a directory that does not
// exist yet (/dev/input/by-id before the first USB device) is picked up once it appears.

import Foundation

/// An inotify instance watching directories for created, deleted and re-permissioned entries.
/// Non-blocking; the reader polls `fd`. Not Sendable: the reader thread owns it.
final class DirectoryWatcher {
    let fd: Int32
    private var directories: [Int32: String] = [:]

    /// IN_CREATE: a device node or by-id link appeared. IN_DELETE: one went away. IN_ATTRIB:
    /// udev changed a node's group or ACL just after creating it, so a node that was not
    /// readable a moment ago may be now. The MOVED pair covers links udev renames into place.
    private static let mask = UInt32(IN_CREATE | IN_DELETE | IN_ATTRIB | IN_MOVED_TO | IN_MOVED_FROM)

    init() throws(ButtonsError) {
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { throw .system(call: "inotify_init1", path: nil, errno: errno) }
        self.fd = fd
    }

    deinit {
        close(fd)
    }

    /// Watches `directory` (a no-op when already watched). False when it does not exist yet.
    @discardableResult
    func watch(_ directory: String) -> Bool {
        let wd = inotify_add_watch(fd, directory, Self.mask)
        guard wd >= 0 else { return false }
        directories[wd] = directory
        return true
    }

    /// Reads every queued event. Returns the full paths of entries that changed, and whether
    /// anything at all happened (an overflow reports no paths but still means "look again").
    func drain() -> (paths: [String], changed: Bool) {
        var paths: [String] = []
        var changed = false
        // Large enough for many events with NAME_MAX names; alignment as inotify(7) asks.
        var buffer = [UInt64](repeating: 0, count: 512)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            changed = true
            buffer.withUnsafeBytes { raw in
                var offset = 0
                let header = MemoryLayout<inotify_event>.size
                while offset + header <= count {
                    let wd = raw.loadUnaligned(fromByteOffset: offset, as: Int32.self)
                    let mask = raw.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
                    let length = Int(raw.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                    let nameBytes = raw[(offset + header)..<min(offset + header + length, count)]
                    let name = String(decoding: nameBytes.prefix { $0 != 0 }, as: UTF8.self)
                    if mask & UInt32(IN_IGNORED) != 0 {
                        // The directory itself went away; `watch` re-adds it when it is back.
                        directories[wd] = nil
                    } else if let directory = directories[wd], !name.isEmpty {
                        paths.append(directory + "/" + name)
                    }
                    offset += header + length
                }
            }
        }
        return (paths, changed)
    }
}
