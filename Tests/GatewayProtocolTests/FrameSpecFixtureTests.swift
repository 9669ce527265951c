// The spec's captured frames (gateway-protocol.md's examples, verbatim) decode as the spec says.

import Foundation
import Testing
import GatewayProtocol

// MARK: - Spec fixtures

@Suite struct `Spec fixtures` {
    /// spec 2.1: the challenge, verbatim.
    @Test func `the connect.challenge of 2.1 decodes`() throws {
        let e = try event(#"{"type":"event","event":"connect.challenge","payload":{"nonce":"<string>","ts":1737264000000}}"#)
        #expect(e.event == GatewayEvent.challenge)
        #expect(e.seq == nil)
        #expect(ConnectChallenge(payload: e.payload) == ConnectChallenge(nonce: "<string>", ts: 1_737_264_000_000))
    }

    /// spec 2.5: the hello-ok example, verbatim (including its "…" placeholders).
    static let helloOkFixture = """
    {
      "type": "res",
      "id": "8c1f5c1e-…",
      "ok": true,
      "payload": {
        "type": "hello-ok",
        "protocol": 4,
        "server": { "version": "2026.8.1", "connId": "c7c0…" },
        "features": {
          "methods": ["node.invoke.result", "node.event", "chat.send", "…"],
          "events": ["tick", "presence", "chat", "node.invoke.request", "voicewake.changed", "…"],
          "capabilities": ["chat-send-routing-contract"]
        },
        "snapshot": {
          "presence": [ { "ts": 1737264000000, "deviceId": "…", "roles": ["node"], "platform": "linux" } ],
          "health": {},
          "stateVersion": { "presence": 7, "health": 3 },
          "uptimeMs": 123456,
          "sessionDefaults": { "defaultAgentId": "main", "mainKey": "main", "mainSessionKey": "agent:main:main", "scope": "per-sender" },
          "authMode": "token"
        },
        "auth": {
          "role": "node",
          "scopes": [],
          "deviceToken": "<opaque>",
          "issuedAtMs": 1737264000000
        },
        "policy": { "maxPayload": 26214400, "maxBufferedBytes": 52428800, "tickIntervalMs": 15000 }
      }
    }
    """

    @Test func `the hello-ok of 2.5 decodes with protocol, tick, main session and device token`() throws {
        let r = try response(Self.helloOkFixture)
        #expect(r.id == "8c1f5c1e-…")
        #expect(r.ok)
        #expect(r.error == nil)
        let hello = try #require(HelloOk(payload: r.payload))
        #expect(hello.protocolVersion == 4)
        #expect(hello.serverVersion == "2026.8.1")
        #expect(hello.connId == "c7c0…")
        #expect(hello.tickIntervalMs == 15_000)
        #expect(hello.maxPayload == 26_214_400)
        #expect(hello.mainSessionKey == "agent:main:main")
        #expect(hello.auth.role == "node")
        #expect(hello.auth.scopes == [])
        #expect(hello.auth.deviceToken == "<opaque>")
        #expect(hello.auth.issuedAtMs == 1_737_264_000_000)
        #expect(hello.auth.deviceTokens == [])
        #expect(hello.methods.contains(GatewayMethod.nodeInvokeResult))
        #expect(hello.events.contains(GatewayEvent.nodeInvokeRequest))
    }

    @Test func `hello-ok handoff tokens of a setup-code bootstrap are read`() throws {
        let payload: JSONValue = ["type": "hello-ok", "protocol": 4, "policy": ["tickIntervalMs": 30_000],
                                  "auth": ["role": "node", "scopes": [], "deviceToken": "dt-node",
                                           "deviceTokens": [["deviceToken": "dt-op", "role": "operator",
                                                             "scopes": ["operator.read", "operator.write"],
                                                             "issuedAtMs": 1]]]]
        let hello = try #require(HelloOk(payload: payload))
        #expect(hello.auth.deviceTokens.count == 1)
        #expect(hello.auth.deviceTokens.first?.deviceToken == "dt-op")
        #expect(hello.auth.deviceTokens.first?.role == "operator")
        #expect(hello.auth.deviceTokens.first?.scopes == ["operator.read", "operator.write"])
        #expect(hello.mainSessionKey == nil)
        #expect(hello.maxPayload == 26_214_400, "maxPayload falls back to the documented default")
    }

    @Test func `a payload that is not a hello-ok is refused`() {
        #expect(HelloOk(payload: nil) == nil)
        #expect(HelloOk(payload: ["type": "hello", "protocol": 4, "policy": ["tickIntervalMs": 1], "auth": ["role": "node"]]) == nil)
        // A missing policy or auth is a minimal hello-ok (the official clients' tests send those),
        // see DriftFixtureTests; a protocol of the wrong type is still malformed.
        #expect(HelloOk(payload: ["type": "hello-ok", "protocol": "4", "policy": ["tickIntervalMs": 1], "auth": ["role": "node"]]) == nil)
    }

    /// spec 4.2: the not-paired error, verbatim.
    @Test func `the NOT_PAIRED error of 4.2 decodes with its detail code and request id`() throws {
        let r = try response("""
        {
          "type": "res", "id": "…", "ok": false,
          "error": {
            "code": "NOT_PAIRED",
            "message": "pairing required: device is not approved yet",
            "details": {
              "code": "PAIRING_REQUIRED",
              "reason": "not-paired",
              "requestId": "r_7b1c…",
              "remediationHint": "Approve this device from the pending pairing requests.",
              "deviceId": "<64 hex>",
              "requestedRole": "node",
              "requestedScopes": []
            }
          }
        }
        """)
        #expect(r.ok == false)
        #expect(r.payload == nil)
        let error = try #require(r.error)
        #expect(error.code == "NOT_PAIRED")
        #expect(error.detailCode == "PAIRING_REQUIRED")
        #expect(error.details?["requestId"]?.stringValue == "r_7b1c…")
        #expect(error.details?["reason"]?.stringValue == "not-paired")
        #expect(error.message == "pairing required: device is not approved yet")
        #expect(error.retryable == nil)
        #expect(error.retryAfterMs == nil)
        #expect(error.description == "NOT_PAIRED (PAIRING_REQUIRED): pairing required: device is not approved yet")
    }

    @Test func `an error with retryable and retryAfterMs keeps both`() throws {
        let r = try response(#"{"type":"res","id":"c1","ok":false,"error":{"code":"UNAVAILABLE","message":"gateway starting; retry shortly","details":{"reason":"startup-sidecars"},"retryable":true,"retryAfterMs":3000}}"#)
        #expect(r.error == ErrorShape(code: "UNAVAILABLE", message: "gateway starting; retry shortly",
                                      details: ["reason": "startup-sidecars"], retryable: true, retryAfterMs: 3000))
        #expect(r.error?.detailCode == nil)
    }

    /// spec 5.1: node.invoke.request, verbatim, then with paramsJSON absent and null.
    @Test func `the node.invoke.request of 5.1 decodes with its paramsJSON string`() throws {
        let e = try event(#"""
        {"type":"event","event":"node.invoke.request","payload":{
          "id":"2c6b0f0e-…",
          "nodeId":"<this node's device id>",
          "command":"talk.ptt.start",
          "paramsJSON":"{\"sessionKey\":\"agent:main:main\"}",
          "timeoutMs":30000,
          "idempotencyKey":"k-123"}}
        """#)
        #expect(e.event == GatewayEvent.nodeInvokeRequest)
        #expect(e.seq == nil)
        let request = try #require(NodeInvokeRequest(payload: e.payload))
        #expect(request == NodeInvokeRequest(id: "2c6b0f0e-…", nodeId: "<this node's device id>", command: "talk.ptt.start",
                                             paramsJSON: #"{"sessionKey":"agent:main:main"}"#, timeoutMs: 30_000,
                                             idempotencyKey: "k-123"))
        #expect(try request.params() == ["sessionKey": "agent:main:main"])
    }

    @Test(arguments: [#""paramsJSON":null,"#, ""])
    func `an invoke without params, absent or null, has empty params`(paramsField: String) throws {
        let e = try event(#"{"type":"event","event":"node.invoke.request","payload":{"id":"i1","nodeId":"n1","# + paramsField
                          + #""command":"voicewake.status"}}"#)
        let request = try #require(NodeInvokeRequest(payload: e.payload))
        #expect(request.paramsJSON == nil)
        #expect(request.timeoutMs == nil)
        #expect(request.idempotencyKey == nil)
        #expect(try request.params() == .object([:]))
    }

    @Test func `an invoke payload given as a JSON string holding the object is accepted`() throws {
        let e = try event(#"{"type":"event","event":"node.invoke.request","payload":"{\"id\":\"i2\",\"nodeId\":\"n1\",\"command\":\"talk.ptt.stop\",\"paramsJSON\":\"{\\\"a\\\":[1,2]}\",\"timeoutMs\":5000}"}"#)
        #expect(e.payload?.stringValue != nil, "the fixture really carries a string payload")
        let request = try #require(NodeInvokeRequest(payload: e.payload))
        #expect(request.id == "i2")
        #expect(request.nodeId == "n1")
        #expect(request.command == "talk.ptt.stop")
        #expect(request.timeoutMs == 5000)
        #expect(try request.params() == ["a": [1, 2]])
    }

    @Test func `an invoke without id or command, or with a string that is not an object, is refused`() {
        #expect(NodeInvokeRequest(payload: ["nodeId": "n1", "command": "x"]) == nil)
        #expect(NodeInvokeRequest(payload: ["id": "", "nodeId": "n1", "command": "x"]) == nil)
        #expect(NodeInvokeRequest(payload: ["id": "i", "nodeId": "n1"]) == nil)
        #expect(NodeInvokeRequest(payload: ["id": "i", "nodeId": "n1", "command": ""]) == nil)
        #expect(NodeInvokeRequest(payload: "not json") == nil)
        #expect(NodeInvokeRequest(payload: "[1]") == nil)
        #expect(NodeInvokeRequest(payload: nil) == nil)
    }

    @Test func `malformed paramsJSON is an INVALID_REQUEST error, not a crash`() {
        let request = NodeInvokeRequest(id: "i", nodeId: "n", command: "c", paramsJSON: "{\"a\":")
        #expect(throws: NodeInvokeError(code: .invalidRequest, message: "paramsJSON is not valid JSON")) { try request.params() }
    }

    /// spec 5.3: newest gateways send `invokeId`, older ones `id`.
    @Test func `node.invoke.cancel is read from invokeId and from the legacy id`() throws {
        let newest = try event(#"{"type":"event","event":"node.invoke.cancel","payload":{"invokeId":"inv-1","nodeId":"n1"}}"#)
        #expect(NodeInvokeCancel(payload: newest.payload)?.invokeId == "inv-1")
        let legacy = try event(#"{"type":"event","event":"node.invoke.cancel","payload":{"id":"inv-2","nodeId":"n1"}}"#)
        #expect(NodeInvokeCancel(payload: legacy.payload)?.invokeId == "inv-2")
        #expect(NodeInvokeCancel(payload: ["invokeId": "new", "id": "old"])?.invokeId == "new", "invokeId wins when both are sent")
        #expect(NodeInvokeCancel(payload: ["nodeId": "n1"]) == nil)
        #expect(NodeInvokeCancel(payload: ["invokeId": ""]) == nil)
        #expect(NodeInvokeCancel(payload: nil) == nil)
    }

    /// spec 7.2: a v4 delta carries deltaText and the cumulative snapshot in `message`.
    @Test func `a chat delta event gives the new text and the cumulative message`() throws {
        let e = try event(#"""
        {"type":"event","event":"chat","seq":12,"payload":{"runId":"run-1","sessionKey":"agent:main:main","seq":3,
         "state":"delta","deltaText":" world","agentId":"main",
         "message":{"role":"assistant","content":[{"type":"text","text":"Hello"},{"type":"image","url":"x"},{"type":"text","text":" world"}],"timestamp":1737264000123},
         "usage":{"inputTokens":5}}}
        """#)
        #expect(e.event == GatewayEvent.chat)
        #expect(e.seq == 12)
        let chat = try #require(ChatEvent(payload: e.payload))
        #expect(chat == ChatEvent(runId: "run-1", sessionKey: "agent:main:main", seq: 3, state: .delta,
                                  deltaText: " world", replace: false, messageText: "Hello world"))
    }

    @Test func `a replacing delta, a v3 delta without deltaText, a final and an error are read`() throws {
        let replace = try #require(ChatEvent(payload: ["runId": "r", "sessionKey": "s", "seq": 1, "state": "delta",
                                                       "deltaText": "Hi", "replace": true, "message": ["role": "assistant", "content": [["type": "text", "text": "Hi"]]]]))
        #expect(replace.replace)
        #expect(replace.deltaText == "Hi")
        let v3 = try #require(ChatEvent(payload: ["runId": "r", "sessionKey": "s", "seq": 2, "state": "delta", "message": "plain text"]))
        #expect(v3.deltaText == nil)
        #expect(v3.messageText == "plain text")
        let final = try #require(ChatEvent(payload: ["runId": "r", "sessionKey": "s", "seq": 3, "state": "final", "stopReason": "end"]))
        #expect(final.state == .final)
        #expect(final.messageText == nil)
        let error = try #require(ChatEvent(payload: ["runId": "r", "sessionKey": "s", "state": "error", "errorMessage": "boom", "errorKind": "timeout"]))
        #expect(error.state == .error)
        #expect(error.errorMessage == "boom")
        #expect(error.seq == 0)
        #expect(ChatEvent(payload: ["runId": "r", "sessionKey": "s", "state": "thinking"]) == nil, "unknown state")
        #expect(ChatEvent(payload: ["sessionKey": "s", "state": "delta"]) == nil, "no runId")
    }

    @Test func `a chat event survives its own payload encoding`() throws {
        let chat = ChatEvent(runId: "r", sessionKey: "agent:main:main", seq: 9, state: .aborted, deltaText: "x",
                             messageText: "partial", errorMessage: "stopped")
        #expect(ChatEvent(payload: chat.payload) == chat)
    }

    /// spec 1.5: shutdown before an orderly 1012 close.
    @Test func `the shutdown event gives the reason and the expected restart delay`() throws {
        let e = try event(#"{"type":"event","event":"shutdown","payload":{"reason":"restart","restartExpectedMs":2000},"seq":99}"#)
        #expect(e.event == GatewayEvent.shutdown)
        let shutdown = try #require(ShutdownEvent(payload: e.payload))
        #expect(shutdown.reason == "restart")
        #expect(shutdown.restartExpectedMs == 2000)
        let noRestart = try #require(ShutdownEvent(payload: ["reason": "shutdown", "restartExpectedMs": nil]))
        #expect(noRestart.restartExpectedMs == nil)
        #expect(ShutdownEvent(payload: ["restartExpectedMs": 1]) == nil)
    }

    /// spec 1.5: ticks are broadcasts with a seq.
    @Test func `a tick event keeps its seq and state version`() throws {
        let e = try event(#"{"type":"event","event":"tick","payload":{"ts":1737264000000},"seq":42,"stateVersion":{"presence":7,"health":3}}"#)
        #expect(e.payload == ["ts": 1_737_264_000_000])
        #expect(e.seq == 42)
        #expect(e.stateVersion == StateVersion(presence: 7, health: 3))
    }

    @Test func `voice wake triggers are read from voicewake.changed`() throws {
        let e = try event(#"{"type":"event","event":"voicewake.changed","payload":{"triggers":["openclaw","hey claw",3]}}"#)
        #expect(VoiceWakeTriggers(payload: e.payload)?.triggers == ["openclaw", "hey claw"])
        #expect(VoiceWakeTriggers(payload: ["triggers": "openclaw"]) == nil)
    }
}
