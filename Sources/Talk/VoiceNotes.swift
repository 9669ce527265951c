// Recordings of captures on disk (`talk.voiceNotes`, off by default): Ogg Opus files under
// <stateDir>/voice-notes, for debugging and re-sending, never an archive. Which ones go is a
// pure decision (count and age, the time passed in); saving, pruning and removing are the edges.

import Foundation

public enum VoiceNotes {
    public static let fileExtension = ".opus"

    /// The names to delete: beyond the newest `keep`, and any older than `maxAgeMs` at `nowMs`.
    public static func expired(_ files: [(name: String, modifiedMs: Int64)], keep: Int, maxAgeMs: Int64?,
                               nowMs: Int64) -> [String] {
        let newestFirst = files.sorted { $0.modifiedMs != $1.modifiedMs ? $0.modifiedMs > $1.modifiedMs : $0.name > $1.name }
        return newestFirst.enumerated().compactMap { i, f in
            i >= keep || maxAgeMs.map { nowMs - f.modifiedMs > $0 } == true ? f.name : nil
        }
    }

    /// The recordings in `directory` with their modification times (none when it does not exist).
    public static func list(directory: String) -> [(name: String, modifiedMs: Int64)] {
        let fm = FileManager.default
        guard let names = try? fm.contentsOfDirectory(atPath: directory) else { return [] }
        return names.filter { $0.hasSuffix(fileExtension) }.compactMap { n in
            guard let d = (try? fm.attributesOfItem(atPath: directory + "/" + n))?[.modificationDate] as? Date else { return nil }
            return (n, Int64(d.timeIntervalSince1970 * 1000))
        }
    }

    /// Writes one recording (0600 in a 0700 directory), then prunes. Nothing when `directory` is nil.
    static func save(_ note: [UInt8], id: String, directory: String?, keep: Int, maxAgeMs: Int64?) {
        guard let dir = directory else { return }
        let fm = FileManager.default
        try? fm.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        _ = fm.createFile(atPath: dir + "/\(id)\(fileExtension)", contents: Data(note), attributes: [.posixPermissions: 0o600])
        prune(directory: dir, keep: keep, maxAgeMs: maxAgeMs, nowMs: Int64(Date().timeIntervalSince1970 * 1000))
    }

    /// Deletes what `expired` names; returns how many went.
    @discardableResult
    public static func prune(directory: String, keep: Int, maxAgeMs: Int64?, nowMs: Int64) -> Int {
        let doomed = expired(list(directory: directory), keep: keep, maxAgeMs: maxAgeMs, nowMs: nowMs)
        return doomed.filter { (try? FileManager.default.removeItem(atPath: directory + "/" + $0)) != nil }.count
    }

    /// Deletes every recording in `directory` (`clawvoice forget`); returns how many went.
    @discardableResult
    public static func removeAll(directory: String) -> Int {
        list(directory: directory).filter { (try? FileManager.default.removeItem(atPath: directory + "/" + $0.name)) != nil }.count
    }
}
