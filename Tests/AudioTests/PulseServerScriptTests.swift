// Tests for tests/audio/pulse-server.sh: idempotent start, clean stop, recovery after kill -9.
// Each test uses its own server directory, so the shared test server is never disturbed.

import Foundation
import Testing

@Suite struct PulseServerScriptTests {
    /// A fresh directory for one test's server, stopped and removed afterwards.
    private func withServerDirectory(_ body: (String) throws -> Void) throws {
        let dir = "/tmp/cvt-script-\(UUID().uuidString.prefix(8).lowercased())"
        defer {
            _ = try? PulseTestServer.runScript("stop", dir: dir)
            try? FileManager.default.removeItem(atPath: dir)
        }
        try body(dir)
    }

    private func pid(in dir: String) -> Int32? {
        (try? String(contentsOfFile: dir + "/pulseaudio.pid", encoding: .utf8))
            .flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }

    /// Running, and not a zombie waiting for a parent that may never reap it (pulseaudio is
    /// reparented when the script exits).
    private func isAlive(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return false }
        let state = stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).first
        return state != "Z" && state != "X"
    }

    @Test func `start twice gives the same running server`() throws {
        try withServerDirectory { dir in
            let first = try PulseTestServer.runScript("start", dir: dir)
            #expect(first.status == 0, "\(first.err)")
            #expect(first.out.contains("export PULSE_SERVER=unix:\(dir)/native"))
            let firstPid = try #require(pid(in: dir))

            let second = try PulseTestServer.runScript("start", dir: dir)
            #expect(second.status == 0, "\(second.err)")
            #expect(pid(in: dir) == firstPid)
            #expect(isAlive(firstPid))

            let sinks = try PulseTestServer.pactl(["list", "short", "sinks"], server: "unix:\(dir)/native")
            #expect(sinks.out.contains("cv_speaker"))
            #expect(sinks.out.contains("cv_mic"))
            let info = try PulseTestServer.pactl(["info"], server: "unix:\(dir)/native")
            #expect(info.out.contains("Default Sink: cv_speaker"))
            #expect(info.out.contains("Default Source: cv_mic.monitor"))
        }
    }

    @Test func `stop kills the server and removes its socket`() async throws {
        try withServerDirectory { dir in
            _ = try PulseTestServer.runScript("start", dir: dir)
            let serverPid = try #require(pid(in: dir))
            let stop = try PulseTestServer.runScript("stop", dir: dir)
            #expect(stop.status == 0)
            #expect(!isAlive(serverPid))
            #expect(!FileManager.default.fileExists(atPath: dir + "/native"))
            #expect(!PulseTestServer.answers("unix:\(dir)/native"))
            // Stopping what is already stopped is fine too.
            #expect(try PulseTestServer.runScript("stop", dir: dir).status == 0)
        }
    }

    @Test func `start after kill -9 clears the stale socket and pid file`() throws {
        try withServerDirectory { dir in
            _ = try PulseTestServer.runScript("start", dir: dir)
            let crashed = try #require(pid(in: dir))
            kill(crashed, SIGKILL)
            for _ in 0..<100 where isAlive(crashed) { usleep(10_000) }
            #expect(FileManager.default.fileExists(atPath: dir + "/native"), "kill -9 leaves the socket behind")

            let restart = try PulseTestServer.runScript("start", dir: dir)
            #expect(restart.status == 0, "\(restart.err)")
            let restarted = try #require(pid(in: dir))
            #expect(restarted != crashed)
            #expect(PulseTestServer.answers("unix:\(dir)/native"))
        }
    }

    @Test func `env prints the exports without starting anything`() throws {
        let dir = "/tmp/cvt-script-env-\(UUID().uuidString.prefix(8).lowercased())"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let env = try PulseTestServer.runScript("env", dir: dir)
        #expect(env.status == 0)
        #expect(PulseTestServer.exportedServer(in: env.out) == "unix:\(dir)/native")
        #expect(!FileManager.default.fileExists(atPath: dir + "/pulseaudio.pid"))
    }
}
