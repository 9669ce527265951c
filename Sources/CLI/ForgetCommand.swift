// `clawvoice forget`: deletes what this device kept of the user's conversations (recordings of
// captures, the transcript cache, turns queued for a gateway) after a y/N on the terminal, and
// says what went. It works on the files directly, as `outbox` does, so it needs no daemon; a
// running daemon's sender re-reads the queue and finds it empty.

import ClawvoiceCore
import Foundation
import GatewayCrypto
import Store
import Talk
import NodeRuntime
import Daemon
#if canImport(Glibc)
import Glibc
#endif

enum ForgetCommand {
    static let command = CLI.Command(
        name: "forget", abstract: "Delete the recordings, cached transcripts and queued turns kept on this device.",
        usage: "clawvoice forget [--yes]",
        details: """
        Deletes, after you confirm:
          recordings     captures kept under <stateDir>/voice-notes (talk.voiceNotes; earlier builds
                         kept the last 20 by default)
          transcripts    the cached chat history of every gateway (what `clawvoice history` shows offline)
          queued turns   turns in the outbox not yet sent, for every gateway: they will never be sent
        Pairing, the device identity, tokens and settings stay (`clawvoice gateways forget NAME` removes
        a gateway's). The gateway keeps its own chat history; a running daemon fetches its cache again
        from it on the next refresh. Works whether or not the daemon runs. docs/privacy.md lists
        everything clawvoice stores and where.
        Asks y/N on a terminal; without a terminal it refuses unless given --yes.

        Options:
          --yes   delete without asking
        """, flags: ["--yes": false], maxPositionals: 0)

    static func run(_ p: CLI.Parsed, paths: RuntimePaths, say: (String) -> Void) throws -> Int32 {
        let notes = voiceNotesDirectory(stateDir: paths.stateDir)
        let recordings = VoiceNotes.list(directory: notes).count
        // No database yet: nothing to delete there, and forget must not create one.
        let databaseExists = FileManager.default.fileExists(atPath: paths.stateDir + "/" + ClawStore.fileName)
        let store = databaseExists ? try openStore(paths) : nil
        let rows = try store?.forgettableRows() ?? ForgettableRows(queuedTurns: 0, cachedSessions: 0, cachedMessages: 0)
        guard recordings > 0 || !rows.isEmpty else {
            say("Nothing to forget: no recordings, cached transcripts or queued turns in \(paths.stateDir).")
            return 0
        }
        let what = summary(recordings: recordings, rows: rows)
        if p.flags["--yes"] == nil {
            guard isatty(STDIN_FILENO) == 1 else {
                throw CLI.UsageError(description: "forget: no terminal to confirm on; `clawvoice forget --yes` deletes without asking")
            }
            FileHandle.standardError.write(Data("Delete \(what) from \(paths.stateDir)? This cannot be undone. [y/N] ".utf8))
            let answer = (readLine() ?? "").trimmingCharacters(in: .whitespaces).lowercased()
            guard answer == "y" || answer == "yes" else { throw CLI.Failure(description: "forget: nothing deleted") }
        }
        let removedRows = try store?.forgetConversations() ?? rows
        let removedNotes = VoiceNotes.removeAll(directory: notes)
        say("Forgot \(summary(recordings: removedNotes, rows: removedRows)).")
        let left = VoiceNotes.list(directory: notes).count
        if left > 0 { throw CLI.Failure(description: "forget: \(left) recording\(left == 1 ? "" : "s") in \(notes) could not be deleted") }
        return 0
    }

    /// "3 recordings, 1 queued turn and the transcript cache (2 sessions, 40 messages)": only
    /// what there is.
    static func summary(recordings: Int, rows: ForgettableRows) -> String {
        func n(_ count: Int, _ noun: String) -> String { "\(count) \(noun)\(count == 1 ? "" : "s")" }
        var parts: [String] = []
        if recordings > 0 { parts.append(n(recordings, "recording")) }
        if rows.queuedTurns > 0 { parts.append(n(rows.queuedTurns, "queued turn")) }
        if rows.cachedSessions > 0 || rows.cachedMessages > 0 {
            parts.append("the transcript cache (\(n(rows.cachedSessions, "session")), \(n(rows.cachedMessages, "message")))")
        }
        if parts.isEmpty { return "nothing" }
        return parts.count == 1 ? parts[0] : parts.dropLast().joined(separator: ", ") + " and " + parts[parts.count - 1]
    }
}
