// Frames on the wire: round trips, tolerance of unknown fields, rejection of malformed input,
// JSON values, the connect challenge and nesting depth. The spec's examples are in
// FrameSpecFixtureTests.swift, the closed key sets of what clawvoice sends in FrameEncodingTests.swift.

import Foundation
import Testing
import GatewayProtocol

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
