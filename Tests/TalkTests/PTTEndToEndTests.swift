// Push-to-talk end to end: espeak speech played into the virtual microphone, captured by
// the daemon's capture loop, streamed to the loopback relay, decoded there and compared with
// what was played; the voice note decodes with opusdec; the echoed reply is spoken.

import Audio
import ClawvoiceCore
import Foundation
import GatewayClient
import GatewayProtocol
import LoopbackGateway
import Talk
import Testing

extension TalkAudio {
@Suite struct PTTEndToEndTests {
    @Test func `once captures the spoken words, the relay gets the same audio, and the reply is spoken`() async throws {
        let rig = try await TalkRig.make()
        defer { Task { await rig.shutdown() } }
        try await rig.waitForMicrophone()
        let words = try Signal.speech("turn on the kitchen lights please")
        let padded = PCMBuffer(format: .voice, samples: words.samples + [Int16](repeating: 0, count: 16_000 * 2))
        await rig.gateway.supplyTranscript("turn on the kitchen lights please")

        let once = Task { try await rig.talk.once() }
        try await Task.sleep(for: .milliseconds(150))
        let played = try await rig.micPlayer.play(padded)
        #expect(played == .finished)
        let result = try await once.value
        #expect(result.status == .queued)
        #expect(result.transcript == "turn on the kitchen lights please")

        // What the relay decoded is what was played: same length of speech, same waveform.
        let record = try #require(await rig.gateway.relayRecords().last)
        #expect(record.encoding == .oggOpus)
        #expect(record.decodeError == nil)
        #expect(record.timestamps.allSatisfy { $0 >= 0 })
        #expect(record.timestamps == record.timestamps.sorted())
        #expect(record.base64Lengths.allSatisfy { $0 <= 512 * 1024 })
        #expect(record.base64Lengths.count >= 5, "the capture was streamed in ~100 ms calls, not sent at the end")
        let decoded = try Signal.to16k(try #require(record.decoded))
        let sentSpan = try #require(Signal.activeSpan(words.samples))
        let gotSpan = try #require(Signal.activeSpan(decoded))
        let sentMs = Double(sentSpan.1 - sentSpan.0) / 16
        let gotMs = Double(gotSpan.1 - gotSpan.0) / 16
        #expect(abs(sentMs - gotMs) <= 60, "speech \(sentMs) ms played, \(gotMs) ms received")
        let a = Array(words.samples[sentSpan.0..<sentSpan.1])
        let b = Array(decoded[max(0, gotSpan.0 - 1600)..<min(decoded.count, gotSpan.1 + 1600)])
        let (corr, _) = Signal.correlation(a, b, maxLag: 3200)
        #expect(corr > 0.6, "waveform correlation \(corr)")

        // The voice note of the capture is a valid Ogg Opus file.
        let note = try #require(await rig.talk.lastVoiceNote)
        let path = rig.dir + "/note.opus"
        FileManager.default.createFile(atPath: path, contents: Data(note))
        let opusdec = Process()
        opusdec.executableURL = URL(fileURLWithPath: "/usr/bin/opusdec")
        opusdec.arguments = ["--quiet", "--rate", "16000", path, rig.dir + "/note.wav"]
        try opusdec.run()
        opusdec.waitUntilExit()
        #expect(opusdec.terminationStatus == 0)
        let wav = try WAVFile.decode(Array(try Data(contentsOf: URL(fileURLWithPath: rig.dir + "/note.wav"))))
        #expect(wav.durationMilliseconds > words.durationMilliseconds - 100)

        // The echo agent's reply is spoken with the gateway's talk.speak clip.
        let deadline = ContinuousClock.now + .seconds(20)
        while await rig.talk.lastSpeech == nil && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        let speech = try #require(await rig.talk.lastSpeech)
        #expect(speech.engine == "gateway" && speech.outcome == .finished)
        let send = try #require(await rig.gateway.requests(method: "chat.send").last)
        #expect(send.params?["message"]?.stringValue == "turn on the kitchen lights please")
        #expect(send.params?["thinking"]?.stringValue == "low")
    }

    @Test func `start and stop bracket a held capture; stop twice answers idle with a fresh id`() async throws {
        let rig = try await TalkRig.make(speakReplies: false)
        defer { Task { await rig.shutdown() } }
        try await rig.waitForMicrophone()
        let id = try await rig.talk.start()
        #expect(try await rig.talk.start() == id, "start is idempotent")
        #expect(try await rig.talk.once() == PTTResult(captureId: id, status: .busy))
        _ = try await rig.micPlayer.play(try Signal.speech("hello"))
        let r = await rig.talk.stop()
        #expect(r.captureId == id && r.status == .queued)
        #expect(r.transcript?.hasPrefix("audio ") == true, "the loopback reports length and level: \(r.transcript ?? "nil")")
        let again = await rig.talk.stop()
        #expect(again.status == .idle && again.captureId != id)
        let cancel = await rig.talk.cancel()
        #expect(cancel.status == .idle)
    }

    @Test func `cancel drops the capture and closes the relay session`() async throws {
        let rig = try await TalkRig.make(speakReplies: false)
        defer { Task { await rig.shutdown() } }
        try await rig.waitForMicrophone()
        let id = try await rig.talk.start()
        try await Task.sleep(for: .milliseconds(300))
        let r = await rig.talk.cancel()
        #expect(r == PTTResult(captureId: id, status: .cancelled))
        let deadline = ContinuousClock.now + .seconds(5)
        while await rig.gateway.relayRecords().first?.closed != true && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(await rig.gateway.relayRecords().first?.closed == true)
        #expect(await rig.gateway.requests(method: "chat.send").isEmpty)
    }

    @Test(arguments: [LoopbackGateway.RelayMode.pcm16(rateHz: 24_000), .g711MuLaw])
    func `the uplink speaks the encoding the relay names`(mode: LoopbackGateway.RelayMode) async throws {
        let rig = try await TalkRig.make(relay: mode, speakReplies: false)
        defer { Task { await rig.shutdown() } }
        try await rig.waitForMicrophone()
        let words = try Signal.speech("testing the uplink encoding")
        _ = try await rig.talk.start()
        _ = try await rig.micPlayer.play(PCMBuffer(format: .voice, samples: words.samples + [Int16](repeating: 0, count: 4000)))
        let r = await rig.talk.stop()
        #expect(r.status == .queued)
        let record = try #require(await rig.gateway.relayRecords().last)
        let decoded = try Signal.to16k(try #require(record.decoded))
        let sent = try #require(Signal.activeSpan(words.samples))
        let got = try #require(Signal.activeSpan(decoded, threshold: 0.012))
        #expect(abs(Double((sent.1 - sent.0) - (got.1 - got.0)) / 16) <= 60)
        let (corr, _) = Signal.correlation(Array(words.samples[sent.0..<sent.1]),
                                           Array(decoded[max(0, got.0 - 1600)..<min(decoded.count, got.1 + 1600)]), maxLag: 3200)
        #expect(corr > (mode == .g711MuLaw ? 0.5 : 0.7), "correlation \(corr)")
    }

    @Test func `without a relay the capture goes out as an Ogg Opus voice note attachment`() async throws {
        let rig = try await TalkRig.make(relay: .disabled, speakReplies: false)
        defer { Task { await rig.shutdown() } }
        try await rig.waitForMicrophone()
        _ = try await rig.talk.start()
        _ = try await rig.micPlayer.play(try Signal.speech("a voice note"))
        let r = await rig.talk.stop()
        #expect(r.status == .queued && r.transcript == nil)
        let deadline = ContinuousClock.now + .seconds(5)
        while await rig.gateway.requests(method: "chat.send").isEmpty && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        let send = try #require(await rig.gateway.requests(method: "chat.send").last)
        let attachment = try #require(send.params?["attachments"]?.arrayValue?.first)
        #expect(attachment["mimeType"]?.stringValue == "audio/ogg")
        let bytes = try #require(Data(base64Encoded: attachment["content"]?.stringValue ?? ""))
        #expect(bytes.prefix(4) == Data("OggS".utf8))
    }

    @Test func `a start with no gateway connection fails with a CODE: message`() async throws {
        let rig = try await TalkRig.make(speakReplies: false)
        defer { Task { await rig.shutdown() } }
        try await rig.waitForMicrophone()
        await rig.session.stop()
        await #expect(throws: PTTError.self) { _ = try await rig.talk.start() }
        do { _ = try await rig.talk.start() } catch {
            #expect(error.description.hasPrefix("GATEWAY_NOT_CONNECTED: "))
        }
        #expect(await rig.talk.phase == .idle)
    }
}
}
