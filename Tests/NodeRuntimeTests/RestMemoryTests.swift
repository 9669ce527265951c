// RestMemory and RestTimer (issue 25): when the resting daemon gives memory back, which of its
// mappings may be dropped, and that dropping them in a running process leaves it working.

import Foundation
import Testing
@testable import CLI
@testable import Daemon
@testable import NodeRuntime

@Suite struct RestMemoryTests {
    @Test func `the release is due once per rest, after the rest's length, and not while busy`() {
        var t = RestTimer(restMs: 10_000, nowMs: 0)
        #expect(t.dueMs == 10_000)
        let early = t.tick(nowMs: 9_999, busy: false)
        #expect(!early)
        let busy = t.tick(nowMs: 10_000, busy: true)
        #expect(!busy, "a turn under way is not a rest")
        let due = t.tick(nowMs: 10_000, busy: false)
        #expect(due)
        let again = t.tick(nowMs: 30_000, busy: false)
        #expect(t.dueMs == nil && !again, "once per rest")
        t.activity(nowMs: 40_000)
        let beforeDue = t.tick(nowMs: 45_000, busy: false), atDue = t.tick(nowMs: 50_000, busy: false)
        #expect(!beforeDue && atDue)
    }

    @Test func `only read-only private mappings of the program and its libraries with no private page are droppable`() {
        let smaps = """
        55d0-55e0 r-xp 00000000 fe:00 11 /opt/bin/clawvoice
        Rss:                 400 kB
        Anonymous:             0 kB
        55e0-55f0 r--p 00010000 fe:00 11 /opt/bin/clawvoice
        Rss:                  80 kB
        Anonymous:            80 kB
        55f0-5600 rw-p 00020000 fe:00 11 /opt/bin/clawvoice
        Rss:                 200 kB
        Anonymous:            60 kB
        7f00-7f10 r-xp 00000000 fe:00 12 /usr/lib/libFoo.so.3
        Rss:                1000 kB
        Anonymous:             0 kB
        7f10-7f20 r--p 00000000 fe:00 13 /usr/share/data.bin
        Rss:                 500 kB
        Anonymous:             0 kB
        7f20-7f30 r--s 00000000 00:01 14 /memfd:pulseaudio (deleted)
        Rss:                  64 kB
        Anonymous:             0 kB
        7f30-7f40 rw-p 00000000 00:00 0 
        Rss:                6000 kB
        Anonymous:          6000 kB
        7f40-7f50 r-xp 00000000 fe:00 15 /usr/lib/libBar.so
        Rss:                   0 kB
        Anonymous:             0 kB
        """
        let maps = RestMemory.mappings(smaps: smaps)
        #expect(maps.count == 8)
        #expect(maps.first == RestMemory.Mapping(start: 0x55d0, end: 0x55e0, permissions: "r-xp", inode: 11, path: "/opt/bin/clawvoice", anonymousKB: 0, rssKB: 400))
        let d = RestMemory.droppable(maps, executable: "/opt/bin/clawvoice")
        // Code of the executable and a library: yes. RELRO written by relocation, data, other
        // files, shared memory, the heap, and a mapping with nothing resident: no.
        #expect(d.map(\.path) == ["/opt/bin/clawvoice", "/usr/lib/libFoo.so.3"], "\(d)")
    }

    @Test func `a running process drops its start-up code pages and keeps working`() throws {
        // Touch code and data (JSON, Foundation, regex) so there is something to drop.
        let json = try JSONSerialization.data(withJSONObject: ["a": [1, 2, 3], "b": "text"])
        func fileKB() -> Int {
            let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
            let line = status.split(separator: "\n").first { $0.hasPrefix("RssFile:") } ?? ""
            return Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
        }
        let before = fileKB()
        let dropped = RestMemory.release()
        let after = fileKB()
        #expect(dropped > 1_000, "dropped \(dropped) kB")
        #expect(after < before - 1_000, "RssFile \(before) kB → \(after) kB")
        // Everything still runs: the same work again, from pages read back.
        let again = try JSONSerialization.jsonObject(with: json) as? [String: Any]
        #expect((again?["b"] as? String) == "text")
        let parts: [String] = "rest-25".split(separator: "-").map { String($0) }
        #expect(parts == ["rest", "25"])
    }
}
