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

import ClawvoiceCore
import Foundation
import GatewayCrypto
import WebSocketTransport

import NodeRuntime
#if canImport(Glibc)
import Glibc
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
        var text = text
        return text.withUTF8 { mappings(smaps: $0) }
    }

    /// The mappings in smaps bytes. Byte-level: the release runs once per rest, and the String
    /// splitting this replaced cost the idle daemon ~35 ms of CPU each time (perf, issue 25).
    static func mappings(smaps bytes: UnsafeBufferPointer<UInt8>) -> [Mapping] {
        var out: [Mapping] = []
        var lineStart = 0
        while lineStart < bytes.count {
            var lineEnd = lineStart
            while lineEnd < bytes.count && bytes[lineEnd] != 0x0A { lineEnd += 1 }
            let line = UnsafeBufferPointer(rebasing: bytes[lineStart..<lineEnd])
            if let m = header(line) {
                out.append(m)
            } else if !out.isEmpty {
                if let kb = field(line, "Rss:") { out[out.count - 1].rssKB = kb }
                else if let kb = field(line, "Anonymous:") { out[out.count - 1].anonymousKB = kb }
            }
            lineStart = lineEnd + 1
        }
        return out
    }

    /// `name   123 kB` → 123.
    private static func field(_ line: UnsafeBufferPointer<UInt8>, _ name: StaticString) -> Int? {
        let n = name.utf8CodeUnitCount
        guard line.count > n, memcmp(line.baseAddress!, name.utf8Start, n) == 0 else { return nil }
        var i = n
        while i < line.count && line[i] == 0x20 { i += 1 }
        var value = 0, digits = 0
        while i < line.count, line[i] >= 0x30, line[i] <= 0x39 { value = value * 10 + Int(line[i] - 0x30); i += 1; digits += 1 }
        return digits > 0 ? value : nil
    }

    /// `start-end perms offset dev inode [path]`, or nil when the line is not a mapping's header.
    private static func header(_ line: UnsafeBufferPointer<UInt8>) -> Mapping? {
        var fields: [Range<Int>] = []
        var i = 0
        while i < line.count && fields.count < 5 {
            while i < line.count && line[i] == 0x20 { i += 1 }
            let s = i
            while i < line.count && line[i] != 0x20 { i += 1 }
            if i > s { fields.append(s..<i) }
        }
        guard fields.count == 5 else { return nil }
        func text(_ r: Range<Int>) -> Substring { Substring(decoding: UnsafeBufferPointer(rebasing: line[r]), as: UTF8.self) }
        let range = text(fields[0]).split(separator: "-", maxSplits: 1)
        guard range.count == 2, let start = UInt(range[0], radix: 16), let end = UInt(range[1], radix: 16),
              let inode = UInt64(text(fields[4])) else { return nil }
        while i < line.count && line[i] == 0x20 { i += 1 }
        var pathEnd = line.count
        while pathEnd > i && line[pathEnd - 1] == 0x20 { pathEnd -= 1 }
        let path = i < pathEnd ? String(text(i..<pathEnd)) : ""
        return Mapping(start: start, end: end, permissions: String(text(fields[1])), inode: inode, path: path)
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
        guard let data = FileHandle(forReadingAtPath: "/proc/self/smaps")?.readDataToEndOfFile() else { return 0 }
        let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? ""
        var dropped = 0
        let maps = data.withUnsafeBytes { mappings(smaps: $0.bindMemory(to: UInt8.self)) }
        for m in droppable(maps, executable: exe) {
            if madvise(UnsafeMutableRawPointer(bitPattern: m.start), Int(m.end - m.start), MADV_DONTNEED) == 0 { dropped += m.rssKB }
        }
        return dropped
        #else
        return 0
        #endif
    }
}
