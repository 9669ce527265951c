// The demo's private PulseAudio: it answers, it stops, and starting it does not stop the
// process that started it from seeing its other children exit (pulseaudio closes inherited
// descriptors, which Foundation.Process mistakes for the child's exit).

import Audio
import ClawvoiceTesting
import Foundation
import CLI
import Daemon
import NodeRuntime
import Testing

@Suite struct PrivatePulseServerTests {
    @Test func `the private server answers, and later children of this process are still reaped`() async throws {
        let server = try await PrivatePulseServer()
        let c = PulseConnection(server: server.server, clientName: "private-pulse-test")
        try await c.waitUntilReady(timeout: .seconds(5))
        c.close()

        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/bin/sleep")
        child.arguments = ["0.1"]
        try child.run()
        let reaped = await eventually(.seconds(5)) { !child.isRunning }
        #expect(reaped, "a child that ended is still 'running': the server's start broke Foundation's reaping")

        server.stop()
        #expect(!FileManager.default.fileExists(atPath: server.directory))
        let gone = PulseConnection(server: server.server, clientName: "private-pulse-test-after")
        defer { gone.close() }
        await #expect(throws: (any Error).self) { try await gone.waitUntilReady(timeout: .seconds(2)) }
    }
}

// Issue 11, item 9: every `make demo` and `clawvoice-bench` run on a machine without a sound
// server could leave its private pulseaudio running after it ended. The server's guardian now
// stops it when its owner is gone, however the owner ended.
@Suite struct PrivatePulseCleanupTests {
    @Test func `a demo killed with SIGKILL or SIGINT leaves no private pulseaudio behind`() async throws {
        for sig in [SIGKILL, SIGINT] {
            var env = try CLIEnvironment()
            let tmp = env.scratch.sub("tmp")
            try FileManager.default.createDirectory(atPath: tmp, withIntermediateDirectories: true)
            env.extra["TMPDIR"] = tmp
            env.extra["PULSE_SERVER"] = "unix:" + env.scratch.sub("no-such-server/native")
            let demo = try env.spawn(["demo"])
            defer { if demo.isRunning { demo.signal(SIGKILL) } }
            var pidFile: String?
            let started = await eventually(.seconds(30)) {
                let dirs = (try? FileManager.default.contentsOfDirectory(atPath: tmp))?.filter { $0.hasPrefix("clawvoice-pa-") } ?? []
                pidFile = dirs.first.map { "\(tmp)/\($0)/pulseaudio.pid" }
                return demo.stdout.contains("private PulseAudio") || !demo.isRunning
            }
            try #require(started && demo.isRunning, "signal \(sig): the demo did not start its private server: \(demo.stdout)\(demo.stderr)")
            let text = try String(contentsOfFile: try #require(pidFile), encoding: .utf8)
            let pid = try #require(Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)))
            #expect(kill(pid, 0) == 0, "pulseaudio \(pid) is not running")
            demo.signal(sig)
            _ = await demo.waitForExit(.seconds(10))
            // Gone (not even a zombie of ours: it is the guardian shell's child) within a few seconds.
            let gone = await eventually(.seconds(6)) {
                let state = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
                return state.isEmpty || state.contains(") Z ")
            }
            #expect(gone, "signal \(sig): pulseaudio \(pid) still runs after its demo ended")
            let left = (try? FileManager.default.contentsOfDirectory(atPath: tmp))?.filter { $0.hasPrefix("clawvoice-pa-") } ?? []
            #expect(await eventually(.seconds(3)) {
                ((try? FileManager.default.contentsOfDirectory(atPath: tmp))?.filter { $0.hasPrefix("clawvoice-pa-") } ?? []).isEmpty
            }, "signal \(sig): left \(left)")
        }
    }
}
