// Frames on the wire: round trips, the spec's captured examples, tolerance of unknown fields,
// rejection of malformed input, and the closed key sets of everything clawvoice sends.

import Foundation
import Testing
import GatewayProtocol

// MARK: - Helpers

private func decode(_ text: String) throws -> GatewayFrame { try GatewayFrame.decode(text) }

/// A fixture decoded to a different kind of frame than the test expects.
private struct WrongFrameKind: Error, CustomStringConvertible {
    var frame: GatewayFrame
    var description: String { "unexpected frame kind: \(frame)" }
}

private func event(_ text: String) throws -> EventFrame {
    let frame = try GatewayFrame.decode(text)
    guard case .event(let e) = frame else { throw WrongFrameKind(frame: frame) }
    return e
}

private func response(_ text: String) throws -> ResponseFrame {
    let frame = try GatewayFrame.decode(text)
    guard case .response(let r) = frame else { throw WrongFrameKind(frame: frame) }
    return r
}

/// The JSON object a value encodes to, as the gateway would see it.
private func wireObject<T: Encodable>(_ value: T) throws -> [String: JSONValue] {
    let json = try JSONCoding.decode(JSONValue.self, from: JSONCoding.encode(value))
    return try #require(json.objectValue, "\(T.self) did not encode to a JSON object")
}

/// Every JSON path whose value is null, so a test can say there are none.
private func nullPaths(_ value: JSONValue, _ path: String = "$") -> [String] {
    switch value {
    case .null: return [path]
    case .array(let a): return a.enumerated().flatMap { nullPaths($1, "\(path)[\($0)]") }
    case .object(let o): return o.flatMap { nullPaths($1, "\(path).\($0)") }
    default: return []
    }
}

// MARK: - Closed schemas
//
// Key lists copied from OpenClaw's generated JSON Schema, `dist/protocol.schema.json` at commit
// 018c5c90e8686488aad1cc5540229a11fe13d52e (kept for reference as spec/protocol.schema.json in the
// design notes; not part of a clone, so it is not read here). Each object below is
// `additionalProperties: false` there: the gateway rejects any key not listed.
private enum Schema {
    /// definitions.ConnectParams.properties
    static let connectParams: Set<String> = ["minProtocol", "maxProtocol", "client", "caps", "commands", "permissions",
                                             "pathEnv", "role", "scopes", "device", "auth", "locale", "userAgent"]
    static let connectParamsRequired: Set<String> = ["minProtocol", "maxProtocol", "client"]
    /// definitions.ConnectParams.properties.client.properties
    static let connectClient: Set<String> = ["id", "displayName", "version", "platform", "deviceFamily",
                                             "modelIdentifier", "mode", "instanceId"]
    /// definitions.ConnectParams.properties.device.properties
    static let connectDevice: Set<String> = ["id", "publicKey", "signature", "signedAt", "nonce"]
    /// definitions.ConnectParams.properties.auth.properties
    static let connectAuth: Set<String> = ["token", "bootstrapToken", "deviceToken", "password"]
    /// definitions.NodeInvokeResultParams.properties (error: only code and message)
    static let nodeInvokeResult: Set<String> = ["id", "nodeId", "ok", "payload", "payloadJSON", "error"]
    static let nodeInvokeResultError: Set<String> = ["code", "message"]
    /// definitions.NodeEventParams.properties
    static let nodeEvent: Set<String> = ["event", "payload", "payloadJSON"]
    /// definitions.ChatSendParams.properties
    static let chatSend: Set<String> = ["sessionKey", "message", "thinking", "deliver", "attachments", "timeoutMs",
                                        "systemInputProvenance", "systemProvenanceReceipt", "originatingChannel",
                                        "originatingTo", "originatingAccountId", "originatingThreadId", "idempotencyKey"]
    /// definitions.TalkSpeakParams.properties
    static let talkSpeak: Set<String> = ["text", "voiceId", "modelId", "outputFormat", "speed", "rateWpm", "stability",
                                         "similarity", "style", "speakerBoost", "seed", "normalize", "language",
                                         "latencyTier"]
}

// MARK: - Round trips

private let sampleFrames: [GatewayFrame] = [
    .request(RequestFrame(id: "r-1", method: "node.invoke.result",
                          params: ["id": "i-1", "nodeId": "n-1", "ok": true, "payloadJSON": "{\"a\":1}"])),
    .request(RequestFrame(id: "r-2", method: "voicewake.get")),
    .response(.success("r-1", ["ok": true, "nested": ["list": [1, 2.5, "three", nil, false]]])),
    .response(.failure("r-3", ErrorShape(code: "NOT_PAIRED", message: "pairing required",
                                         details: ["code": "PAIRING_REQUIRED", "requestId": "r_7b1c"],
                                         retryable: true, retryAfterMs: 1000))),
    .response(ResponseFrame(id: "r-4", ok: true)),
    .event(EventFrame(event: "tick", payload: ["ts": 1_737_264_000_000], seq: 42,
                      stateVersion: StateVersion(presence: 7, health: 3))),
    .event(EventFrame(event: "node.invoke.request",
                      payload: ["id": "i-1", "nodeId": "n-1", "command": "talk.ptt.start", "paramsJSON": "{}"])),
    .event(EventFrame(event: "voicewake.changed")),
    .cancel(id: "r-9"),
]

@Suite struct `Frame round trips` {
    @Test(arguments: sampleFrames)
    func `a frame decodes to itself from its text and from its binary bytes`(frame: GatewayFrame) throws {
        let data = try frame.encoded()
        #expect(try GatewayFrame.decode(data) == frame)
        #expect(try GatewayFrame.decode([UInt8](data)) == frame)
        #expect(try GatewayFrame.decode(data[...]) == frame)
        #expect(try GatewayFrame.decode(try frame.encodedString()) == frame)
    }

    @Test func `encoded frames carry their type tag and omit absent optionals`() throws {
        let req = try JSONCoding.decode(JSONValue.self, from: GatewayFrame.request(RequestFrame(id: "1", method: "m")).encoded())
        #expect(req == ["type": "req", "id": "1", "method": "m"])
        let res = try JSONCoding.decode(JSONValue.self, from: GatewayFrame.response(.success("1", ["a": 1])).encoded())
        #expect(res == ["type": "res", "id": "1", "ok": true, "payload": ["a": 1]])
        let ev = try JSONCoding.decode(JSONValue.self, from: GatewayFrame.event(EventFrame(event: "tick")).encoded())
        #expect(ev == ["type": "event", "event": "tick"])
        let cancel = try JSONCoding.decode(JSONValue.self, from: GatewayFrame.cancel(id: "7").encoded())
        #expect(cancel == ["type": "cancel", "id": "7"])
    }

    @Test func `a failed response without an error gets a placeholder error instead of being dropped`() throws {
        let r = try response(#"{"type":"res","id":"1","ok":false}"#)
        #expect(r.ok == false)
        #expect(r.error?.code == "UNKNOWN")
    }
}

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

// MARK: - Unknown fields

@Suite struct `Unknown fields are ignored on receive` {
    @Test func `extra keys at the top level of each frame type do not matter`() throws {
        let req = try decode(#"{"type":"req","id":"1","method":"m","params":{},"traceparent":"00-abc","future":[1]}"#)
        #expect(req == .request(RequestFrame(id: "1", method: "m", params: .object([:]))))
        let res = try decode(#"{"type":"res","id":"1","ok":true,"payload":{"a":1},"meta":{"x":true}}"#)
        #expect(res == .response(.success("1", ["a": 1])))
        let ev = try decode(#"{"type":"event","event":"tick","payload":{"ts":1},"seq":1,"scope":"all","stateVersion":{"presence":1,"health":2,"config":3}}"#)
        #expect(ev == .event(EventFrame(event: "tick", payload: ["ts": 1], seq: 1, stateVersion: StateVersion(presence: 1, health: 2))))
        let cancel = try decode(#"{"type":"cancel","id":"9","why":"user"}"#)
        #expect(cancel == .cancel(id: "9"))
    }

    @Test func `extra keys inside an error are ignored`() throws {
        let r = try response(#"{"type":"res","id":"1","ok":false,"error":{"code":"FORBIDDEN","message":"missing scope: operator.write","details":{"code":"MISSING_SCOPE","missingScope":"operator.write"},"docsUrl":"https://x","severity":2}}"#)
        #expect(r.error?.code == "FORBIDDEN")
        #expect(r.error?.detailCode == "MISSING_SCOPE")
    }

    @Test func `extra keys in payloads do not stop typed decoding`() throws {
        #expect(ConnectChallenge(payload: ["nonce": "n", "ts": 5, "alg": "ed25519", "v": [1]]) == ConnectChallenge(nonce: "n", ts: 5))
        let r = try response(Self.helloOkWithExtras)
        let hello = try #require(HelloOk(payload: r.payload))
        #expect(hello.tickIntervalMs == 15_000)
        #expect(hello.mainSessionKey == "agent:main:main")
        let invoke = NodeInvokeRequest(payload: ["id": "i", "nodeId": "n", "command": "c", "trace": ["a": 1], "priority": 3])
        #expect(invoke?.command == "c")
        let chat = ChatEvent(payload: ["runId": "r", "sessionKey": "s", "state": "final", "spawnedBy": "x", "yielded": true])
        #expect(chat?.state == .final)
        #expect(ShutdownEvent(payload: ["reason": "r", "drainMs": 10])?.reason == "r")
        #expect(NodeInvokeCancel(payload: ["invokeId": "i", "reason": "timeout"])?.invokeId == "i")
    }

    static let helloOkWithExtras = #"""
    {"type":"res","id":"c","ok":true,"payload":{"type":"hello-ok","protocol":4,"server":{"version":"2027.1.0","connId":"c1","region":"eu"},
     "features":{"methods":[],"events":[],"capabilities":["x"],"newThing":{}},"controlUiTabs":["a"],"pluginSurfaceUrls":{"a":"https://x"},
     "snapshot":{"sessionDefaults":{"defaultAgentId":"main","mainKey":"main","mainSessionKey":"agent:main:main","scope":"per-sender","extra":1}},
     "auth":{"role":"node","scopes":[],"deviceToken":"t","future":true},
     "policy":{"maxPayload":1048576,"maxBufferedBytes":2,"tickIntervalMs":15000,"attachments":{"maxBytes":1,"maxImageBytes":2}}}}
    """#
}

// MARK: - Malformed input

private let malformedTexts: [String] = [
    "not json at all",
    "",
    "   ",
    "{",
    #"{"type":"event","event":"x""#,
    "[1,2,3]",
    #"[{"type":"event","event":"tick"}]"#,
    #""a string""#,
    "42",
    "null",
    "true",
    "{}",
    #"{"id":"1","method":"m"}"#,
    #"{"type":null,"id":"1"}"#,
    #"{"type":5,"id":"1"}"#,
    #"{"type":"bogus","id":"1"}"#,
    #"{"type":"REQ","id":"1","method":"m"}"#,
    #"{"type":"res","id":"1"}"#,
    #"{"type":"res","id":"1","ok":"true"}"#,
    #"{"type":"res","id":"1","ok":1}"#,
    #"{"type":"res","ok":true}"#,
    #"{"type":"res","id":"1","ok":false,"error":{"message":"no code"}}"#,
    #"{"type":"req","id":"","method":"m"}"#,
    #"{"type":"req","method":"m"}"#,
    #"{"type":"req","id":7,"method":"m"}"#,
    #"{"type":"req","id":"1"}"#,
    #"{"type":"req","id":"1","method":""}"#,
    #"{"type":"event"}"#,
    #"{"type":"event","event":""}"#,
    #"{"type":"event","event":7}"#,
    #"{"type":"event","payload":{"ts":1}}"#,
    #"{"type":"cancel"}"#,
]

/// Raw payloads, each with a short name so test output does not print 200 000 brackets.
struct MalformedBytes: Sendable, CustomTestStringConvertible {
    var name: String
    var bytes: [UInt8]
    var testDescription: String { name }
}

private let malformedBytes: [MalformedBytes] = [
    MalformedBytes(name: "invalid UTF-8 inside a string",
                   bytes: Array(#"{"type":"event","event":""#.utf8) + [0xff, 0xfe] + Array(#""}"#.utf8)),
    MalformedBytes(name: "invalid UTF-8 before the object", bytes: [0xff] + Array(#"{"type":"event","event":"tick"}"#.utf8)),
    MalformedBytes(name: "overlong UTF-8 encoding",
                   bytes: Array(#"{"type":"event","event":""#.utf8) + [0xc0, 0xaf] + Array(#""}"#.utf8)),
    MalformedBytes(name: "truncated UTF-8 sequence",
                   bytes: Array(#"{"type":"event","event":""#.utf8) + [0xe2, 0x82] + Array(#""}"#.utf8)),
    MalformedBytes(name: "lone UTF-8 continuation byte in a payload",
                   bytes: Array(#"{"type":"event","event":"tick","payload":""#.utf8) + [0x80] + Array(#""}"#.utf8)),
    MalformedBytes(name: "one NUL byte", bytes: [0x00]),
    MalformedBytes(name: "no bytes", bytes: []),
    MalformedBytes(name: "200 000 nested arrays", bytes: Array(String(repeating: "[", count: 200_000).utf8)),
    MalformedBytes(name: "50 000 nested objects",
                   bytes: Array((String(repeating: #"{"a":"#, count: 50_000) + "1" + String(repeating: "}", count: 50_000)).utf8)),
    MalformedBytes(name: "a frame whose payload nests 100 000 arrays",
                   bytes: Array((#"{"type":"event","event":"x","payload":"# + String(repeating: "[", count: 100_000)
                                 + String(repeating: "]", count: 100_000) + "}").utf8)),
]

@Suite struct `Malformed frames` {
    @Test(arguments: malformedTexts)
    func `malformed text gives a DecodingFailure`(text: String) {
        #expect(throws: GatewayFrame.DecodingFailure.self) { try GatewayFrame.decode(text) }
    }

    @Test(arguments: malformedBytes)
    func `malformed bytes give a DecodingFailure, never a crash`(input: MalformedBytes) {
        #expect(throws: GatewayFrame.DecodingFailure.self) { try GatewayFrame.decode(input.bytes) }
    }

    @Test func `the failure reason is one log line`() {
        for input in malformedTexts.map({ Array($0.utf8) }) + malformedBytes.map(\.bytes) {
            do {
                _ = try GatewayFrame.decode(input)
                Issue.record("decoded: \(String(decoding: input.prefix(80), as: UTF8.self))")
            } catch {
                #expect(!error.description.contains("\n"))
                #expect(error.description.hasPrefix("malformed frame: "))
                #expect(error.description.count < 200)
            }
        }
    }

    @Test func `moderate nesting inside a payload is fine`() throws {
        let deep = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        let e = try event(#"{"type":"event","event":"x","payload":"# + deep + "}")
        var depth = 0
        var value = e.payload
        while let inner = value?.arrayValue { depth += 1; value = inner.first }
        #expect(depth == 100)
    }

    @Test func `a UTF-8 byte order mark or multi-byte text does not stop decoding`() throws {
        let frame = try GatewayFrame.decode([0xef, 0xbb, 0xbf] + Array(#"{"type":"event","event":"tick"}"#.utf8))
        #expect(frame == .event(EventFrame(event: "tick")))
        let e = try event(#"{"type":"event","event":"chat","payload":{"text":"Grüße 👋 \u00e9"}}"#)
        #expect(e.payload?["text"] == "Grüße 👋 é")
    }
}

// MARK: - Encoding sends only spec fields

private let client = ClientInfo(id: "node-host", version: "0.1.0", platform: "linux", deviceFamily: nil, mode: "node")

@Suite struct `Encoding sends only spec fields` {
    @Test func `the allowed-key lists in ConnectParams match the gateway schema`() {
        #expect(ConnectParams.allowedKeys == Schema.connectParams)
        #expect(ConnectParams.allowedClientKeys == Schema.connectClient)
        #expect(ConnectParams.allowedAuthKeys == Schema.connectAuth)
        #expect(ConnectParams.allowedDeviceKeys == Schema.connectDevice)
    }

    @Test func `connect params with nil optionals send only required and set keys, and no nulls`() throws {
        let params = ConnectParams(minProtocol: 3, maxProtocol: 4, client: client, role: "node", scopes: [])
        let o = try wireObject(params)
        #expect(Set(o.keys).isSubset(of: Schema.connectParams))
        #expect(Set(o.keys).isSuperset(of: Schema.connectParamsRequired))
        #expect(Set(o.keys) == ["minProtocol", "maxProtocol", "client", "role", "scopes"])
        #expect(nullPaths(.object(o)) == [])
        #expect(Set(try #require(o["client"]?.objectValue).keys) == ["id", "version", "platform", "mode"])
        #expect(o["minProtocol"] == 3)
        #expect(o["scopes"] == [])
    }

    @Test func `fully populated connect params stay inside the closed schema`() throws {
        let params = ConnectParams(
            minProtocol: 3, maxProtocol: 4,
            client: ClientInfo(id: "node-host", displayName: "Kitchen", version: "0.1.0", platform: "linux",
                               deviceFamily: "Linux", modelIdentifier: "rpi5", mode: "node", instanceId: "i-1"),
            caps: ["voiceWake", "talk"], commands: ["talk.ptt.start"], permissions: ["microphone": true],
            role: "node", scopes: [],
            device: DeviceProof(id: "abc", publicKey: "pk", signature: "sig", signedAt: 1_737_264_000_000, nonce: "n"),
            auth: ConnectAuth(token: "t", bootstrapToken: "b", deviceToken: "d", password: "p"),
            locale: "en-US", userAgent: "clawvoice/0.1.0")
        let o = try wireObject(params)
        #expect(Set(o.keys).isSubset(of: Schema.connectParams))
        #expect(Set(try #require(o["client"]?.objectValue).keys) == Schema.connectClient)
        #expect(Set(try #require(o["device"]?.objectValue).keys) == Schema.connectDevice)
        #expect(Set(try #require(o["auth"]?.objectValue).keys) == Schema.connectAuth)
        #expect(o["device"]?["signedAt"] == 1_737_264_000_000)
        #expect(nullPaths(.object(o)) == [])
    }

    @Test func `an auth object with one credential sends only that key`() throws {
        let params = ConnectParams(minProtocol: 4, maxProtocol: 4, client: client, role: "operator",
                                   scopes: ["operator.read"], auth: ConnectAuth(deviceToken: "dt"))
        let o = try wireObject(params)
        #expect(o["auth"] == ["deviceToken": "dt"])
        #expect(nullPaths(.object(o)) == [])
    }

    @Test func `a connect request frame has only the frame keys`() throws {
        let params = try JSONValue(encoding: ConnectParams(minProtocol: 3, maxProtocol: 4, client: client, role: "node", scopes: []))
        let frame = GatewayFrame.request(RequestFrame(id: "c-1", method: GatewayMethod.connect, params: params))
        let o = try #require(try JSONCoding.decode(JSONValue.self, from: frame.encoded()).objectValue)
        #expect(Set(o.keys) == ["type", "id", "method", "params"])
    }

    @Test func `a successful invoke result has exactly id, nodeId, ok and payloadJSON`() throws {
        let result = NodeInvokeResult.success(id: "i-1", nodeId: "n-1", payload: ["captureId": "cap-1", "n": 2])
        let o = try wireObject(result)
        #expect(Set(o.keys) == ["id", "nodeId", "ok", "payloadJSON"])
        #expect(Set(o.keys).isSubset(of: Schema.nodeInvokeResult))
        #expect(o["ok"] == true)
        let payloadJSON = try #require(o["payloadJSON"]?.stringValue)
        #expect(try JSONCoding.decode(JSONValue.self, from: Data(payloadJSON.utf8)) == ["captureId": "cap-1", "n": 2])
        #expect(!payloadJSON.contains("2.0"))
        #expect(result.payload == ["captureId": "cap-1", "n": 2])
    }

    @Test func `a failed invoke result has exactly id, nodeId, ok and error with code and message`() throws {
        let result = NodeInvokeResult.failure(id: "i-1", nodeId: "n-1",
                                              error: NodeInvokeError(code: .invalidRequest, message: "unknown command"))
        let o = try wireObject(result)
        #expect(Set(o.keys) == ["id", "nodeId", "ok", "error"])
        #expect(Set(o.keys).isSubset(of: Schema.nodeInvokeResult))
        let error = try #require(o["error"]?.objectValue)
        #expect(Set(error.keys) == Schema.nodeInvokeResultError)
        #expect(o["ok"] == false)
        #expect(error["code"] == "INVALID_REQUEST")
        #expect(error["message"]?.stringValue == "INVALID_REQUEST: unknown command")
        #expect(result.payload == nil)
    }

    @Test(arguments: [NodeErrorCode.invalidRequest, .unavailable, .unauthorized, .notPaired])
    func `a failure message starts with its code`(code: NodeErrorCode) throws {
        let result = NodeInvokeResult.failure(id: "i", nodeId: "n", error: NodeInvokeError(code: code, message: "why"))
        let error = try #require(result.error)
        #expect(error.code == code.rawValue)
        #expect(error.message.hasPrefix("\(code.rawValue): "))
    }

    @Test func `node.event params have event and a payloadJSON string`() throws {
        let params = NodeEventParams(event: "voice.transcript", payload: ["text": "what's the weather", "sessionKey": "agent:main:main"])
        let o = try wireObject(params)
        #expect(Set(o.keys) == ["event", "payloadJSON"])
        #expect(Set(o.keys).isSubset(of: Schema.nodeEvent))
        let payloadJSON = try #require(o["payloadJSON"]?.stringValue)
        #expect(try JSONCoding.decode(JSONValue.self, from: Data(payloadJSON.utf8))
                == ["text": "what's the weather", "sessionKey": "agent:main:main"])
        let empty = try wireObject(NodeEventParams(event: "node.presence.alive", payload: .null))
        #expect(empty["payloadJSON"]?.stringValue == "null", "a null payload is still sent as a string")
    }

    @Test func `minimal chat.send params have exactly sessionKey, message and idempotencyKey`() throws {
        let o = try wireObject(ChatSendParams(sessionKey: "agent:main:main", message: "what's the weather", idempotencyKey: "6f2c"))
        #expect(Set(o.keys) == ["sessionKey", "message", "idempotencyKey"])
        let full = try wireObject(ChatSendParams(sessionKey: "s", message: "m", idempotencyKey: "k", thinking: "low",
                                                 attachments: [["type": "audio", "content": "AAAA"]]))
        #expect(Set(full.keys).isSubset(of: Schema.chatSend))
        #expect(nullPaths(.object(full)) == [])
    }

    @Test func `talk.speak params stay inside the closed schema`() throws {
        #expect(Set(try wireObject(TalkSpeakParams(text: "hi")).keys) == ["text"])
        let full = try wireObject(TalkSpeakParams(text: "hi", voiceId: "v", outputFormat: "pcm_24000", speed: 1.25, language: "en"))
        #expect(Set(full.keys).isSubset(of: Schema.talkSpeak))
        #expect(full["speed"] == 1.25)
    }
}

// MARK: - JSONValue

@Suite struct `JSON values` {
    @Test func `integers encode without a fractional part`() throws {
        #expect(try JSONCoding.string(JSONValue.number(3)) == "3")
        #expect(try JSONCoding.string(JSONValue.number(-42)) == "-42")
        #expect(try JSONCoding.string(JSONValue.number(0)) == "0")
        #expect(try JSONCoding.string(JSONValue.number(1_737_264_000_000)) == "1737264000000")
        #expect(try JSONCoding.string(JSONValue.number(1.5)) == "1.5")
        #expect(try JSONCoding.string(["timeoutMs": 30_000, "speed": 0.25] as JSONValue) == #"{"speed":0.25,"timeoutMs":30000}"#)
        #expect(try JSONCoding.string([1, 2.0, 3] as JSONValue) == "[1,2,3]")
    }

    @Test func `numbers beyond integer precision still encode as numbers`() throws {
        let big = try JSONCoding.string(JSONValue.number(1e20))
        #expect(try JSONCoding.decode(JSONValue.self, from: Data(big.utf8)) == .number(1e20))
        #expect(JSONValue.number(1e20).intValue == nil)
        #expect(JSONValue.number(2.5).intValue == nil)
        #expect(JSONValue.number(-7).intValue == -7)
    }

    @Test func `nested values survive a round trip`() throws {
        let value: JSONValue = [
            "null": nil, "t": true, "f": false, "int": 7, "neg": -3, "frac": 0.125, "big": 9_007_199_254_740_991,
            "text": "quote \" backslash \\ slash / newline \n tab \t unicode é 👋 nul \u{0}",
            "empty": [:], "list": [], "nested": ["a": [1, ["b": [nil, "c", [true]]]]],
        ]
        let data = try JSONCoding.encode(value)
        #expect(try JSONCoding.decode(JSONValue.self, from: data) == value)
        #expect(try JSONValue(encoding: value) == value)
        #expect(try value.decode(JSONValue.self) == value)
    }

    @Test func `booleans and numbers are not confused`() throws {
        let v = try JSONCoding.decode(JSONValue.self, from: Data("[true,1,0,false,1.0]".utf8))
        #expect(v == [.bool(true), .number(1), .number(0), .bool(false), .number(1)])
    }

    @Test func `typed values convert to and from JSON trees`() throws {
        let params = ChatSendParams(sessionKey: "s", message: "m", idempotencyKey: "k")
        let tree = try JSONValue(encoding: params)
        #expect(tree == ["sessionKey": "s", "message": "m", "idempotencyKey": "k"])
        #expect(try tree.decode(ChatSendParams.self) == params)
    }
}

// MARK: - ConnectChallenge

@Suite struct `Connect challenge` {
    @Test(arguments: ["", " ", "   \t\n "])
    func `an empty or whitespace nonce is rejected`(nonce: String) {
        #expect(ConnectChallenge(payload: ["nonce": .string(nonce), "ts": 1_737_264_000_000]) == nil)
    }

    @Test func `a missing, negative, fractional or non-numeric ts is rejected`() {
        #expect(ConnectChallenge(payload: ["nonce": "n"]) == nil)
        #expect(ConnectChallenge(payload: ["nonce": "n", "ts": nil]) == nil)
        #expect(ConnectChallenge(payload: ["nonce": "n", "ts": -1]) == nil)
        #expect(ConnectChallenge(payload: ["nonce": "n", "ts": 1.5]) == nil)
        #expect(ConnectChallenge(payload: ["nonce": "n", "ts": "1737264000000"]) == nil)
        #expect(ConnectChallenge(payload: ["nonce": "n", "ts": 1e300]) == nil)
    }

    @Test func `a missing or non-string nonce, or no payload, is rejected`() {
        #expect(ConnectChallenge(payload: ["ts": 1]) == nil)
        #expect(ConnectChallenge(payload: ["nonce": 5, "ts": 1]) == nil)
        #expect(ConnectChallenge(payload: nil) == nil)
        #expect(ConnectChallenge(payload: "nonce") == nil)
    }

    @Test func `an integral double ts is accepted, from a value and from JSON text`() throws {
        #expect(ConnectChallenge(payload: ["nonce": "n", "ts": 1_737_264_000_000.0]) == ConnectChallenge(nonce: "n", ts: 1_737_264_000_000))
        let e = try event(#"{"type":"event","event":"connect.challenge","payload":{"nonce":"abc","ts":1737264000000.0}}"#)
        #expect(ConnectChallenge(payload: e.payload)?.ts == 1_737_264_000_000)
        #expect(ConnectChallenge(payload: ["nonce": "n", "ts": 0]) == ConnectChallenge(nonce: "n", ts: 0))
    }

    @Test func `the nonce is trimmed`() {
        #expect(ConnectChallenge(payload: ["nonce": "  abc \n", "ts": 1])?.nonce == "abc")
    }
}

// MARK: - Nesting depth (issue 11, item 4)

@Suite struct `Frame nesting depth` {
    @Test func `a frame nested 512 deep is refused with one line, before any decoding`() throws {
        let deep = String(repeating: "[", count: 512) + String(repeating: "]", count: 512)
        let text = "{\"type\":\"event\",\"event\":\"tick\",\"payload\":\(deep)}"
        do {
            _ = try GatewayFrame.decode(text)
            Issue.record("a 512-deep frame decoded")
        } catch {
            #expect(error.reason.contains("nested deeper than \(JSONDepth.gatewayLimit) levels"), "\(error)")
        }
        #expect(throws: JSONDepth.TooDeep.self) { _ = try JSONCoding.decode(JSONValue.self, from: Data(deep.utf8)) }
    }

    @Test func `brackets inside strings do not count, and nesting up to the limit decodes`() throws {
        let text = "{\"type\":\"event\",\"event\":\"tick\",\"payload\":{\"s\":\"" + String(repeating: "[{", count: 600) + "\"}}"
        _ = try GatewayFrame.decode(text)
        let ok = String(repeating: "[", count: JSONDepth.gatewayLimit - 1) + String(repeating: "]", count: JSONDepth.gatewayLimit - 1)
        _ = try GatewayFrame.decode("{\"type\":\"event\",\"event\":\"tick\",\"payload\":\(ok)}")
        #expect(JSONDepth.firstExcess(Array("[[\"\\\"[[[\"]]".utf8), limit: 2) == nil)
        #expect(JSONDepth.firstExcess(Array("[[[]]]".utf8), limit: 2) == 2)
    }
}
