// Everything clawvoice sends carries only the keys the gateway's closed schemas allow.

import Foundation
import Testing
import GatewayProtocol

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
