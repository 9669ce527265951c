// WriteWatch: says "some process committed a write to the database" without polling. In WAL
// mode every commit appends to the -wal file (a checkpoint only moves pages already committed),
// and reads write nothing there, so inotify on the state directory, filtered to that one name,
// is silent while the database is: the outbox sender sleeps until a row may have changed,
// whichever process (`clawvoice send`, `outbox retry|drop`, the daemon itself) wrote it.

import Dispatch
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

public final class DatabaseWriteWatch: Sendable {
    /// The dispatch source reading the inotify descriptor; its cancel handler closes it.
    private let source: Mutex<(any DispatchSourceRead)?>

    /// Watches `store`'s database; `onWrite` runs on a dispatch queue after each batch of writes
    /// (keep it short: it only wakes its owner). Nil when inotify is not available: poll instead.
    public init?(store: ClawStore, onWrite: @escaping @Sendable () -> Void) {
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { return nil }
        // The directory, not the file: SQLite may delete and create the -wal file again.
        guard inotify_add_watch(fd, store.directory, UInt32(IN_MODIFY)) >= 0 else {
            close(fd)
            return nil
        }
        let wal = ClawStore.fileName + "-wal"
        let s = DispatchSource.makeReadSource(fileDescriptor: fd, queue: .global())
        s.setEventHandler { [weak store] in
            guard Self.drain(fd, naming: wal), let store else { return }
            // The event comes with the writer's WAL frames, before its commit is visible to
            // readers: wait for its write lock (milliseconds; a dispatch thread, not the pool).
            store.waitForOtherWriters()
            onWrite()
        }
        s.setCancelHandler { close(fd) }
        s.resume()
        source = Mutex(s)
    }

    /// Stops watching (also on release).
    public func cancel() { source.withLock { $0?.cancel(); $0 = nil } }

    deinit { cancel() }

    /// Reads every queued event; true if one names `name`.
    private static func drain(_ fd: Int32, naming name: String) -> Bool {
        var hit = false
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { return hit }
            var offset = 0
            let header = MemoryLayout<inotify_event>.size
            while offset + header <= n {
                let (length, matches) = buffer.withUnsafeBytes { raw -> (Int, Bool) in
                    let event = raw.loadUnaligned(fromByteOffset: offset, as: inotify_event.self)
                    let nameBytes = raw[(offset + header)..<min(offset + header + Int(event.len), n)]
                    let text = String(decoding: nameBytes.prefix { $0 != 0 }, as: UTF8.self)
                    return (Int(event.len), text == name)
                }
                hit = hit || matches
                offset += header + length
            }
        }
    }
}

extension ClawStore {
    /// Returns once no other connection is inside a write transaction (or after the busy
    /// timeout), so that a read that follows sees every commit begun before the call.
    public func waitForOtherWriters() {
        _ = try? locked { db throws(StoreError) in
            try db.execute("BEGIN IMMEDIATE")
            try db.execute("ROLLBACK")
        }
    }
}
