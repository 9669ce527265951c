// Issue 24, item 5: recordings of captures are off unless the config turns them on (then kept
// by count and age), and `clawvoice forget` deletes recordings, the transcript cache and queued
// turns after a confirmation, through real SQLite files, a real terminal (script(1)) and a real
// daemon.

import ClawvoiceTesting
import Foundation
import LoopbackGateway
import Testing
import Store
import Talk
@testable import CLI
@testable import Daemon
@testable import NodeRuntime
#if canImport(Glibc)
import Glibc
#endif

@Suite struct `Recordings settings` {
    @Test func `recordings are off by default and the example config says so`() throws {
        #expect(ClawConfig().talk.voiceNotes == false)
        #expect(NodeDaemon.talkConfig(ClawConfig(), stateDir: "/s").voiceNoteDirectory == nil)
        let example = try String(contentsOf: repositoryRoot().appendingPathComponent("config/clawvoice.json5"), encoding: .utf8)
        let c = try ClawConfig.parse(example, file: "clawvoice.json5")
        #expect(c.talk.voiceNotes == false && c.talk.voiceNotesKeep == 20 && c.talk.voiceNotesMaxAgeDays == 7)
    }

    @Test func `turned on, they keep a count and an age`() throws {
        let c = try ClawConfig.parse("{ talk: { voiceNotes: true, voiceNotesKeep: 3, voiceNotesMaxAgeDays: 2 } }", file: "c")
        let t = NodeDaemon.talkConfig(c, stateDir: "/s")
        #expect(t.voiceNoteDirectory == "/s/voice-notes" && t.keepVoiceNotes == 3 && t.voiceNotesMaxAgeMs == 2 * 86_400_000)
        for bad in ["{ talk: { voiceNotesKeep: 0 } }", "{ talk: { voiceNotesMaxAgeDays: 0 } }", "{ talk: { voiceNotesKeep: 'x' } }"] {
            #expect(throws: ConfigError.self, "\(bad)") { try ClawConfig.parse(bad, file: "c") }
        }
    }

    @Test func `expiry keeps the newest N and drops anything past the age`() {
        let day: Int64 = 86_400_000, now: Int64 = 100 * day
        let files: [(name: String, modifiedMs: Int64)] = [("a.opus", now - 1), ("b.opus", now - 2 * day), ("c.opus", now - 3),
                                                          ("d.opus", now - 9 * day), ("e.opus", now - 2)]
        #expect(Set(VoiceNotes.expired(files, keep: 3, maxAgeMs: nil, nowMs: now)) == ["b.opus", "d.opus"])
        #expect(Set(VoiceNotes.expired(files, keep: 20, maxAgeMs: 7 * day, nowMs: now)) == ["d.opus"])
        #expect(Set(VoiceNotes.expired(files, keep: 2, maxAgeMs: day, nowMs: now)) == ["b.opus", "c.opus", "d.opus"])
        #expect(VoiceNotes.expired([], keep: 1, maxAgeMs: 1, nowMs: now).isEmpty)
    }

    @Test func `forget's summary names only what there is`() {
        #expect(ForgetCommand.summary(recordings: 3, rows: ForgettableRows(queuedTurns: 1, cachedSessions: 2, cachedMessages: 40))
                == "3 recordings, 1 queued turn and the transcript cache (2 sessions, 40 messages)")
        #expect(ForgetCommand.summary(recordings: 1, rows: ForgettableRows(queuedTurns: 0, cachedSessions: 0, cachedMessages: 0))
                == "1 recording")
    }
}

/// A state dir with what forget deletes: recordings, a queued turn and a cached transcript.
private func fill(_ env: CLIEnvironment, recordings: Int = 2) throws -> ClawStore {
    let notes = env.stateDir + "/voice-notes"
    try FileManager.default.createDirectory(atPath: notes, withIntermediateDirectories: true)
    for i in 0..<recordings { try Data("OggS-\(i)".utf8).write(to: URL(fileURLWithPath: "\(notes)/cap-\(i).opus")) }
    let store = try ClawStore(directory: env.stateDir)
    try store.upsertGateway(GatewayRecord(name: "home", url: "wss://home.example", addedAtMs: 1))
    try store.setActiveGateway(name: "home")
    try store.enqueueOutbox(gateway: "home", sessionKey: "agent:main:main", message: "private turn", idempotencyKey: "k1", nowMs: 1)
    try store.replaceCachedMessages(gateway: "home", sessionKey: "agent:main:main",
                                    messages: [CachedMessage(position: 0, messageId: "m", role: "user", text: "private words")], nowMs: 1)
    return store
}

private func recordings(_ env: CLIEnvironment) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: env.stateDir + "/voice-notes")) ?? []).filter { $0.hasSuffix(".opus") }
}

/// Runs clawvoice under script(1), so its standard input is a terminal, typing `input`.
private func onTerminal(_ env: CLIEnvironment, _ args: [String], typing input: String) async throws -> Outcome {
    let exe = try ExecutableLookup.require().path
    let script = env.scratch.sub("typed-\(UUID().uuidString.prefix(6))")
    try input.write(toFile: script, atomically: true, encoding: .utf8)
    let command = ([exe] + args).map { "'\($0)'" }.joined(separator: " ")
    let p = try Spawned(["-c", "script -qec \"\(command)\" /dev/null < '\(script)'"], env: env.variables, in: env.scratch,
                        executable: URL(fileURLWithPath: "/bin/bash"))
    let status = await p.waitForExit(.seconds(20))
    return Outcome(status: status, stdout: p.stdout, stderr: p.stderr)
}

@Suite(.serialized) struct `clawvoice forget` {
    @Test func `without a terminal it refuses unless --yes, then deletes and says what`() async throws {
        let env = try CLIEnvironment()
        let store = try fill(env)
        let refused = try await env.run(["forget"])
        #expect(refused.status == 2 && refused.stderrLines.count == 1 && refused.stderr.contains("--yes"), "\(refused)")
        let kept = try store.forgettableRows()
        #expect(recordings(env).count == 2 && !kept.isEmpty, "nothing is deleted when refused")

        let done = try await env.run(["forget", "--yes"])
        #expect(done.status == 0, "\(done)")
        #expect(done.stdout == "Forgot 2 recordings, 1 queued turn and the transcript cache (1 session, 1 message).\n", "\(done)")
        let left = try store.forgettableRows()
        #expect(recordings(env).isEmpty && left.isEmpty)
        #expect(try store.gateway(named: "home") != nil, "the pairing stays")

        let again = try await env.run(["forget"])
        #expect(again.status == 0 && again.stdout.hasPrefix("Nothing to forget"), "\(again)")
    }

    @Test func `with no state at all it creates nothing`() async throws {
        let env = try CLIEnvironment()
        let o = try await env.run(["forget"])
        #expect(o.status == 0 && o.stdout.hasPrefix("Nothing to forget"), "\(o)")
        #expect(!FileManager.default.fileExists(atPath: env.stateDir + "/" + ClawStore.fileName))
    }

    @Test func `on a terminal it asks: N keeps everything, y deletes`() async throws {
        let env = try CLIEnvironment()
        let store = try fill(env, recordings: 1)
        let no = try await onTerminal(env, ["forget"], typing: "n\n")
        #expect(no.status == 1, "\(no)")
        #expect(no.stdout.contains("Delete 1 recording, 1 queued turn and the transcript cache (1 session, 1 message) from")
                && no.stdout.contains("[y/N]") && no.stdout.contains("nothing deleted"), "\(no)")
        let waiting = try store.forgettableRows().queuedTurns
        #expect(recordings(env).count == 1 && waiting == 1)

        let yes = try await onTerminal(env, ["forget"], typing: "y\n")
        #expect(yes.status == 0 && yes.stdout.contains("Forgot 1 recording, 1 queued turn"), "\(yes)")
        let gone = try store.forgettableRows()
        #expect(recordings(env).isEmpty && gone.isEmpty)
    }

    /// A daemon running with recordings on: it prunes them to the settings at start, and
    /// forget, run beside it, empties the queue it cannot send while the gateway is down.
    @Test func `beside a running daemon`() async throws {
        let gateway = try await startGateway(auth: .token("forget-token"), autoApprove: true)
        var env = try CLIEnvironment()
        env.extra["CLAWVOICE_GATEWAY_URL"] = await gateway.url
        env.extra["CLAWVOICE_GATEWAY_TOKEN"] = "forget-token"
        try env.scratch.write("config/clawvoice/config.json5", "{ talk: { voiceNotes: true, voiceNotesKeep: 2, voiceNotesMaxAgeDays: 7 } }")
        let notes = env.stateDir + "/voice-notes"
        try FileManager.default.createDirectory(atPath: notes, withIntermediateDirectories: true)
        let now = Date()
        for (name, age) in [("new", 60.0), ("newer", 30.0), ("older", 3_600.0), ("old", 10 * 86_400.0)] {
            let path = "\(notes)/\(name).opus"
            try Data("OggS".utf8).write(to: URL(fileURLWithPath: path))
            try FileManager.default.setAttributes([.modificationDate: now.addingTimeInterval(-age)], ofItemAtPath: path)
        }
        let daemon = try env.spawn(["run"])
        defer { daemon.signal(SIGTERM) }
        let up = try await eventually(.seconds(20)) {
            let s = try await env.run(["status", "--json"], timeout: .seconds(5))
            return s.stdout.components(separatedBy: "\"state\":\"connected\"").count >= 3
        }
        #expect(up, "daemon did not connect: \(daemon.stderr)")
        #expect(Set(recordings(env)) == ["new.opus", "newer.opus"], "pruned to the newest 2 at start: \(recordings(env))")

        await gateway.stop()
        _ = try await eventually(.seconds(10)) {
            (try await env.run(["status", "--json"], timeout: .seconds(5))).stdout.contains("\"state\":\"connected\"") == false
        }
        let queued = try await env.run(["send", "a turn that must never leave"])
        #expect(queued.status == 0, "\(queued)")
        let waiting = try await env.run(["outbox", "list"])
        #expect(waiting.stdout.contains("a turn that must never leave"), "\(waiting)")
        let forgot = try await env.run(["forget", "--yes"])
        #expect(forgot.status == 0, "\(forgot)")
        // The transcript cache may or may not have been filled before the gateway stopped.
        #expect(forgot.stdout.hasPrefix("Forgot 2 recordings") && forgot.stdout.contains("1 queued turn"), "stdout: \(forgot.stdout.debugDescription) daemon: \(daemon.stderr.suffix(1500))")
        let list = try await env.run(["outbox", "list"])
        #expect(list.stdout.contains("the outbox is empty"), "\(list)")
        #expect(recordings(env).isEmpty)
        #expect(try await env.run(["status"], timeout: .seconds(5)).status == 0, "the daemon runs on: \(daemon.stderr)")
        #expect(daemon.isRunning)
    }
}
