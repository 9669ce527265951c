// How an invoke ends (issue 27, item 3): the timeout's answer leaves at the timeout even when
// the handler is slow to stop, and a cancelled handler learns why (timeout or node.invoke.cancel),
// then answers what it really did.

import ClawvoiceCore
import Foundation
import GatewayClient
import GatewayProtocol
import LoopbackGateway
import Store
import Testing

@Suite struct InvokeEndTests {
    func connectedNode(_ h: Harness, _ g: LoopbackGateway, commands: NodeCommandRegistry) async throws -> GatewaySession {
        let url = await g.url
        try h.addGateway(url, token: "shared-t")
        let node = h.session(.node, url: url, credentials: GatewayCredentials(sharedToken: "shared-t"), commands: commands)
        await node.start()
        #expect(await eventually("node connected") { await node.isConnected })
        return node
    }

    /// Issue 27, defect 1 at the session: the task group waited for the handler, so a handler
    /// that does not stop when cancelled held the timeout's answer back until it finished.
    @Test func `the timeout answers on time even when the handler does not stop`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true }
        let commands = NodeCommandRegistry()
        let finished = Locked(false)
        // The handler's work ends when the test says (or, failing that, after a minute), not four
        // seconds after it began: on a loaded machine the test could be stalled that long between
        // the answer and the check, and then it saw a handler that had finished.
        let release = Gate()
        let backstop = Task { try? await Task.sleep(for: .seconds(60)); release.open() }
        defer { backstop.cancel() }
        commands.register("test.stubborn") { _, _ in
            // Ignores cancellation: work that cannot be interrupted.
            await release.wait()
            finished.withLock { $0 = true }
            return ["finished": true]
        }
        let node = try await connectedNode(h, g, commands: commands)
        let started = ContinuousClock.now
        let result = try await g.invoke(command: "test.stubborn", timeoutMs: 300)
        let took = ContinuousClock.now - started
        #expect(!result.ok && result.error?.message == "UNAVAILABLE: node invoke timed out")
        // 0.3 s on a quiet machine; the order is what counts: before the handler is done.
        #expect(!finished.withLock { $0 }, "answered after \(took), only once the handler had finished")
        // The handler's own result, when it comes, does not make a second answer.
        release.open()
        #expect(await eventually("the handler finished") { finished.withLock { $0 } })
        try await Task.sleep(for: .milliseconds(500))
        #expect(await g.requests(method: "node.invoke.result").count == 1)
        await node.stop()
        await g.stop()
    }

    @Test func `a cancelled handler learns why, and after a cancel its own result is the answer`() async throws {
        let h = try Harness()
        defer { h.cleanup() }
        let g = try await gateway { $0.autoApprove = true }
        let heard = Locked<[String]>([])
        let commands = NodeCommandRegistry()
        commands.register("test.wait") { _, _ in
            let signal = InvokeSignal.current
            do { try await Task.sleep(for: .seconds(30)) } catch {
                let why = signal?.reason?.rawValue ?? "no reason"
                heard.withLock { $0.append(why) }
                return ["stopped": .string(why)]
            }
            return [:]
        }
        let node = try await connectedNode(h, g, commands: commands)

        let timedOut = try await g.invoke(command: "test.wait", timeoutMs: 200)
        #expect(timedOut.error?.message == "UNAVAILABLE: node invoke timed out")
        #expect(await eventually("the handler heard the timeout") { heard.withLock { $0 } == ["timed out"] })

        let invoke = Task { try await g.invoke(command: "test.wait", timeoutMs: 30_000) }
        #expect(await eventually("invoke sent") { await g.requests(method: "node.invoke.result").count == 1 && h.log.all.count > 0 })
        try await Task.sleep(for: .milliseconds(200))
        await g.cancelInvoke(try #require(await g.lastInvokeId()))
        let cancelled = try await invoke.value
        #expect(heard.withLock { $0 } == ["timed out", "cancelled"])
        #expect(cancelled.ok && cancelled.payload == ["stopped": "cancelled"], "the handler said what it did: \(cancelled)")
        await node.stop()
        await g.stop()
    }
}
