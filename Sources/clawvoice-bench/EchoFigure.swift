// The echo figures of clawvoice-bench (issue 14), on a private PulseAudio: `minutes` of the
// assistant (espeak-ng, six voices, rate and pitch varied) played once through the speaker sink
// in real time, its monitor recorded by the node's capture and given the room (40 ms, −9 dB,
// coloured) by EchoRoom's mixer; that recording is then replayed offline through the capture's
// echo canceller (CaptureCleaner), TalkMachine's barge-in rule and the wake detector:
//   - ERLE with the reference timed by PulseAudio's timing info against the clip's hand-over time,
//     and the detectors' linear canceller's ERLE on the same recording;
//   - false barge-ins over the whole recording (the assistant speaking alone);
//   - "computer" said by flite awb/rms over the assistant against the same clips with the
//     speaker silent (12 dB above the echo's level and at its level), on the detectors' path
//     (the linear canceller) and on webrtc's (what the wake head heard before);
//   - barge-in latency: a user starting to talk over the assistant, first voiced sample to decision;
//   - the front end's CPU per core against an Opus encode of the same audio, in this run.

import Audio
import AudioFrontEnd
import COpus
import ClawvoiceCore
import ClawvoiceTesting
import Foundation
import NodeRuntime
import Talk
import WakeWord

func threadCPU() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

func echoFigures(minutes: Double, keptIn file: String? = nil) async throws -> [Figure] {
    let rec: RoomRecording
    if let file, let data = FileManager.default.contents(atPath: file) {
        rec = try JSONDecoder().decode(RoomRecording.self, from: data)
        note("echo: replaying the recording kept in \(file)")
    } else {
        rec = try await echoRecording(minutes: minutes)
        if let file { try JSONEncoder().encode(rec).write(to: URL(fileURLWithPath: file)) }
    }
    return try echoFigures(rec)
}

func echoRecording(minutes: Double) async throws -> RoomRecording {
    let pulse = try await PrivatePulseServer()
    defer { pulse.stop() }
    var rec = try await RoomRecording.record(far: try RoomSpeech.assistant(seconds: minutes * 60), server: pulse.server)
    for _ in 0..<2 where rec.disturbed {
        note("echo: the recording was disturbed (playback took \(Int(rec.playbackLatencyMs)) ms to start, \(Int(rec.lostMs)) ms lost); again")
        rec = try await RoomRecording.record(far: try RoomSpeech.assistant(seconds: minutes * 60), server: pulse.server)
    }
    return rec
}

func echoFigures(_ rec: RoomRecording) throws -> [Figure] {
    let seconds = Double(rec.mic.count) / 16_000
    var out: [Figure] = []
    let t0 = threadCPU()
    let timed = try rec.cleaned(timed: true)   // both paths: webrtc's and the linear canceller's
    let frontEndCPU = threadCPU() - t0
    let t2 = threadCPU()
    let linear = rec.linearCleaned()
    let linearCPU = threadCPU() - t2
    note("echo: reference jumps \(rec.referenceJumps())")
    let handed = try rec.cleaned(timed: false)
    let erleTimed = rec.erle(cleaned: timed), erleHanded = rec.erle(cleaned: handed)
    out.append(Figure(name: "echo_erle_real_pulseaudio", value: erleTimed, unit: "dB", baseline: erleHanded, ratio: nil,
                      detail: String(format: "%.0f s of the assistant through the speaker sink of a real PulseAudio, its monitor recorded by the node's capture, room 40 ms / −9 dB / coloured; reference timed by PulseAudio's timing info (playback latency %.0f ms, capture %.0f ms); baseline: the reference timed by the clip's hand-over, as before (goal ≥ 25 dB)%@",
                                      seconds, rec.playbackLatencyMs, rec.captureLatencyMs, rec.disturbed ? "; DISTURBED by the machine's load" : "")))
    out.append(Figure(name: "echo_erle_linear_detector_path", value: rec.erle(cleaned: linear), unit: "dB", baseline: erleTimed, ratio: nil,
                      detail: "the same recording through the detectors' linear canceller alone (speexdsp's, SpeexEchoCanceller, no suppression); baseline: webrtc's canceller and suppressor (the uplink's path)"))
    let falseBargeIns = rec.bargeIns(cleaned: timed)
    out.append(Figure(name: "echo_false_barge_ins", value: Double(falseBargeIns), unit: "barge-ins", baseline: Double(rec.bargeIns(cleaned: rec.mic)), ratio: nil,
                      detail: String(format: "over %.1f min of the assistant speaking alone, echo cancelled (TalkMachine's rule: 120 ms above −45 dBFS); baseline: the same echo not cancelled (goal 0)", seconds / 60)))

    let dir = WakeModelCatalog.defaultDirectory()
    if let model = try WakeModelCatalog(directory: dir).load(["computer"]).models.first {
        let detector = WakeDetector(models: [model])
        let echoDb = Endpointer.dbfs(rms: PCMBuffer(format: .voice, samples: rec.mic).rms)
        func count(_ stream: [Int16], _ starts: [Int], _ lengths: [Int]) -> Int {
            RoomWake.heard(stream, detector: detector, phrase: "computer", starts: starts, lengths: lengths).filter { $0 }.count
        }
        for extra in [12.0, 0.0] {
            let (near, starts, lengths) = try RoomSpeech.wakeClips(trigger: "computer", samples: rec.mic.count, dbfs: echoDb + extra)
            let silent = try rec.silent.cleanedPaths(near: near), speaking = try rec.cleanedPaths(near: near)
            let silentUp = count(silent.uplink, starts, lengths), speakingUp = count(speaking.uplink, starts, lengths)
            let silentDet = count(silent.detector, starts, lengths), speakingDet = count(speaking.detector, starts, lengths)
            out.append(Figure(name: "echo_wake_while_speaking_\(Int(extra))dB", value: Double(speakingDet), unit: "detections", baseline: Double(silentDet),
                              ratio: Double(speakingDet) / Double(max(silentDet, 1)),
                              detail: String(format: "the detectors' path (linear canceller): \"computer\" (the shipped head with usable detection on held-out voices) in %d commands by flite awb/rms, %.0f dB above the echo's level (%.1f dBFS): heard over the assistant vs with the speaker silent, same clips (goal ratio ≥ 0.8)", starts.count, extra, echoDb)))
            out.append(Figure(name: "echo_wake_while_speaking_\(Int(extra))dB_webrtc_path", value: Double(speakingUp), unit: "detections", baseline: Double(silentUp),
                              ratio: Double(speakingUp) / Double(max(silentUp, 1)),
                              detail: String(format: "the same clips on webrtc's path (canceller + suppressor, what the wake head heard before): over the assistant vs speaker silent, %.0f dB above the echo", extra)))
            let latencies = rec.bargeInLatencies(cleaned: speaking.uplink, near: near, starts: starts, lengths: lengths)
            let heard = latencies.compactMap { $0 }.sorted()
            note("echo: barge-in at +\(Int(extra)) dB: \(latencies.map { $0.map(String.init) ?? "-" }.joined(separator: " ")) ms")
            if !heard.isEmpty {
                out.append(Figure(name: "echo_barge_in_latency_\(Int(extra))dB", value: Double(heard[heard.count / 2]), unit: "ms (median)", baseline: Double(heard.last!), ratio: nil,
                                  detail: String(format: "a user (flite awb/rms, %.0f dB above the echo) starting to talk over the assistant: from their first voiced sample to TalkMachine's barge-in on webrtc's path (120 ms above −45 dBFS), over the %d commands that began while the speaker played; baseline: the slowest; %d of them never barged in (goal ≤ 300 ms)", extra, latencies.count, latencies.count - heard.count)))
            }
        }
    } else {
        note("echo: no computer model in \(dir); wake figure skipped")
    }

    // CPU: the whole front end (canceller, noise suppressor, voice detector, the reference's
    // handling) over the recording, against libopus encoding the same audio (the uplink).
    var error: Int32 = 0
    let enc = opus_encoder_create(16_000, 1, OPUS_APPLICATION_VOIP, &error)!
    defer { opus_encoder_destroy(enc) }
    _ = cv_opus_set_bitrate(enc, 20_000)
    _ = cv_opus_set_complexity(enc, 5)
    var packet = [UInt8](repeating: 0, count: 1500)
    let t1 = threadCPU()
    rec.mic.withUnsafeBufferPointer { pcm in
        for f in 0..<rec.frames { _ = opus_encode(enc, pcm.baseAddress! + f * 320, 320, &packet, Int32(packet.count)) }
    }
    let opusCPU = threadCPU() - t1
    let ours = 100 * frontEndCPU / seconds, base = 100 * opusCPU / seconds
    out.append(Figure(name: "echo_front_end_cpu", value: ours, unit: "% of a core", baseline: base, ratio: ours / max(base, 1e-9),
                      detail: String(format: "thread CPU of the capture's front end (webrtc's canceller, suppressor and VAD, the linear canceller, the reference's handling) over %.0f s of recorded audio (replayed offline); baseline: libopus encoding the same audio (20 kbit/s, complexity 5, the uplink) in this run", seconds)))
    let lin = 100 * linearCPU / seconds
    out.append(Figure(name: "echo_linear_canceller_cpu", value: lin, unit: "% of a core", baseline: base, ratio: lin / max(base, 1e-9),
                      detail: "thread CPU of the detectors' linear canceller alone (part of the figure above); baseline: the same Opus encode"))
    return out
}
