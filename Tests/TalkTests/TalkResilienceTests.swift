// The talk turn when things go wrong or change: a missing microphone, the sound server
// dying and coming back mid-capture, the gateway's own Talk settings, voice directives.

import Audio
import ClawvoiceCore
import Foundation
import GatewayProtocol
import LoopbackGateway
import Talk
import Testing

extension TalkAudio {
@Suite struct TalkResilienceTests {
    @Test func `a microphone that does not exist makes start fail with MICROPHONE_UNAVAILABLE`() async throws {
        let rig = try await TalkRig.make(speakReplies: false, source: "no_such_source.monitor")
        defer { Task { await rig.shutdown() } }
        // The capture's failure reaches the controller asynchronously: ask until it names the source.
        let deadline = ContinuousClock.now + .seconds(10)
        var last: PTTError?
        while ContinuousClock.now < deadline {
            do {
                _ = try await rig.talk.start()
                Issue.record("start succeeded without a microphone")
                return
            } catch {
                last = error
                if error.description.contains("no_such_source") { break }
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        let error = try #require(last)
        #expect(error.code == "MICROPHONE_UNAVAILABLE", "\(error)")
        #expect(error.description.contains("no_such_source"), "the message names the source: \(error)")
        #expect(await rig.talk.phase == .idle)
    }

    @Test func `killing and restarting the sound server mid-capture leaves the talk path working`() async throws {
        let rig = try await TalkRig.make(speakReplies: false)
        defer { Task { await rig.shutdown() } }
        try await rig.waitForMicrophone()
        let id = try await rig.talk.start()
        try TalkPulse.kill()
        // The capture goes on waiting for the server; nothing crashes; stop still answers.
        let r = await rig.talk.stop()
        #expect(r.captureId == id)
        try await TalkPulse.ensure()
        do { try await rig.waitForMicrophone() } catch {
            print(rig.log.all.withLock { $0 }.suffix(40).joined(separator: "\n"))
            throw error
        }
        // A fresh once after the restart captures real speech again.
        let words = try Signal.speech("the sound server is back")
        let once = Task { try await rig.talk.once() }
        try await Task.sleep(for: .milliseconds(150))
        _ = try await rig.micPlayer.play(PCMBuffer(format: .voice, samples: words.samples + [Int16](repeating: 0, count: 24_000)))
        let result = try await once.value
        if result.status != .queued { print(rig.log.all.withLock { $0 }.suffix(40).joined(separator: "\n")) }
        #expect(result.status == .queued, "\(result)")
        let decoded = try #require(await rig.gateway.relayRecords().last?.decoded)
        #expect(decoded.durationMilliseconds > words.durationMilliseconds * 0.8)
    }

    @Test func `the gateway's talk.config silence timeout replaces the local default`() async throws {
        let rig = try await TalkRig.make(speakReplies: false) { $0.silenceTimeoutMs = 1500 }
        defer { Task { await rig.shutdown() } }
        #expect(await rig.talk.silenceTimeoutMs == 900)
        await rig.talk.syncGatewayConfig()
        #expect(await rig.talk.silenceTimeoutMs == 1500)
    }

    @Test func `a reply's first-line voice directive is stripped and applied`() {
        let (d, text) = VoiceDirective.split("{\"voice\":\"abc\",\"lang\":\"de\",\"speed\":1.5,\"once\":true}\nHallo Welt.\nZweite Zeile.")
        #expect(d?.voiceId == "abc" && d?.language == "de" && d?.speed == 1.5 && d?.once == true)
        #expect(text == "Hallo Welt.\nZweite Zeile.")
        let (none, plain) = VoiceDirective.split("Just text {not json}")
        #expect(none == nil && plain == "Just text {not json}")
        let (bad, kept) = VoiceDirective.split("{broken json\nrest")
        #expect(bad == nil && kept == "{broken json\nrest")
        let v = VoiceSettings().applying(lang: d?.language, speed: d?.speed, rateWpm: nil)
        #expect(v.voice == "de" && v.rateWpm > VoiceSettings().rateWpm)
    }
}
}
