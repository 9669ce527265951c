// CallMachine input by input: the D7 contract of talk.start/talk.stop, the D1 validation of
// the create result, every D5 end cause (media off first, both keys on the close), the relay
// fallback of §2.4, timers and stale results. Pure: no sockets, no audio; milliseconds.

import Foundation
import GatewayProtocol
import Testing
@testable import ClawvoiceCore

typealias A = CallMachine.Action

let fixture: JSONValue = [
    "transport": "webrtc", "offerUrl": "/talk/offer", "clientSecret": "broker-token", "voiceSessionId": "voice-1",
    "offerHeaders": ["X-Talk": "one"], "clientControl": ["owner": "gateway"],
]

func with(_ base: JSONValue, _ key: String, _ value: JSONValue?) -> JSONValue {
    guard case .object(var o) = base else { return base }
    o[key] = value
    return .object(o)
}

struct CallDriver {
    var m: CallMachine
    var now: Int64 = 10_000
    var token = 0
    let target = CallMachine.Target(sessionKey: "agent:guide:main")

    init(webrtc: Bool = true, relay: Bool = false, settings: CallMachine.Settings = CallMachine.Settings()) {
        m = CallMachine(settings: settings)
        _ = m.handle(.operatorState(connected: true, incarnation: 1), nowMs: now)
        _ = m.handle(.offer(CallOffer(webrtc: webrtc, relay: relay)), nowMs: now)
    }

    mutating func send(_ input: CallMachine.Input) -> [A] { m.handle(input, nowMs: now) }
    mutating func advance(_ ms: Int64) -> [A] { now += ms; return m.handle(.tick, nowMs: now) }
    mutating func start(_ id: String = "c1") -> [A] { token += 1; return send(.start(token: token, origin: .invoke, callId: id)) }
    mutating func stop(_ cause: CallMachine.EndCause = .talkStop) -> [A] { token += 1; return send(.stop(token: token, cause: cause)) }

    /// talk.start → target → create → offer → connected, on WebRTC.
    mutating func connect(_ id: String = "c1") {
        _ = start(id)
        _ = send(.targetResolved(callId: id, .success(target)))
        _ = send(.created(callId: id, .success(fixture)))
        _ = send(.answered(callId: id, error: nil))
        _ = send(.link(callId: id, .connected))
        #expect(m.phase.name == "connected")
    }

    var closeOfCall: A { .closeClient(callId: "c1", sessionKey: "agent:guide:main", voiceSessionId: "voice-1") }
}

@Suite struct CallCommandTests {
    @Test func paramsMustBeExactlyAnEmptyObject() {
        #expect(CallCommandParams.refusal(command: "talk.start", params: [:]) == nil)
        for bad: JSONValue in [["a": 1], .null, [], "x", 0] {
            #expect(CallCommandParams.refusal(command: "talk.start", params: bad) == "talk.start accepts only {}")
            #expect(CallCommandParams.refusal(command: "talk.stop", params: bad) == "talk.stop accepts only {}")
        }
    }

    @Test func answersAreTheRoomNodePayloads() throws {
        #expect(try CallMachine.Answer.started.result.get() == ["started": true])
        #expect(try CallMachine.Answer.alreadyActive.result.get() == ["started": false, "alreadyActive": true])
        #expect(try CallMachine.Answer.stopped(true).result.get() == ["stopped": true])
        #expect(try CallMachine.Answer.stopped(false).result.get() == ["stopped": false])
        guard case .failure(let e) = CallMachine.Answer.unavailable("x").result else { Issue.record("not an error"); return }
        #expect(e.code == .unavailable)
    }
}

@Suite struct CreateResultValidationTests {
    @Test func theFixtureIsAccepted() throws {
        let g = try CallCreateResult.validate(fixture).get()
        #expect(g == CallGrant(offerPath: "/talk/offer", clientSecret: "broker-token", voiceSessionId: "voice-1", offerHeaders: ["X-Talk": "one"]))
    }

    @Test func createParamsAskForGatewayControl() {
        let p = CallCreateResult.params(sessionKey: "agent:guide:main")
        #expect(p == ["mode": "realtime", "transport": "webrtc", "brain": "agent-consult", "sessionKey": "agent:guide:main",
                      "capabilities": ["gateway-control-v1"]])
        #expect(CallCreateResult.params(sessionKey: "k", agentId: "guide")["agentId"] == "guide")
        #expect(CallCreateResult.closeParams(sessionKey: "k", voiceSessionId: "v") == ["sessionKey": "k", "voiceSessionId": "v"])
    }

    static let badFields: [(String, JSONValue?)] = {
        var b: [(String, JSONValue?)] = []
        b.append(("clientControl", ["owner": "gateway", "version": 1]))
        b.append(("clientControl", ["owner": "client"]))
        b.append(("clientControl", nil))
        b.append(("clientControl", "gateway"))
        b.append(("transport", "provider-websocket"))
        b.append(("transport", nil))
        b.append(("offerUrl", "http://gw/talk/offer"))
        b.append(("offerUrl", "talk/offer"))
        b.append(("offerUrl", nil))
        b.append(("offerUrl", 1))
        b.append(("clientSecret", nil))
        b.append(("clientSecret", ""))
        b.append(("offerHeaders", ["X-Talk": 1]))
        b.append(("offerHeaders", ["Authorization": "Bearer x"]))
        b.append(("offerHeaders", ["content-type": "text/plain"]))
        b.append(("offerHeaders", ["HOST": "evil"]))
        b.append(("offerHeaders", "x"))
        return b
    }()

    @Test(arguments: badFields)
    func anythingElseIsUpgradeRequired(key: String, value: JSONValue?) {
        guard case .failure(let r) = CallCreateResult.validate(with(fixture, key, value)) else {
            Issue.record("\(key)=\(String(describing: value)) was accepted")
            return
        }
        #expect(!r.reason.isEmpty)
        // The voiceSessionId that came back is kept, so the session can still be closed.
        #expect(r.voiceSessionId == "voice-1")
    }

    @Test func voiceSessionIdIsOneTo128Bytes() {
        #expect((try? CallCreateResult.validate(with(fixture, "voiceSessionId", .string(String(repeating: "v", count: 128)))).get()) != nil)
        for bad: JSONValue? in [.string(String(repeating: "v", count: 129)), "", nil, 7, .string(String(repeating: "é", count: 65))] {
            guard case .failure(let r) = CallCreateResult.validate(with(fixture, "voiceSessionId", bad)) else {
                Issue.record("voiceSessionId \(String(describing: bad)) accepted"); continue
            }
            #expect(r.voiceSessionId == nil)
        }
    }

    @Test func sessionClosedMatchesOnlyThisCall() {
        let closed = CallTalkEvent(payload: ["voiceSessionId": "voice-1", "talkEvent": ["type": "session.closed", "sessionId": "voice-1"]])
        #expect(closed?.closes("voice-1") == true)
        #expect(CallTalkEvent(payload: ["voiceSessionId": "voice-1", "talkEvent": ["type": "session.closed"]])?.closes("voice-1") == true)
        #expect(CallTalkEvent(payload: ["talkEvent": ["type": "session.closed", "sessionId": "voice-1"]])?.closes("voice-1") == true)
        #expect(closed?.closes("voice-2") == false)
        #expect(CallTalkEvent(payload: ["voiceSessionId": "voice-1", "talkEvent": ["type": "session.closed", "sessionId": "other"]])?.closes("voice-1") == false)
        #expect(CallTalkEvent(payload: ["talkEvent": ["type": "session.closed"]])?.closes("voice-1") == false)
        #expect(CallTalkEvent(payload: ["voiceSessionId": "voice-1", "talkEvent": ["type": "session.error", "final": true]])?.closes("voice-1") == false)
    }

    @Test func relayOfferFromTheCatalog() {
        let provider: JSONValue = ["id": "openai", "label": "OpenAI", "configured": true, "modes": ["realtime"],
                                   "transports": ["webrtc", "gateway-relay"], "brains": ["agent-consult"]]
        let catalog: JSONValue = ["modes": [], "transports": [], "brains": [], "speech": ["providers": []], "transcription": ["providers": []],
                                  "realtime": ["ready": true, "activeProvider": "openai", "providers": [provider]]]
        #expect(CallOffer.relayOffered(catalog: catalog))
        #expect(!CallOffer.relayOffered(catalog: nil))
        var noRelay = provider; if case .object(var o) = noRelay { o["transports"] = ["webrtc"]; noRelay = .object(o) }
        #expect(!CallOffer.relayOffered(catalog: with(catalog, "realtime", ["providers": [noRelay]])))
        var direct = provider; if case .object(var o) = direct { o["brains"] = ["direct-tools"]; direct = .object(o) }
        #expect(!CallOffer.relayOffered(catalog: with(catalog, "realtime", ["providers": [direct]])))
        #expect(!CallOffer.relayOffered(catalog: with(catalog, "realtime", ["ready": false, "providers": [provider]])))
        #expect(!CallOffer.relayOffered(catalog: with(catalog, "realtime", ["activeProvider": "google", "providers": [provider]])))
        var unconfigured = provider; if case .object(var o) = unconfigured { o["configured"] = false; unconfigured = .object(o) }
        #expect(!CallOffer.relayOffered(catalog: with(catalog, "realtime", ["providers": [unconfigured]])))
        // A provider without its own lists inherits the catalog's.
        let bare: JSONValue = ["id": "openai", "label": "OpenAI", "configured": true]
        let top = with(with(with(catalog, "modes", ["realtime"]), "transports", ["gateway-relay"]), "brains", ["agent-consult"])
        #expect(CallOffer.relayOffered(catalog: with(top, "realtime", ["providers": [bare]])))
    }
}

@Suite struct CallMachineTests {
    @Test func startWhileTheOperatorIsOfflineIsUnavailable() {
        var d = CallDriver()
        _ = d.send(.operatorState(connected: false, incarnation: 1))
        #expect(d.start() == [.answer(token: 1, .unavailable("the operator session is offline; the node reconnects automatically"))])
        #expect(!d.m.isActive)
    }

    @Test func aWholeWebRTCCall() {
        var d = CallDriver()
        #expect(d.start() == [.answer(token: 1, .started), .resolveTarget(callId: "c1")])
        #expect(d.m.isActive)
        #expect(d.send(.targetResolved(callId: "c1", .success(d.target)))
                == [.sendCreate(callId: "c1", params: CallCreateResult.params(sessionKey: "agent:guide:main"))])
        let grant = CallGrant(offerPath: "/talk/offer", clientSecret: "broker-token", voiceSessionId: "voice-1", offerHeaders: ["X-Talk": "one"])
        #expect(d.send(.created(callId: "c1", .success(fixture))) == [.postOffer(callId: "c1", grant)])
        #expect(d.m.phase.name == "offering")
        #expect(d.send(.answered(callId: "c1", error: nil)) == [])
        #expect(d.send(.link(callId: "c1", .connected)) == [.callStarted(callId: "c1", .webrtc)])
        #expect(d.start("c2") == [.answer(token: 2, .alreadyActive)])
        #expect(d.stop() == [.answer(token: 3, .stopped(true)), .stopMedia(callId: "c1"), .callEnded(callId: "c1", .webrtc, .talkStop), d.closeOfCall])
        #expect(d.m.phase.name == "closing")
        #expect(d.send(.closed(callId: "c1", sessionId: "voice-1")) == [])
        #expect(d.m.phase == .idle)
        #expect(d.stop() == [.answer(token: 4, .stopped(false))])
    }

    /// Every end cause of D5 on a connected call: media off first, the event, the close with both keys.
    static let endCauses: [(CallMachine.Input, CallMachine.EndCause)] = [
        (.stop(token: 99, cause: .hangup), .hangup),
        (.link(callId: "c1", .failed("ICE failed")), .linkFailed("ICE failed")),
        (.link(callId: "c1", .disconnected), .linkDisconnected),
        (.talkEvent(CallTalkEvent(voiceSessionId: "voice-1", nestedSessionId: "voice-1", type: "session.closed")), .sessionClosed),
        (.operatorState(connected: false, incarnation: 1), .operatorLost),
        (.operatorState(connected: true, incarnation: 2), .operatorReplaced),
        (.gatewaySwitched, .gatewaySwitched),
    ]

    @Test(arguments: endCauses)
    func everyEndCause(input: CallMachine.Input, cause: CallMachine.EndCause) {
        var d = CallDriver()
        d.connect()
        var out = d.send(input)
        if case .stop = input { #expect(out.first == .answer(token: 99, .stopped(true))); out.removeFirst() }
        #expect(out == [.stopMedia(callId: "c1"), .callEnded(callId: "c1", .webrtc, cause), d.closeOfCall])
        #expect(d.send(.closed(callId: "c1", sessionId: "voice-1")) == [])
        #expect(d.m.phase == .idle)
    }

    @Test func idleTimeoutCountsFromTheLastSpeech() {
        var s = CallMachine.Settings()
        s.idleTimeoutMs = 30_000
        var d = CallDriver(settings: s)
        d.connect()
        #expect(d.advance(20_000) == [])
        _ = d.send(.activity(callId: "c1"))
        #expect(d.advance(29_999) == [])
        #expect(d.m.nextDeadlineMs == d.now + 1)
        #expect(d.advance(1) == [.stopMedia(callId: "c1"), .callEnded(callId: "c1", .webrtc, .idleTimeout), d.closeOfCall])
    }

    @Test func eventsForOtherCallsDoNotEndThisOne() {
        var d = CallDriver()
        d.connect()
        #expect(d.send(.talkEvent(CallTalkEvent(voiceSessionId: "voice-0", type: "session.closed"))) == [])
        #expect(d.send(.talkEvent(CallTalkEvent(voiceSessionId: "voice-1", type: "session.error"))) == [])
        #expect(d.send(.talkEvent(CallTalkEvent(voiceSessionId: "voice-1", nestedSessionId: "voice-0", type: "session.closed"))) == [])
        #expect(d.send(.link(callId: "c0", .failed("old"))) == [])
        #expect(d.send(.operatorState(connected: true, incarnation: 1)) == [])
        #expect(d.m.phase.name == "connected")
    }

    @Test func anInvalidCreateResultIsUpgradeRequiredAndClosed() {
        var d = CallDriver()
        _ = d.start()
        _ = d.send(.targetResolved(callId: "c1", .success(d.target)))
        let out = d.send(.created(callId: "c1", .success(with(fixture, "clientControl", ["owner": "client"]))))
        guard case .upgradeRequired(let why)? = out.first else { Issue.record("\(out)"); return }
        #expect(why.contains("clientControl"))
        #expect(out.dropFirst() == [.stopMedia(callId: "c1"), .callEnded(callId: "c1", .webrtc, .upgradeRequired(why)), d.closeOfCall])
    }

    @Test func notSupportedIsUpgradeRequiredWithNothingToClose() {
        var d = CallDriver()
        _ = d.start()
        _ = d.send(.targetResolved(callId: "c1", .success(d.target)))
        let out = d.send(.created(callId: "c1", .failure(.init(code: "NOT_SUPPORTED", message: "unknown method"))))
        #expect(out.count == 3)
        #expect(out.contains(.stopMedia(callId: "c1")))
        #expect(!out.contains { if case .closeClient = $0 { return true }; return false })
        #expect(d.m.phase == .idle)
    }

    @Test func oldGatewayRejectingCapabilitiesIsUpgradeRequired() {
        var d = CallDriver()
        _ = d.start()
        _ = d.send(.targetResolved(callId: "c1", .success(d.target)))
        let out = d.send(.created(callId: "c1", .failure(.init(code: "INVALID_REQUEST", message: "invalid talk.client.create params: at root: unexpected property 'capabilities'"))))
        #expect(out.contains { if case .upgradeRequired = $0 { return true }; return false })
    }

    @Test func providerWithoutGatewayControlIsUnavailable() {
        var d = CallDriver()
        _ = d.start()
        _ = d.send(.targetResolved(callId: "c1", .success(d.target)))
        let msg = "Realtime provider \"openai\" does not support gateway-control-v1 with its configured authentication"
        #expect(d.send(.created(callId: "c1", .failure(.init(code: "UNAVAILABLE", message: msg))))
                == [.stopMedia(callId: "c1"), .callEnded(callId: "c1", .webrtc, .unavailable(msg))])
    }

    @Test func relayWhenWebRTCIsNotOffered() {
        var d = CallDriver(webrtc: false, relay: true)
        _ = d.start()
        #expect(d.send(.targetResolved(callId: "c1", .success(d.target))) == [.openRelay(callId: "c1", d.target)])
        #expect(d.send(.relayCreated(callId: "c1", .success("relay-1"))) == [.callStarted(callId: "c1", .relay)])
        #expect(d.send(.talkEvent(CallTalkEvent(voiceSessionId: "relay-1", type: "session.closed")))
                == [.stopMedia(callId: "c1"), .callEnded(callId: "c1", .relay, .sessionClosed), .closeRelay(callId: "c1", sessionId: "relay-1")])
    }

    @Test func neitherPathOfferedIsRefused() {
        var d = CallDriver(webrtc: false, relay: false)
        let out = d.start()
        #expect(out.count == 2)
        guard case .answer(_, .unavailable(let why))? = out.last else { Issue.record("\(out)"); return }
        #expect(why.hasPrefix("GATEWAY_UPGRADE_REQUIRED"))
        #expect(!d.m.isActive)
    }

    @Test func webRTCFailingBeforeItConnectsFallsBackToTheRelay() {
        var d = CallDriver(relay: true)
        _ = d.start()
        _ = d.send(.targetResolved(callId: "c1", .success(d.target)))
        _ = d.send(.created(callId: "c1", .success(fixture)))
        let out = d.send(.link(callId: "c1", .failed("ICE failed")))
        #expect(out.dropFirst() == [.stopMedia(callId: "c1"), d.closeOfCall, .openRelay(callId: "c1", d.target)])
        #expect(d.send(.link(callId: "c1", .connected)) == [])  // the old peer's late news
        #expect(d.send(.relayCreated(callId: "c1", .success("relay-1"))) == [.callStarted(callId: "c1", .relay)])
        #expect(d.stop() == [.answer(token: 2, .stopped(true)), .stopMedia(callId: "c1"), .callEnded(callId: "c1", .relay, .talkStop),
                             .closeRelay(callId: "c1", sessionId: "relay-1")])
        #expect(d.send(.closed(callId: "c1", sessionId: "voice-1")) == [])  // the WebRTC close is not this one
        #expect(d.m.phase.name == "closing")
        _ = d.send(.closed(callId: "c1", sessionId: "relay-1"))
        #expect(d.m.phase == .idle)
    }

    @Test func upgradeRequiredFallsBackToTheRelayButSaysSo() {
        var d = CallDriver(relay: true)
        _ = d.start()
        _ = d.send(.targetResolved(callId: "c1", .success(d.target)))
        let out = d.send(.created(callId: "c1", .success(with(fixture, "clientControl", nil))))
        #expect(out.contains { if case .upgradeRequired = $0 { return true }; return false })
        #expect(out.contains(d.closeOfCall))
        #expect(out.last == .openRelay(callId: "c1", d.target))
    }

    @Test func linkFailingBeforeConnectWithoutRelayEndsTheCall() {
        var d = CallDriver()
        _ = d.start()
        _ = d.send(.targetResolved(callId: "c1", .success(d.target)))
        _ = d.send(.created(callId: "c1", .success(fixture)))
        #expect(d.send(.answered(callId: "c1", error: "HTTP 401"))
                == [.stopMedia(callId: "c1"), .callEnded(callId: "c1", .webrtc, .linkFailed("the offer exchange failed: HTTP 401")), d.closeOfCall])
    }

    @Test func stopWhileTheCreateIsOnTheWireClosesWhatComesBack() {
        var d = CallDriver()
        _ = d.start()
        _ = d.send(.targetResolved(callId: "c1", .success(d.target)))
        #expect(d.stop() == [.answer(token: 2, .stopped(true)), .stopMedia(callId: "c1"), .callEnded(callId: "c1", .webrtc, .talkStop)])
        #expect(d.send(.created(callId: "c1", .success(fixture))) == [d.closeOfCall])
        _ = d.send(.closed(callId: "c1", sessionId: "voice-1"))
        #expect(d.m.phase == .idle)
    }

    @Test func stopBeforeTheTargetIsResolvedIsIdleAtOnce() {
        var d = CallDriver()
        _ = d.start()
        #expect(d.stop() == [.answer(token: 2, .stopped(true)), .stopMedia(callId: "c1"), .callEnded(callId: "c1", .webrtc, .talkStop)])
        #expect(d.m.phase == .idle)
        #expect(d.send(.targetResolved(callId: "c1", .success(d.target))) == [])
    }

    @Test func aStartWhileClosingBeginsWhenTheCloseIsDone() {
        var d = CallDriver()
        d.connect()
        _ = d.stop()
        #expect(d.start("c2") == [])
        #expect(d.start("c3") == [.answer(token: 4, .alreadyActive)])
        #expect(d.send(.closed(callId: "c1", sessionId: "voice-1")) == [.answer(token: 3, .started), .resolveTarget(callId: "c2")])
    }

    @Test func timers() {
        var d = CallDriver()
        _ = d.start()
        #expect(d.advance(14_999) == [])
        #expect(d.advance(1) == [.stopMedia(callId: "c1"), .callEnded(callId: "c1", .webrtc, .timedOut("no session for the call"))])

        var e = CallDriver()
        _ = e.start()
        _ = e.send(.targetResolved(callId: "c1", .success(e.target)))
        _ = e.send(.created(callId: "c1", .success(fixture)))
        #expect(e.advance(45_000) == [.stopMedia(callId: "c1"), .callEnded(callId: "c1", .webrtc, .timedOut("the WebRTC link did not connect")), e.closeOfCall])
        #expect(e.m.phase.name == "closing")
        let late = e.advance(5_000)
        #expect(late.count == 1)
        #expect(e.m.phase == .idle)
    }
}
