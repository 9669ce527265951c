// The WebRTC edge against a real, independent peer (tests/peer/webrtc_peer.py, aiortc) over
// loopback: our offer is POSTed as the gateway's broker expects it (D1), media flows both ways
// (the peer answers our utterance by playing it back), and the peer hanging up ends our link.

import ClawvoiceTesting
import Synchronization
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import GatewayProtocol
import Testing
@testable import Realtime

func levelDbfs(_ s: ArraySlice<Int16>) -> Double {
    guard !s.isEmpty else { return -120 }
    let rms = sqrt(s.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(s.count))
    return 20 * log10(max(rms, 1e-9) / 32768)
}

/// What came out of our peer's `audio` stream: total and voiced milliseconds, the loudest 20 ms.
actor Received {
    var totalMs = 0.0
    var voiceMs = 0.0
    var maxDbfs = -120.0
    var firstVoiceAt: ContinuousClock.Instant?
    func add(_ chunk: [Int16], rate: Int) {
        let ms = Double(chunk.count) * 1000 / Double(rate)
        totalMs += ms
        let level = levelDbfs(chunk[...])
        maxDbfs = max(maxDbfs, level)
        if level > -40 {
            voiceMs += ms
            if firstVoiceAt == nil { firstVoiceAt = .now }
        }
    }
}

@Suite(.serialized) struct WebRTCLoopbackTests {
    /// 16 kHz is our capture's rate, 48 kHz the Watch's.
    @Test(.timeLimit(.minutes(1)), arguments: [16000, 48000])
    func mediaFlowsBothWaysAndAHangUpEndsTheLink(rate: Int) async throws {
        let peer = try AiortcPeer(showLog: true)
        defer { peer.stop() }
        let rtc = try WebRTCPeer(sampleRate: rate, localAddress: "127.0.0.1")
        defer { rtc.close() }
        let received = Received()
        let drain = Task { for await chunk in rtc.audio { await received.add(chunk, rate: rate) } }
        let events = Mutex_<[WebRTCPeer.Event]>([])
        let watch = Task { for await e in rtc.events { events.append(e) } }

        let offer = try await rtc.createOffer()
        #expect(!offer.contains("m=application"))
        let answer = try await OfferExchange.post(origin: peer.origin, path: "/talk/offer", secret: peer.secret,
                                                  headers: ["X-Talk": "one"], offer: offer)
        #expect(answer.hasPrefix("v=0"))
        try rtc.setAnswer(answer)
        try await waitFor("the link to connect", seconds: 10) { events.value.contains(.connected) }
        // The peer's own media reaching us says its SRTP is up too: what we send now is heard.
        try await waitFor("the peer's audio", seconds: 5) { events.value.contains(.remoteAudio) }

        // One utterance (800 ms), then quiet while the peer plays it back.
        let clock = ContinuousClock()
        var next = clock.now
        let mediaStart = clock.now
        let cpuStart = processCPUSeconds()
        let utterance = speechLike(ms: 800, rate: rate) + [Int16](repeating: 0, count: rate * 2)
        let utteranceEnd = mediaStart + .milliseconds(800)
        let frame = rate / 50
        for i in stride(from: 0, to: utterance.count, by: frame) {
            rtc.send(Array(utterance[i..<min(i + frame, utterance.count)]))
            next += .milliseconds(20)
            try await Task.sleep(until: next)
        }
        let cpu = (processCPUSeconds() - cpuStart) / (clock.now - mediaStart).seconds
        let replyAfter = await received.firstVoiceAt.map { ($0 - utteranceEnd).seconds * 1000 }
        print("loopback call at \(rate) Hz: \(String(format: "%.1f", cpu * 100)) % of one core for this process over \(String(format: "%.1f", (clock.now - mediaStart).seconds)) s of two-way media (debug build); "
              + "first reply audio \(replyAfter.map { String(format: "%.0f", $0) } ?? "-") ms after the utterance ended, the peer's 400 ms endpoint included")
        // The peer may still be working through a backlog: wait for it, up to 5 s.
        let stats = try #require(await peer.stats(within: 5) { ($0["heardVoiceMs"]?.intValue ?? 0) >= 400 && ($0["playedMs"]?.intValue ?? 0) >= 400 })
        let checks = stats["offerChecks"]?.objectValue ?? [:]
        #expect(!checks.isEmpty && checks.values.allSatisfy { $0 == .bool(true) }, "offer checks: \(checks)")
        print("peer stats at \(rate) Hz: \(stats)")
        // Half the utterance at least: on this loaded 2-core machine the Python peer drops up to
        // 300 ms of 800 (seen at both rates, with 200 ms and 1 s send queues alike).
        #expect((stats["heardVoiceMs"]?.intValue ?? 0) >= 400, "the peer heard \(stats)")
        #expect((stats["utterances"]?.intValue ?? 0) >= 1)
        #expect((stats["playedMs"]?.intValue ?? 0) >= 400, "the peer played \(stats)")
        let voice = await received.voiceMs, loudest = await received.maxDbfs, total = await received.totalMs
        #expect(voice >= 300, "we heard \(voice) ms of voice in \(total) ms")
        #expect(loudest > -30)
        #expect(total >= 2000)

        // The peer hangs up: our link must say so.
        _ = try await peer.request("POST", "/close")
        try await waitFor("the link to report the hang-up", seconds: 15) {
            events.value.contains { $0 == .disconnected || { if case .failed = $0 { return true }; return false }($0) }
        }
        rtc.close()
        try await waitFor("closed", seconds: 2) { events.value.last == .closed }
        drain.cancel()
        watch.cancel()
    }

    /// The broker's refusals come back as one line each; the secret is single-use.
    @Test(.timeLimit(.minutes(1))) func offerRefusals() async throws {
        let peer = try AiortcPeer(showLog: true)
        defer { peer.stop() }
        let rtc = try WebRTCPeer(sampleRate: 16000, localAddress: "127.0.0.1")
        defer { rtc.close() }
        let offer = try await rtc.createOffer()
        await #expect(throws: WebRTCError.self) { try await OfferExchange.post(origin: peer.origin, path: "/talk/offer", secret: "wrong", offer: offer) }
        do {
            _ = try await OfferExchange.post(origin: peer.origin, path: "/talk/offer", secret: "wrong", offer: offer)
        } catch let e as WebRTCError { #expect(e.message.hasPrefix("the offer endpoint answered HTTP 401")) }
        do {
            _ = try await OfferExchange.post(origin: peer.origin, path: "/nowhere", secret: peer.secret, offer: offer)
        } catch let e as WebRTCError { #expect(e.message.hasPrefix("the offer endpoint answered HTTP 404")) }
        let answer = try await OfferExchange.post(origin: peer.origin, path: "/talk/offer", secret: peer.secret, offer: offer)
        #expect(answer.hasPrefix("v=0"))
        do {
            _ = try await OfferExchange.post(origin: peer.origin, path: "/talk/offer", secret: peer.secret, offer: offer)
            Issue.record("a used secret was accepted")
        } catch let e as WebRTCError { #expect(e.message.hasPrefix("the offer endpoint answered HTTP 401")) }
        #expect(throws: WebRTCError.self) { try rtc.setAnswer("not sdp") }
        await #expect(throws: WebRTCError.self) { try await OfferExchange.post(origin: "https://127.0.0.1:1", path: "/x", secret: "s", offer: offer) }
        await #expect(throws: WebRTCError.self) { try await OfferExchange.post(origin: "http://127.0.0.1:1", path: "/x", secret: "s", offer: offer) }
    }

    @Test func httpOriginFromTheGatewayURL() {
        #expect(OfferExchange.origin(gatewayURL: "ws://127.0.0.1:18789") == "http://127.0.0.1:18789")
        #expect(OfferExchange.origin(gatewayURL: "wss://gw.example:443/ws?x=1") == "https://gw.example:443")
        #expect(OfferExchange.origin(gatewayURL: "wss://gw.example/") == "https://gw.example")
        #expect(OfferExchange.origin(gatewayURL: "ws://[::1]:8080") == "http://[::1]:8080")
        #expect(OfferExchange.origin(gatewayURL: "ftp://x") == nil)
    }

    @Test func closingOurPeerEndsItsStreams() async throws {
        let rtc = try WebRTCPeer(sampleRate: 48000, localAddress: "127.0.0.1")
        _ = try await rtc.createOffer()
        rtc.close()
        var seen: [WebRTCPeer.Event] = []
        for await e in rtc.events { seen.append(e) }
        #expect(seen.last == .closed)
        #expect(rtc.send([1, 2, 3]) == false)
        for await _ in rtc.audio {}
    }
}

func processCPUSeconds() -> Double {
    var u = rusage()
    getrusage(RUSAGE_SELF.rawValue, &u)
    return Double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + Double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

final class Mutex_<T: Sendable>: @unchecked Sendable {
    private var v: T
    private let lock = NSLock()
    init(_ v: T) { self.v = v }
    var value: T { lock.lock(); defer { lock.unlock() }; return v }
    func append<E>(_ e: E) where T == [E] { lock.lock(); v.append(e); lock.unlock() }
    func set(_ value: T) { lock.lock(); v = value; lock.unlock() }
}

func waitFor(_ what: String, seconds: Double, _ condition: @Sendable () async -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < deadline {
        if await condition() { return }
        try await Task.sleep(for: .milliseconds(20))
    }
    Issue.record("timed out waiting for \(what)")
    throw WebRTCError("timed out waiting for \(what)")
}
