// The demo's private PulseAudio: it answers, it stops, and starting it does not stop the
// process that started it from seeing its other children exit (pulseaudio closes inherited
// descriptors, which Foundation.Process mistakes for the child's exit).

import Audio
import Foundation
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
