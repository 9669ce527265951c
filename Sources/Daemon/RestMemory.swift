// RestMemory (issue 25): what the daemon gives back to the system while it rests (no turn, nothing
// playing). Two things: the heap's free pages (malloc_trim), and the pages of the program's own
// code and read-only data that starting up touched (parsing the config, loading models, TLS and
// the gateway handshake) and that resting does not use: a daemon that listens all day holds
// only what listening needs. Dropped pages are clean copies of the executable and its libraries:
// the next use reads them back from the page cache. Only mappings that can hold no private data
// are dropped (read-only, file-backed, private, not one anonymous page in them: RELRO pages that
// relocation wrote are kept), and only the executable's and shared libraries', which stay mapped
// for the life of the process.
//
// `RestTimer` (pure) decides when: a rest that has lasted `restMs` since the last activity.

import Foundation
import WebSocketTransport

#if canImport(Glibc)
import Glibc
import NodeRuntime
#endif

/// When to release: after `restMs` without activity, once per rest.
public struct RestTimer: Sendable, Equatable {
    public let restMs: Int64
    private var lastActivityMs: Int64
    private var released = false

    public init(restMs: Int64, nowMs: Int64) {
        self.restMs = restMs
        lastActivityMs = nowMs
    }

    /// Something happened (a turn, speech, a reply): the rest starts again.
    public mutating func activity(nowMs: Int64) {
        lastActivityMs = nowMs
        released = false
    }

    /// When the release is due (nil: done for this rest).
    public var dueMs: Int64? { released ? nil : lastActivityMs + restMs }

    /// True when the release is due at `nowMs` (and marks it done for this rest); `busy`: a turn
    /// or playback is under way, so it is not a rest (the caller asks again at its next activity).
    public mutating func tick(nowMs: Int64, busy: Bool) -> Bool {
        guard !released, !busy, nowMs >= lastActivityMs + restMs else { return false }
        released = true
        return true
    }
}

public enum RestMemory {
    /// One mapping of /proc/self/smaps.
    struct Mapping: Equatable {
        var start: UInt
        var end: UInt
        var permissions: String
        var inode: UInt64
        var path: String
        var anonymousKB = 0
        var rssKB = 0
    }

    /// The mappings in smaps text.
    static func mappings(smaps text: String) -> [Mapping] {
        var out: [Mapping] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            if line.hasPrefix("Anonymous:"), !out.isEmpty {
                out[out.count - 1].anonymousKB = Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
            } else if line.hasPrefix("Rss:"), !out.isEmpty {
                out[out.count - 1].rssKB = Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
            } else if let first = line.first, first.isHexDigit, let dash = line.firstIndex(of: "-"), !line.contains(":") || line.split(separator: " ").count >= 5 {
                let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
                guard fields.count >= 5, let start = UInt(line[..<dash], radix: 16),
                      let end = UInt(fields[0][fields[0].index(after: fields[0].firstIndex(of: "-")!)...], radix: 16),
                      let inode = UInt64(fields[4]) else { continue }
                let path = fields.count > 5 ? fields[5].trimmingCharacters(in: .whitespaces) : ""
                out.append(Mapping(start: start, end: end, permissions: String(fields[1]), inode: inode, path: path))
            }
        }
        return out
    }

    /// The mappings whose resident pages may be dropped: read-only private mappings of the
    /// executable or a shared library with no private (anonymous) page in them.
    static func droppable(_ maps: [Mapping], executable: String) -> [Mapping] {
        maps.filter { m in
            m.permissions.count == 4 && !m.permissions.contains("w") && m.permissions.hasSuffix("p")
                && m.inode != 0 && m.anonymousKB == 0 && m.rssKB > 0
                && (m.path == executable || m.path.hasSuffix(".so") || m.path.contains(".so."))
        }
    }

    /// Gives free heap pages and the idle program's untouched code pages back; returns the kB of
    /// code pages dropped (what smaps said was resident in them).
    @discardableResult
    public static func release() -> Int {
        ProcessMemory.trim()
        #if os(Linux)
        // Read to the end (procfs files report no size).
        guard let data = FileHandle(forReadingAtPath: "/proc/self/smaps")?.readDataToEndOfFile(),
              let text = String(data: data, encoding: .utf8) else { return 0 }
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? ""
        var dropped = 0
        for m in droppable(mappings(smaps: text), executable: exe) {
            if madvise(UnsafeMutableRawPointer(bitPattern: m.start), Int(m.end - m.start), MADV_DONTNEED) == 0 { dropped += m.rssKB }
        }
        return dropped
        #else
        return 0
        #endif
    }
}
