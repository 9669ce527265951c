// systemd Type=notify and journald priorities: SystemdState and LogFormat as pure values, and
// a real daemon process talking to a notify socket the test binds (NOTIFY_SOCKET, WATCHDOG_USEC)
// with its stderr under a JOURNAL_STREAM that names it.

import ClawvoiceCore
import ClawvoiceTesting
import Foundation
import GatewayClient
import LoopbackGateway
import Testing
@testable import CLI
@testable import Daemon
@testable import NodeRuntime
#if canImport(Glibc)
import Glibc
#endif

@Suite struct SystemdStateTests {
    typealias F = SystemdState.Facts

    @Test func `READY once the node is up or waiting for approval and the microphone runs; STATUS on change; watchdog only while answering`() {
        var s = SystemdState()
        #expect(s.step(F(node: "connecting", operatorState: "connecting", microphone: "starting"), watchdog: true)
                == ["STATUS=node connecting; microphone starting", "WATCHDOG=1"])
        #expect(s.step(F(node: "pairing", nodeDetail: "request r_1", operatorState: "pairing", microphone: "running"), watchdog: true)
                == ["READY=1", "STATUS=waiting for approval on the gateway (request r_1); microphone running", "WATCHDOG=1"])
        #expect(s.step(F(node: "connected", operatorState: "connected", microphone: "running"), watchdog: true)
                == ["STATUS=node connected, operator connected; microphone running", "WATCHDOG=1"])
        #expect(s.step(F(node: "connected", operatorState: "connected", microphone: "running"), watchdog: false).isEmpty)
        let wedged = s.step(F(node: "connected", operatorState: "connected", microphone: "running", loopResponsive: false), watchdog: true)
        #expect(wedged == ["STATUS=node connected, operator connected; microphone running; talk loop not answering"], "no WATCHDOG=1")
        #expect(SystemdState.status(F(node: "connected", operatorState: "connected", microphone: "running", muted: true))
                == "node connected, operator connected; microphone muted")
        #expect(!SystemdState.isReady(F(node: "connected", operatorState: "connected", microphone: "waiting for the sound server")))
    }

    @Test func `syslog priorities under journald, plain text elsewhere`() {
        #expect(LogFormat.line(.error, "daemon", "x", journald: true) == "<3>daemon: x")
        #expect(LogFormat.line(.warning, "wake", "x", journald: true) == "<4>wake: x")
        #expect(LogFormat.line(.info, "talk", "x", journald: true) == "<6>talk: x")
        #expect(LogFormat.line(.debug, "talk", "x", journald: true) == "<7>talk: x")
        #expect(LogFormat.line(.info, "talk", "x", journald: false) == "info talk: x")
        #expect(LogFormat.underJournald("8:1234", stderr: (8, 1234)))
        #expect(!LogFormat.underJournald("8:1234", stderr: (8, 99)), "stderr redirected since")
        #expect(!LogFormat.underJournald(nil, stderr: (8, 1234)) && !LogFormat.underJournald("junk", stderr: (8, 1234)))
    }
}

/// A Unix datagram socket standing in for systemd's notify socket.
final class NotifySocket: @unchecked Sendable {
    let path: String
    let fd: Int32

    init(path: String) throws {
        self.path = path
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in path.utf8.enumerated() { raw[i] = b }
        }
        let rc = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        guard rc == 0 else { throw SoundServerError(description: "bind \(path): errno \(errno)") }
        var tv = timeval(tv_sec: 0, tv_usec: 200_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd); unlink(path) }

    /// Every datagram until `until` holds or `timeout` passes, one string each.
    /// Off the cooperative pool: the recv loop blocks for up to `timeout` (see `onOwnThread`).
    func receive(timeout: Duration, until: @escaping @Sendable ([String]) -> Bool) async -> [String] {
        await onOwnThread { self.receiveBlocking(timeout: timeout, until: until) }
    }

    private func receiveBlocking(timeout: Duration, until: ([String]) -> Bool) -> [String] {
        var got: [String] = []
        let deadline = ContinuousClock.now + timeout
        var buf = [UInt8](repeating: 0, count: 4096)
        while ContinuousClock.now < deadline && !until(got) {
            let n = recv(fd, &buf, buf.count, 0)
            if n > 0 { got.append(String(decoding: buf[0..<n], as: UTF8.self)) }
        }
        return got
    }
}

@Suite(.serialized) struct SystemdNotifyTests {
    @Test func `a daemon under a notify socket sends READY, STATUS and watchdog kicks, and logs with priorities`() async throws {
        var env = try CLIEnvironment()
        let pulse = try await SoundServerProcess.start(in: env.scratch)
        defer { pulse.stop() }
        var c = LoopbackGateway.Configuration()
        c.auth = .token("notify-token")
        c.autoApprove = true
        let gateway = LoopbackGateway(configuration: c)
        try await gateway.start()
        defer { Task { await gateway.stop() } }
        env.extra["PULSE_SERVER"] = pulse.server
        let pair = try await env.run(["pair", "--url", await gateway.url, "--token-file", try env.scratch.write("token", "notify-token"), "--timeout", "20"], timeout: .seconds(25))
        #expect(pair.status == 0, "\(pair)")

        let notify = try NotifySocket(path: env.scratch.sub("notify.sock"))
        let errPath = env.scratch.sub("journal.txt")
        FileManager.default.createFile(atPath: errPath, contents: nil)
        let err = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        var st = stat()
        #expect(fstat(err.fileDescriptor, &st) == 0)
        var vars = env.variables
        vars["NOTIFY_SOCKET"] = notify.path
        vars["WATCHDOG_USEC"] = "400000"
        vars["JOURNAL_STREAM"] = "\(st.st_dev):\(st.st_ino)"
        let p = Process()
        p.executableURL = try ExecutableLookup.require()
        p.arguments = ["run"]
        p.environment = vars
        p.standardInput = FileHandle.nullDevice
        p.standardOutput = FileHandle.nullDevice
        p.standardError = err
        try p.run()
        try? err.close()
        defer { if p.isRunning { kill(p.processIdentifier, SIGKILL) } }

        let messages = await notify.receive(timeout: .seconds(20)) { got in
            got.contains { $0.contains("READY=1") } && got.filter { $0.contains("WATCHDOG=1") }.count >= 3
        }
        let lines = messages.flatMap { $0.split(separator: "\n").map(String.init) }
        #expect(lines.filter { $0 == "READY=1" }.count == 1, "\(lines)")
        #expect(lines.contains { $0.hasPrefix("STATUS=node connected, operator connected; microphone running") }
                || lines.contains { $0.hasPrefix("STATUS=") && $0.contains("microphone running") }, "\(lines)")
        #expect(lines.filter { $0 == "WATCHDOG=1" }.count >= 3, "kicked every 200 ms: \(lines)")
        kill(p.processIdentifier, SIGTERM)
        let stopping = await notify.receive(timeout: .seconds(5)) { $0.contains { $0.contains("STOPPING=1") } }
        #expect(stopping.contains { $0.contains("STOPPING=1") }, "\(stopping)")
        let journal = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
        let logLines = journal.split(separator: "\n")
        #expect(!logLines.isEmpty && logLines.allSatisfy { $0.hasPrefix("<") }, "\(journal)")
        #expect(logLines.contains { $0.hasPrefix("<6>daemon: ") }, "\(journal)")
    }
}
