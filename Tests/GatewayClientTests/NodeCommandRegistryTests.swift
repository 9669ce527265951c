// NodeCommandRegistry: every invoke gets exactly one result, with the right code and this node's id.

import Foundation
import Testing
import GatewayClient
import GatewayProtocol

private let nodeId = "3f1a9c0e5b7d2468ace0135792468bdf3f1a9c0e5b7d2468ace0135792468bdf"

private func request(_ command: String, paramsJSON: String? = nil, id: String = "inv-1") -> NodeInvokeRequest {
    // The request's own nodeId is deliberately different: results carry the id the registry is given.
    NodeInvokeRequest(id: id, nodeId: "from-the-gateway", command: command, paramsJSON: paramsJSON)
}

/// Counts handler calls across concurrency domains.
private final class CallLog: @unchecked Sendable {
    private let lock = NSLock()
    private var entries: [(NodeInvokeRequest, JSONValue)] = []
    func append(_ r: NodeInvokeRequest, _ p: JSONValue) { lock.withLock { entries.append((r, p)) } }
    var count: Int { lock.withLock { entries.count } }
    var last: (NodeInvokeRequest, JSONValue)? { lock.withLock { entries.last } }
}

private struct SomeOtherError: Error, CustomStringConvertible {
    var description: String { "microphone busy" }
}

@Suite struct `Node command registry` {
    @Test func `an unknown command answers INVALID_REQUEST naming the command`() async {
        let registry = NodeCommandRegistry()
        registry.register("talk.ptt.start") { _, _ in [:] }
        let result = await registry.handle(request("camera.snap"), nodeId: nodeId)
        #expect(result.ok == false)
        #expect(result.id == "inv-1")
        #expect(result.nodeId == nodeId)
        #expect(result.payloadJSON == nil)
        #expect(result.error?.code == "INVALID_REQUEST")
        #expect(result.error?.message == #"INVALID_REQUEST: unknown command "camera.snap""#)
    }

    @Test(arguments: ["{", "not json", #"{"sessionKey":}"#, "\u{0}"])
    func `malformed paramsJSON answers INVALID_REQUEST without calling the handler`(paramsJSON: String) async {
        let registry = NodeCommandRegistry()
        let log = CallLog()
        registry.register("talk.ptt.start") { r, p in log.append(r, p); return [:] }
        let result = await registry.handle(request("talk.ptt.start", paramsJSON: paramsJSON), nodeId: nodeId)
        #expect(result.ok == false)
        #expect(result.nodeId == nodeId)
        #expect(result.error?.code == "INVALID_REQUEST")
        #expect(result.error?.message.hasPrefix("INVALID_REQUEST: ") == true)
        #expect(result.error?.message.contains("paramsJSON") == true)
        #expect(log.count == 0)
    }

    @Test func `a command declared unavailable answers UNAVAILABLE with its reason`() async {
        let registry = NodeCommandRegistry()
        registry.registerUnavailable("talk.ptt.once", reason: "push-to-talk capture is not implemented yet")
        #expect(registry.declaredCommands == ["talk.ptt.once"])
        let result = await registry.handle(request("talk.ptt.once"), nodeId: nodeId)
        #expect(result.ok == false)
        #expect(result.nodeId == nodeId)
        #expect(result.error?.code == "UNAVAILABLE")
        #expect(result.error?.message == "UNAVAILABLE: push-to-talk capture is not implemented yet")
    }

    @Test func `a handler's payload comes back as ok with payloadJSON, and the handler gets the parsed params`() async throws {
        let registry = NodeCommandRegistry()
        let log = CallLog()
        registry.register("talk.ptt.start") { r, p in
            log.append(r, p)
            return ["captureId": "cap-1", "sessionKey": p["sessionKey"] ?? .null, "count": 2]
        }
        let result = await registry.handle(request("talk.ptt.start", paramsJSON: #"{"sessionKey":"agent:main:main"}"#), nodeId: nodeId)
        #expect(result.ok)
        #expect(result.id == "inv-1")
        #expect(result.nodeId == nodeId)
        #expect(result.error == nil)
        let payloadJSON = try #require(result.payloadJSON)
        #expect(try JSONCoding.decode(JSONValue.self, from: Data(payloadJSON.utf8))
                == ["captureId": "cap-1", "sessionKey": "agent:main:main", "count": 2])
        #expect(log.count == 1)
        #expect(log.last?.0.command == "talk.ptt.start")
        #expect(log.last?.1 == ["sessionKey": "agent:main:main"])
    }

    @Test(arguments: [nil, ""] as [String?])
    func `no params reach the handler as an empty object`(paramsJSON: String?) async {
        let registry = NodeCommandRegistry()
        let log = CallLog()
        registry.register("voicewake.status") { r, p in log.append(r, p); return ["ok": true] }
        let result = await registry.handle(request("voicewake.status", paramsJSON: paramsJSON), nodeId: nodeId)
        #expect(result.ok)
        #expect(log.last?.1 == .object([:]))
    }

    @Test func `every result carries the node id and the invoke id`() async {
        let registry = NodeCommandRegistry()
        registry.register("ok") { _, _ in "fine" }
        registry.register("refuses") { _, _ in throw NodeInvokeError(code: .unauthorized, message: "not allowed") }
        registry.register("breaks") { _, _ in throw SomeOtherError() }
        registry.register("cancelled") { _, _ in throw CancellationError() }
        registry.registerUnavailable("later", reason: "soon")
        let cases: [NodeInvokeRequest] = [
            request("ok", id: "a"), request("refuses", id: "b"), request("breaks", id: "c"), request("cancelled", id: "d"),
            request("later", id: "e"), request("missing", id: "f"), request("ok", paramsJSON: "{", id: "g"),
        ]
        for r in cases {
            let result = await registry.handle(r, nodeId: nodeId)
            #expect(result.nodeId == nodeId, "\(r.command)")
            #expect(result.id == r.id, "\(r.command)")
            #expect(result.ok == (result.error == nil), "ok and error agree for \(r.command)")
            #expect(result.ok == (result.payloadJSON != nil), "ok and payloadJSON agree for \(r.command)")
        }
    }

    @Test func `a handler throwing CancellationError answers UNAVAILABLE`() async {
        let registry = NodeCommandRegistry()
        registry.register("talk.ptt.start") { _, _ in throw CancellationError() }
        let result = await registry.handle(request("talk.ptt.start"), nodeId: nodeId)
        #expect(result.ok == false)
        #expect(result.error?.code == "UNAVAILABLE")
        #expect(result.error?.message.hasPrefix("UNAVAILABLE: ") == true)
    }

    @Test func `a handler cancelled by its task answers UNAVAILABLE`() async {
        let registry = NodeCommandRegistry()
        registry.register("slow") { _, _ in
            try await Task.sleep(for: .seconds(60))
            return [:]
        }
        let task = Task { await registry.handle(request("slow"), nodeId: nodeId) }
        task.cancel()
        let result = await task.value
        #expect(result.error?.code == "UNAVAILABLE")
        #expect(result.nodeId == nodeId)
    }

    @Test func `a NodeInvokeError keeps its code, any other error becomes UNAVAILABLE`() async {
        let registry = NodeCommandRegistry()
        registry.register("refuses") { _, _ in throw NodeInvokeError(code: .unauthorized, message: "not allowed") }
        registry.register("breaks") { _, _ in throw SomeOtherError() }
        let refused = await registry.handle(request("refuses"), nodeId: nodeId)
        #expect(refused.error?.code == "UNAUTHORIZED")
        #expect(refused.error?.message == "UNAUTHORIZED: not allowed")
        let broken = await registry.handle(request("breaks"), nodeId: nodeId)
        #expect(broken.error?.code == "UNAVAILABLE")
        #expect(broken.error?.message == "UNAVAILABLE: microphone busy")
    }

    @Test func `declared commands keep registration order without duplicates, and re-registering replaces the handler`() async {
        let registry = NodeCommandRegistry()
        registry.register("b") { _, _ in "first" }
        registry.register("a") { _, _ in [:] }
        registry.register("b") { _, _ in "second" }
        registry.registerUnavailable("c", reason: "x")
        #expect(registry.declaredCommands == ["b", "a", "c"])
        let result = await registry.handle(request("b"), nodeId: nodeId)
        #expect(result.payload == "second")
    }
}
