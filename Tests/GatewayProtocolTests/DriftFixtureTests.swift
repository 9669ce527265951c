// Frames from the official OpenClaw clients' own tests, transcribed as data (the facts, not the
// code) and decoded with clawvoice's decoders (protocol-drift-2026-12.md §4 "Reusable test
// material"). Sources, each at the commit the drift notes name:
//   R  openclaw/openclaw crates/openclaw-node-host/tests/node_session.rs @8d2f97c6
//   G  openclaw/openclaw crates/openclaw-gateway-client/tests/session.rs @86618145
//   E  openclaw/esp-openclaw-node components/esp-openclaw-node/test_apps/…/test_esp_openclaw_node.c @a4fff14e
//   I  openclaw/openclaw crates/openclaw-node-host/src/identity.rs @8d2f97c6 (its v3 signing test)
//   T  openclaw/openclaw src/gateway/talk/handlers/session.ts, transcription-relay.ts @8032cf1f
//   A  the Android app's hello-ok test fixture with talk-session-target-v1 (drift-12b D2, [U id 66037848767])
//   P  docs/gateway/protocol/rpc-bootstrap-and-events.md @13957377 (drift-12b D3: later deltas omit `message`)

import Foundation
import GatewayCrypto
import GatewayProtocol
import Testing

// `event(_:)` (a fixture decoded as an event frame) is FrameTestSupport.swift's.

@Suite struct `Fixtures from the official clients' tests` {
    // R: node_profile_uses_shared_session_for_invocations
    @Test func `R: a node.invoke.request with paramsJSON and a top-level sessionKey`() throws {
        let e = try event(#"{"type":"event","event":"node.invoke.request","payload":{"id":"invoke-1","nodeId":"node-1","command":"example.status","paramsJSON":"{\"verbose\":true}","sessionKey":"agent:main:main"}}"#)
        let r = try #require(NodeInvokeRequest(payload: e.payload))
        #expect(r.id == "invoke-1" && r.nodeId == "node-1" && r.command == "example.status")
        #expect(try r.params() == ["verbose": true])
        #expect(r.session == .value("agent:main:main"))
        #expect(r.sessionKey == "agent:main:main")
    }

    // R: node_protocol_fallback_… — the invoke a v3 gateway sends has no sessionKey.
    @Test func `R: the released-v3 invoke has no sessionKey`() throws {
        let e = try event(#"{"type":"event","event":"node.invoke.request","payload":{"id":"invoke-v3","nodeId":"node-1","command":"example.status","paramsJSON":"{\"verbose\":true}"}}"#)
        let r = try #require(NodeInvokeRequest(payload: e.payload))
        #expect(r.session == .omitted && r.sessionKey == nil)
        #expect(try r.params() == ["verbose": true])
    }

    // E: "v2 command dispatch receives bounded invocation session metadata"
    @Test func `E: sessionKey as a value and as null`() throws {
        let room = try event(#"{"type":"event","event":"node.invoke.request","payload":{"id":"invoke-1","nodeId":"node-1","command":"metadata.test","paramsJSON":"{}","sessionKey":"agent:main:room"}}"#)
        #expect(NodeInvokeRequest(payload: room.payload)?.session == .value("agent:main:room"))
        let none = try event(#"{"type":"event","event":"node.invoke.request","payload":{"id":"invoke-2","nodeId":"node-1","command":"metadata.test","paramsJSON":"{}","sessionKey":null}}"#)
        let r = try #require(NodeInvokeRequest(payload: none.payload))
        #expect(r.session == .null && r.sessionKey == nil)
        #expect(try r.params() == [:])
    }

    // openclaw-windows-node#1072: accept session attribution only from the top level.
    @Test func `a sessionKey nested in the params is never the invoke's session`() throws {
        let e = try event(#"{"type":"event","event":"node.invoke.request","payload":{"id":"i3","nodeId":"n","command":"talk.ptt.once","paramsJSON":"{\"sessionKey\":\"agent:evil:main\"}"}}"#)
        let r = try #require(NodeInvokeRequest(payload: e.payload))
        #expect(r.session == .omitted && r.sessionKey == nil)
        let both = try #require(NodeInvokeRequest(payload: ["id": "i4", "nodeId": "n", "command": "talk.ptt.once",
                                                           "paramsJSON": #"{"sessionKey":"agent:evil:main"}"#, "sessionKey": "agent:main:kitchen"]))
        #expect(both.sessionKey == "agent:main:kitchen")
        // Blank and wrong-typed keys: blank is the same as null, a number is ignored.
        #expect(NodeInvokeRequest(payload: ["id": "i5", "command": "c", "sessionKey": "  "])?.session == .null)
        #expect(NodeInvokeRequest(payload: ["id": "i6", "command": "c", "sessionKey": 7])?.session == .omitted)
    }

    @Test func `the three sessionKey forms survive encoding`() throws {
        for form in [InvokeSessionKey.omitted, .null, .value("agent:main:room")] {
            let r = NodeInvokeRequest(id: "i", nodeId: "n", command: "c", session: form)
            let text = try JSONCoding.string(r.payload)
            #expect(NodeInvokeRequest(payload: try JSONCoding.decode(JSONValue.self, from: Data(text.utf8)))?.session == form, "\(text)")
            #expect(text.contains("sessionKey") == (form != .omitted))
        }
    }

    // G: connects_publishes_events_and_correlates_requests
    @Test func `G: an event with seq, a partial stateVersion and recipientProfileId decodes`() throws {
        let e = try event(#"{"type":"event","event":"node.test","payload":{"ready":true},"seq":7,"stateVersion":{"presence":9},"recipientProfileId":"profile-1"}"#)
        #expect(e.event == "node.test" && e.seq == 7 && e.payload == ["ready": true])
        #expect(e.stateVersion == nil, "a stateVersion without health is not ours to read; it must not fail the frame")
        // And unknown keys on the other frame types too.
        guard case .response(let r) = try GatewayFrame.decode(#"{"type":"res","id":"x","ok":true,"payload":{},"traceId":"t-1"}"#) else {
            Issue.record("not a response"); return
        }
        #expect(r.ok)
        guard case .request = try GatewayFrame.decode(#"{"type":"req","id":"y","method":"m","params":{},"recipientProfileId":"p"}"#) else {
            Issue.record("not a request"); return
        }
    }

    // R and G: the minimal hello-ok; E: hello-ok with auth only (no protocol, no policy).
    @Test func `R, G and E: minimal hello-ok payloads are accepted`() throws {
        let minimal = try #require(HelloOk(payload: ["type": "hello-ok", "protocol": 4]))
        #expect(minimal.protocolVersion == 4 && minimal.tickIntervalMs == 30_000 && minimal.auth.role == "")
        let v3 = try #require(HelloOk(payload: ["type": "hello-ok", "protocol": 3]))
        #expect(v3.protocolVersion == 3)
        guard case .response(let res) = try GatewayFrame.decode(#"{"type":"res","id":"c1","ok":true,"payload":{"type":"hello-ok","auth":{"deviceToken":"node-token","deviceTokens":[{"role":"operator","deviceToken":"operator-token","scopes":["operator.read","operator.talk"]}]}}}"#) else {
            Issue.record("not a response"); return
        }
        let esp = try #require(HelloOk(payload: res.payload))
        #expect(esp.protocolVersion == 0, "not stated")
        #expect(esp.auth.deviceToken == "node-token")
        #expect(esp.auth.deviceTokens.map(\.deviceToken) == ["operator-token"])
        #expect(esp.auth.deviceTokens.first?.role == "operator")
        #expect(esp.auth.deviceTokens.first?.scopes == ["operator.read", "operator.talk"])
    }

    // E: challenge frames with small timestamps are still challenges.
    @Test func `E: the voice node's challenge`() throws {
        let e = try event(#"{"type":"event","event":"connect.challenge","payload":{"nonce":"voice-nonce","ts":123}}"#)
        #expect(ConnectChallenge(payload: e.payload) == ConnectChallenge(nonce: "voice-nonce", ts: 123))
        let w = try event(#"{"type":"event","event":"voicewake.changed","payload":{"triggers":["Hi ESP"]}}"#)
        #expect(w.payload?["triggers"] == ["Hi ESP"])
    }

    // I: the v3 signing check of the Rust node host.
    @Test func `I: the v3 payload string of the Rust node host's identity test`() throws {
        let identity = try DeviceIdentity(seed: [UInt8](repeating: 7, count: 32))
        let p = DeviceAuthPayload.build(version: .v3, deviceId: identity.deviceId, clientId: "node-host", clientMode: "node",
                                        role: "node", scopes: [], signedAtMs: 1_700_000_000_000, token: "test-token",
                                        nonce: "nonce-1", platform: "Windows", deviceFamily: "Desktop")
        #expect(p == "v3|\(identity.deviceId)|node-host|node|node||1700000000000|test-token|nonce-1|windows|desktop")
        let sig = try identity.sign(p)
        #expect(DeviceIdentity.verify(publicKey: identity.publicKey, message: p, signature: sig))
    }

    // T: the transcription create result and the talkIssue error.
    @Test func `T: the newest talk.session.create result`() throws {
        let info = try #require(TalkSessionInfo(payload: [
            "provider": "openai", "mode": "transcription", "transport": "gateway-relay", "transcriptionSessionId": "tr-1",
            "sessionId": "tr-1", "brain": "none", "audio": ["inputEncoding": "g711_ulaw", "inputSampleRateHz": 8000],
            "expiresAt": 1_767_225_600_000]))
        #expect(info.sessionId == "tr-1" && info.transcriptionSessionId == "tr-1" && info.provider == "openai")
        #expect(info.inputEncoding == .g711MuLaw && info.inputSampleRateHz == 8000)
        #expect(info.expiresAt == .number(1_767_225_600_000))
        // Realtime: sessionId = relaySessionId = voiceSessionId; any one of them names the session.
        let realtime = try #require(TalkSessionInfo(payload: ["voiceSessionId": "v-9", "relaySessionId": "v-9",
                                                              "audio": ["inputEncoding": "pcm16", "inputSampleRateHz": 24000]]))
        #expect(realtime.sessionId == "v-9" && realtime.voiceSessionId == "v-9")
        #expect(realtime.inputEncoding == .pcm16 && realtime.inputSampleRateHz == 24000)
        #expect(TalkSessionInfo(payload: ["audio": ["inputEncoding": "g711_ulaw"]]) == nil, "no session id at all")
    }

    @Test func `T: UNAVAILABLE with details.talkIssue`() throws {
        guard case .response(let r) = try GatewayFrame.decode(#"{"type":"res","id":"t","ok":false,"error":{"code":"UNAVAILABLE","message":"Realtime talk unavailable","details":{"talkIssue":{"code":"realtime_unavailable","message":"No realtime voice provider configured","phase":"request"}}}}"#) else {
            Issue.record("not a response"); return
        }
        let issue = try #require(TalkIssue(details: r.error?.details))
        #expect(issue == TalkIssue(code: "realtime_unavailable", message: "No realtime voice provider configured", phase: "request"))
        #expect(issue.description == "realtime_unavailable: No realtime voice provider configured (phase request)")
        #expect(TalkIssue(details: ["reason": "talk_unconfigured"]) == nil)
    }
    // A: the capability and the agent-scoped session defaults (issue 26, D2).
    @Test func `A: hello-ok with talk-session-target-v1 and an agent-scoped main session`() throws {
        guard case .response(let r) = try GatewayFrame.decode(#"{"type":"res","id":"c","ok":true,"payload":{"type":"hello-ok","features":{"methods":[],"capabilities":["talk-session-target-v1"]},"auth":{"scopes":["operator.read","operator.talk"]},"snapshot":{"sessionDefaults":{"mainSessionKey":"agent:work:main","mainKey":"main"}}}}"#) else {
            Issue.record("not a response"); return
        }
        let hello = try #require(HelloOk(payload: r.payload))
        #expect(hello.capabilities == ["talk-session-target-v1"] && hello.methods.isEmpty)
        #expect(hello.mainSessionKey == "agent:work:main")
        #expect(try #require(HelloOk(payload: ["type": "hello-ok", "protocol": 3])).capabilities.isEmpty, "not stated: none")
    }

    // P: only the first text frame of a run carries the snapshot; later ones only deltaText (D3).
    @Test func `P: a later delta without message decodes to its deltaText alone`() throws {
        let first = try #require(ChatEvent(payload: try event(#"{"type":"event","event":"chat","payload":{"runId":"r","sessionKey":"agent:work:main","seq":0,"state":"delta","deltaText":"Hello","message":{"role":"assistant","content":[{"type":"text","text":"Hello"}]}}}"#).payload))
        let later = try #require(ChatEvent(payload: try event(#"{"type":"event","event":"chat","payload":{"runId":"r","sessionKey":"agent:work:main","seq":1,"state":"delta","deltaText":" there"}}"#).payload))
        #expect(first.messageText == "Hello" && first.deltaText == "Hello")
        #expect(later.messageText == nil && later.deltaText == " there" && !later.replace)
        let cleared = try #require(ChatEvent(payload: ["runId": "r", "sessionKey": "k", "seq": 2, "state": "delta", "deltaText": "", "replace": true]))
        #expect(cleared.replace && cleared.deltaText == "" && cleared.messageText == nil)
    }
}
