// Full duplex on a loudspeaker (issue 14), on the talk tests' PulseAudio: the speaker's monitor
// is looped back into the microphone (module-loopback, 40 ms), so the node hears its own voice
// as a room would give it back. Without echo cancellation that echo alone "barges in"; with it
// the assistant speaks undisturbed, and a person talking over it stops it.

import Audio
import ClawvoiceCore
import ClawvoiceTesting
import Foundation
import GatewayProtocol
import Talk
import Testing

extension TalkAudio {
@Suite struct EchoCancelTests {
    /// Loads a loopback from the speaker's monitor into the microphone sink; returns its module index.
    static func loopSpeakerIntoMicrophone() throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/pactl")
        p.arguments = ["-s", TalkPulse.server, "load-module", "module-loopback", "source=cv_speaker.monitor", "sink=cv_mic",
                       "latency_msec=40", "source_dont_move=true", "sink_dont_move=true"]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        p.waitUntilExit()
        let index = String(data: out.fileHandleForReading.readDataToEndOfFile(), encoding: .utf8)?
            .trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        guard p.terminationStatus == 0, !index.isEmpty else { throw TestFailure("pactl load-module module-loopback failed") }
        // A room gives the speaker back quieter than it plays: the loop's stream at 70 % (about −9 dB).
        try pactl(["set-sink-input-volume", try loopStream(index), "70%"])
        return index
    }

    static func pactl(_ args: [String]) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/pactl")
        p.arguments = ["-s", TalkPulse.server] + args
        try p.run()
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { throw TestFailure("pactl \(args.joined(separator: " ")) failed") }
    }

    /// The loopback's sink input (`pactl list short sink-inputs`: index, sink, client, driver, …);
    /// one loopback is loaded at a time.
    static func loopStream(_ module: String) throws -> String {
        for _ in 0..<20 {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/pactl")
            p.arguments = ["-s", TalkPulse.server, "list", "short", "sink-inputs"]
            let out = Pipe()
            p.standardOutput = out
            try p.run()
            p.waitUntilExit()
            let text = String(data: out.fileHandleForReading.readDataToEndOfFile(), encoding: .utf8) ?? ""
            for line in text.split(separator: "\n") {
                let cols = line.split(separator: "\t")
                if cols.count > 3 && cols[3].hasPrefix("module-loopback") { return String(cols[0]) }
            }
            usleep(50_000)
        }
        throw TestFailure("the loopback module \(module) has no sink input")
    }

    static func unload(_ index: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/pactl")
        p.arguments = ["-s", TalkPulse.server, "unload-module", index]
        try? p.run()
        p.waitUntilExit()
    }

    static let reply = WakeOverReplyScenario.reply

    /// A rig whose speaker is looped into its microphone, speaking the long reply.
    static func speakIntoTheRoom(headset: Bool, echoCancel: Bool) async throws -> (TalkRig, String, Task<SpeechReport, Never>) {
        let rig = try await TalkRig.make(speakReplies: false, headset: headset, echoCancel: echoCancel)
        try await rig.waitForMicrophone()
        let loop = try loopSpeakerIntoMicrophone()
        try await Task.sleep(for: .milliseconds(300))
        let speech = rig.speech
        return (rig, loop, Task { await speech.speak(reply, route: .local) })
    }

    @Test(arguments: [false, true])
    func `the node's own voice does not barge in when its echo is cancelled; it does when not`(echoCancel: Bool) async throws {
        // A "headset" without cancellation listens for barge-in while speaking: the control case.
        let (rig, loop, speaking) = try await Self.speakIntoTheRoom(headset: !echoCancel, echoCancel: echoCancel)
        defer { Task { await rig.shutdown() } }
        defer { Self.unload(loop) }
        try await Task.sleep(for: .seconds(5))
        let bargeIns = rig.talk.bargeIns
        await rig.speech.stop()
        _ = await speaking.value
        if echoCancel {
            #expect(bargeIns == 0, "the node's own echo barged in \(bargeIns) times")
            #expect(rig.talk.gatedFrames == 0, "the microphone stays open while the loudspeaker speaks")
        } else {
            #expect(bargeIns >= 1, "the looped-back echo reaches the microphone (control)")
        }
    }

    @Test func `a person talking over the loudspeaker stops it`() async throws {
        let (rig, loop, speaking) = try await Self.speakIntoTheRoom(headset: false, echoCancel: true)
        defer { Task { await rig.shutdown() } }
        defer { Self.unload(loop) }
        try await Task.sleep(for: .seconds(3))
        #expect(rig.talk.bargeIns == 0)
        let person = try Signal.speech("wait, stop, what about the weekend")
        // Time from the first voiced sample of the person's words, not from the file's start.
        let onsetMs = Double(Signal.activeSpan(person.samples)?.0 ?? 0) / 16
        let said = ContinuousClock.now + .milliseconds(Int(onsetMs))
        let play = Task { try await rig.micPlayer.play(person) }
        let report = await speaking.value
        let stoppedAfter = ContinuousClock.now - said
        _ = try? await play.value
        #expect(rig.talk.bargeIns == 1, "\(rig.log.all.withLock { $0.filter { $0.contains("echo canceller") }.suffix(20) })")
        #expect(report.outcome == .stopped, "\(report)")
        print("echo cancel: the assistant stopped \(stoppedAfter) after the person began speaking")
        #expect(stoppedAfter < .milliseconds(1000), "stopped \(stoppedAfter) after the person began")
    }
}
}
