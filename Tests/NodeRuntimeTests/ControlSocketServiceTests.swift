// Issue 27: the control socket ran a thread per connection blocked on a semaphore, and `events`
// subscribers wrote with blocking calls inside tasks on the cooperative pool (a subscriber that
// stops reading held a pool thread for 3 s per line). Now one I/O thread serves every
// connection and the answers are child tasks of the server's `run()`.

import ClawvoiceTesting
import Foundation
import Testing
import GatewayProtocol
@testable import CLI
@testable import Daemon
@testable import NodeRuntime
#if canImport(Glibc)
import Glibc
#endif

private func connectTo(_ path: String) -> Int32 {
    let s = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    guard s >= 0 else { return -1 }
    var addr = sockaddr_un()
    addr.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &addr.sun_path) { raw in
        for (i, b) in path.utf8.enumerated() { raw[i] = b }
    }
    let rc = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(s, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    if rc != 0 { close(s); return -1 }
    return s
}

private func threadCount() -> Int {
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count) ?? -1
}

private func eventually(within limit: Duration = .seconds(10), _ condition: () -> Bool) async throws {
    let deadline = ContinuousClock.now + limit
    while !condition() && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
}

@Suite(.serialized) struct `Control socket as a service` {
    @Test func `forty idle connections cost no thread each`() async throws {
        let scratch = try Scratch()
        let path = scratch.sub("c.sock")
        // Idle for as long as the test may take on a loaded machine (the default sheds them after 3 s).
        var limits = ControlAdmission.Limits()
        limits.requestTimeoutMs = 120_000
        limits.maxConnections = 64
        let server = try ControlSocketServer(path: path, limits: limits) { _ in ["ok": true] }
        defer { server.stop() }
        async let serving: Void = server.run()
        let before = threadCount()
        let clients = (0..<40).map { _ in connectTo(path) }
        defer { for c in clients { close(c) } }
        try #require(clients.allSatisfy { $0 >= 0 })
        try await eventually { server.openConnections == 40 }
        #expect(server.openConnections == 40)
        // Other tests in this process start threads meanwhile (8 seen); 40 would be ours.
        #expect(threadCount() - before < 20, "threads \(before) → \(threadCount())")
    }

    @Test func `subscribers that stop reading hold up neither the pool nor other requests`() async throws {
        let scratch = try Scratch()
        let path = scratch.sub("c.sock")
        let line = String(repeating: "x", count: 1_000)
        let server = try ControlSocketServer(path: path, streamer: { request in
            guard request["cmd"]?.stringValue == "events" else { return nil }
            // Four megabytes at once: far more than a socket buffer holds.
            let (lines, sink) = AsyncStream.makeStream(of: String.self)
            for _ in 0..<4_000 { sink.yield(line) }
            return (lines, { sink.finish() })
        }) { request in ["ok": true, "echo": request["cmd"] ?? .null] }
        defer { server.stop() }
        async let serving: Void = server.run()
        // One more stuck subscriber than the cooperative pool has threads.
        let stuck = (0..<(ProcessInfo.processInfo.activeProcessorCount + 1)).map { _ in connectTo(path) }
        defer { for c in stuck { close(c) } }
        for c in stuck { _ = "{\"cmd\":\"events\"}\n".withCString { write(c, $0, strlen($0)) } }
        try await Task.sleep(for: .milliseconds(300))
        let started = ContinuousClock.now
        let r = try await sendOffPool(["cmd": "ping"], path: path, timeoutSeconds: 5)
        #expect(r["echo"] == "ping")
        #expect(ContinuousClock.now - started < .milliseconds(1_500), "ping took \(ContinuousClock.now - started)")
        // A subscriber too far behind is dropped, not waited for.
        try await eventually { server.openConnections == 0 }
        #expect(server.openConnections == 0)
    }
}
