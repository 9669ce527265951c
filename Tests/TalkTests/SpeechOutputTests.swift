// Clip playback and the espeak-ng fallback: every gateway format plays with the right length
// at the speaker's monitor; each fallback trigger speaks with espeak-ng instead, and every
// talk.speak error falls back (fallbackEligible or not); a user stop is silent fast and never falls back.

import Audio
import ClawvoiceCore
import GatewayClient
import Foundation
import GatewayProtocol
import LoopbackGateway
import Talk
import Testing

/// Records the speaker monitor while `body` runs and returns the 16 kHz mono audio.
func recordSpeaker(_ rig: TalkRig, _ body: () async throws -> Void) async throws -> [Int16] {
    let capture = PulseCapture(connection: rig.speakerTap, source: "cv_speaker.monitor")
    try await capture.start()
    let collected = Locked<[Int16]>([])
    let reader = Task { for await f in capture.frames { collected.withLock { $0 += f.pcm.samples } } }
    try await body()
    try await Task.sleep(for: .milliseconds(300))
    capture.stop()
    await reader.value
    return collected.withLock { $0 }
}

extension TalkAudio {
@Suite struct SpeechOutputTests {
    @Test(arguments: ["pcm_16000", "pcm_24000", "pcm_44100", "mp3_44100_128", "opus", "wav"])
    func `every gateway clip format plays with its length at the speaker`(format: String) async throws {
        let rig = try await TalkRig.make(speakReplies: false)
        defer { Task { await rig.shutdown() } }
        var config = SpeechConfig()
        config.talkOutputFormat = format
        await rig.speech.update(config: config)
        var report: SpeechReport?
        let heard = try await recordSpeaker(rig) {
            report = await rig.speech.speak("The quick brown fox.", route: .talkSpeak)
        }
        let r = try #require(report)
        #expect(r.engine == "gateway", "\(format): \(r.fallbackReason ?? r.error ?? "")")
        #expect(r.outcome == .finished)
        let span = try #require(Signal.activeSpan(heard))
        let heardMs = Double(span.1 - span.0) / 16
        // The clip's own length (espeak's leading/trailing quiet is part of it) bounds what is audible.
        #expect(heardMs <= r.durationMs + 40 && heardMs >= r.durationMs - 400, "\(format): heard \(heardMs) ms of a \(r.durationMs) ms clip")
    }

    // damagedOggOpus, lowRateWAV and overlongClip: issue 11 items 2 and 3 (they played before).
    @Test(arguments: [LoopbackGateway.AudioFault.corruptClip, .mislabelledClip, .headerlessClip, .emptyClip, .errorFallbackEligible,
                      .damagedOggOpus, .lowRateWAV, .overlongClip])
    func `a clip that cannot be played falls back to espeak-ng`(fault: LoopbackGateway.AudioFault) async throws {
        let rig = try await TalkRig.make(speakReplies: false)
        defer { Task { await rig.shutdown() } }
        await rig.gateway.setAudioFault(fault)
        var report: SpeechReport?
        let heard = try await recordSpeaker(rig) { report = await rig.speech.speak("Falling back now.", route: .talkSpeak) }
        let r = try #require(report)
        #expect(r.engine == "espeak-ng" && r.outcome == .finished, "\(fault): \(r)")
        #expect(r.fallbackReason != nil)
        #expect(Signal.activeSpan(heard) != nil, "espeak-ng audio reached the speaker")
    }

    /// Issue 12, product decision: the user always hears the answer, whatever talk.speak's error says.
    @Test(arguments: [LoopbackGateway.AudioFault.errorNotEligible, .errorInvalidAudioResult, .errorFallbackEligible])
    func `any talk.speak error falls back to espeak-ng, fallback-eligible or not, and so does tts.speak`(fault: LoopbackGateway.AudioFault) async throws {
        let rig = try await TalkRig.make(speakReplies: false)
        defer { Task { await rig.shutdown() } }
        await rig.gateway.setAudioFault(fault)
        var report: SpeechReport?
        let heard = try await recordSpeaker(rig) { report = await rig.speech.speak("Heard anyway.", route: .talkSpeak) }
        let talk = try #require(report)
        #expect(talk.engine == "espeak-ng" && talk.outcome == .finished, "\(fault): \(talk)")
        #expect(Signal.activeSpan(heard) != nil, "espeak-ng audio reached the speaker")
        let reason = try #require(talk.fallbackReason)
        if fault != .errorFallbackEligible {
            #expect(reason.contains("not fallback-eligible") && reason.contains(fault == .errorNotEligible ? "synthesis_failed" : "invalid_audio_result"), "\(reason)")
        }
        let tts = await rig.speech.speak("Listen anyway.", route: .ttsSpeak)
        #expect(tts.engine == "espeak-ng" && tts.outcome == .finished)
        // Prepared (streamed) sentences take the same path.
        let prepared = await rig.speech.prepare("A streamed sentence.", route: .talkSpeak)
        #expect(prepared.report.engine == "espeak-ng" && prepared.pcm != nil)
    }

    @Test func `a stop silences the speaker within 50 ms and never falls back`() async throws {
        let rig = try await TalkRig.make(speakReplies: false)
        defer { Task { await rig.shutdown() } }
        let capture = PulseCapture(connection: rig.speakerTap, source: "cv_speaker.monitor")
        try await capture.start()
        let frames = Locked<[(ContinuousClock.Instant, Double)]>([])
        let reader = Task { for await f in capture.frames { frames.withLock { $0.append((f.receivedAt, f.pcm.rms)) } } }
        let speaking = Task { await rig.speech.speak("This is a long sentence that keeps going for quite a while so that it can be interrupted in the middle.", route: .talkSpeak) }
        // Wait until it is audible, then stop.
        let deadline = ContinuousClock.now + .seconds(10)
        while frames.withLock({ $0.last?.1 ?? 0 }) < 0.01 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        let stopAt = ContinuousClock.now
        await rig.speech.stop()
        let report = await speaking.value
        try await Task.sleep(for: .milliseconds(500))
        capture.stop()
        await reader.value
        #expect(report.outcome == .stopped)
        #expect(report.engine != "espeak-ng", "a user stop never falls back")
        // Frames are stamped when they arrive from PulseAudio; allow one 20 ms fragment of transport.
        let after = frames.withLock { $0 }.filter { $0.0 > stopAt + .milliseconds(70) }
        #expect(!after.isEmpty)
        #expect(after.allSatisfy { $0.1 < 0.005 }, "loud frames after stop: \(after.filter { $0.1 >= 0.005 }.count)")
        let calls = await rig.gateway.speakCalls()
        #expect(calls.count == 1)
    }
}
}
