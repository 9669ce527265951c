// The echo room's two capture paths (issue 14): what RoomRecording's replays hand the uplink
// (webrtc's canceller and suppressor) and the wake and stop heads (speexdsp's linear canceller,
// no suppressor), and the barge-in latency over the assistant,
// for EchoRoomTests and clawvoice-bench --echo-only.

import Audio
import AudioFrontEnd
public import ClawvoiceCore
import Foundation
import Talk
public import WakeWord

extension RoomRecording {
    /// Both of the capture's paths in one pass: webrtc's (the uplink, barge-in and voice detector)
    /// and the linear canceller's (the wake and stop heads).
    public func cleanedPaths(near: [Int16]? = nil, timed: Bool = true, delayMs: Int = 60, noiseSuppress: Bool = true) throws
        -> (uplink: [Int16], detector: [Int16]) {
        var o = CaptureCleaner.options
        o.noiseSuppress = noiseSuppress
        let cleaner = try CaptureCleaner(reference: EchoReference(), delayMs: delayMs, options: o)
        var up: [Int16] = [], det: [Int16] = []
        up.reserveCapacity(mic.count)
        det.reserveCapacity(mic.count)
        let refs = references(timed: timed)
        for i in 0..<frames {
            let frame = micFrame(i, near: near)
            let both = cleaner.clean(PCMBuffer(format: .voice, samples: frame), far: refs[i])
            up += both.uplink.samples
            det += both.detector.samples
        }
        return (up, det)
    }

    /// The detectors' linear canceller alone over the frames (its ERLE and CPU, apart from webrtc's).
    public func linearCleaned(near: [Int16]? = nil, timed: Bool = true) -> [Int16] {
        let aec = SpeexEchoCanceller()
        var out: [Int16] = []
        out.reserveCapacity(mic.count)
        let refs = references(timed: timed)
        for i in 0..<frames { out += aec.process(near: micFrame(i, near: near), far: refs[i]) }
        return out
    }

    /// How often the reference's cursor moved (new clip, drift, realignment) over the recording.
    public func referenceJumps(timed: Bool = true) -> Int {
        var cursor = ReferenceCursor()
        var clock = FrameClock()
        var last: Int?, jumps = 0
        for i in 0..<frames {
            let observed = (timed ? frameEndsTimed : frameEndsHanded)[i]
            let end = cursor.end(target: timed ? clock.end(observed: observed, count: Self.frameSamples) : observed, clip: 0, count: Self.frameSamples)
            if let l = last, end != l + Self.frameSamples { jumps += 1 }
            last = end
        }
        return jumps
    }

    /// Barge-in latency over the assistant: for each user clip (`starts`, `lengths` in `near`)
    /// whose first voiced sample (the first above a tenth of the clip's peak) falls while the
    /// speaker plays, the time from that sample to TalkMachine's barge-in decision on `cleaned`
    /// (the uplink path's frames, the microphone plus `near`), in ms; nil: no barge-in within the
    /// clip while the speaker played.
    public func bargeInLatencies(cleaned out: [Int16], near: [Int16], starts: [Int], lengths: [Int],
                                 settings: TalkMachine.Settings = Self.loudspeaker) -> [Int?] {
        var m = TalkMachine(settings: settings)
        _ = m.handle(.microphone(.live), nowMs: 0)
        var decided: [Int] = []   // the end sample of each frame that barged in
        for i in 0..<frames {
            let frame = PCMBuffer(format: .voice, samples: Array(out[i * Self.frameSamples..<(i + 1) * Self.frameSamples]))
            let speaker = speakerPlaying(frame: i) ? SpeakerState(playing: true) : SpeakerState(playing: false, msSinceStopped: 10_000)
            let before = m.bargeIns
            _ = m.handle(.frame(frame, speaker: speaker), nowMs: Int64(i * 20))
            if m.bargeIns > before { decided.append((i + 1) * Self.frameSamples) }
        }
        return zip(starts, lengths).compactMap { s, l -> Int?? in
            let clip = near[s..<min(s + l, near.count)]
            let peak = clip.map { abs(Int($0)) }.max() ?? 0
            guard let first = clip.firstIndex(where: { abs(Int($0)) * 10 > peak }), speakerPlaying(frame: first / Self.frameSamples) else { return nil }
            guard let d = decided.first(where: { $0 > first && $0 <= s + l }) else { return .some(nil) }
            return .some((d - first) / 16)
        }
    }

    /// The wake-over-echo count of EchoRoomTests and `clawvoice-bench --echo-check`: held-out users
    /// (flite awb and rms) say `trigger` from `firstAt` on, `extraDb` above the echo's level; how
    /// many clips the detector hears over the assistant on the detectors' path and on webrtc's,
    /// and with the speaker silent (the reference, same clips).
    public func wakeOverEcho(detector: WakeDetector, trigger: String, extraDb: Double, firstAt: Int)
        throws -> (clips: Int, silent: Int, speaking: Int, webrtc: Int) {
        let echoDb = Endpointer.dbfs(rms: PCMBuffer(format: .voice, samples: mic).rms)
        let (near, starts, lengths) = try RoomSpeech.wakeClips(trigger: trigger, samples: mic.count, dbfs: echoDb + extraDb, firstAt: firstAt)
        func heard(_ stream: [Int16]) -> Int {
            RoomWake.heard(stream, detector: detector, phrase: trigger, starts: starts, lengths: lengths).filter { $0 }.count
        }
        let silentPaths = try silent.cleanedPaths(near: near), speaking = try cleanedPaths(near: near)
        return (starts.count, heard(silentPaths.detector), heard(speaking.detector), heard(speaking.uplink))
    }
}
