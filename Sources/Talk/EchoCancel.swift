// Echo cancellation on the capture (issue 14): what the speaker plays is kept as the far-end
// reference (EchoReference, filled by the speech sink as each clip starts), and each 20 ms
// microphone frame is cleaned against the reference audio that was playing while it was
// recorded (CaptureCleaner, owned by the talk loop). With it, a loudspeaker need not mute the
// microphone while it speaks: barge-in and wake words work over the assistant's voice.

public import ClawvoiceCore
import Synchronization
import Audio
package import AudioFrontEnd
import Foundation
import GatewayClient

/// The speaker's current clip at 16 kHz mono, with the time it started, for the canceller.
///
/// A stopped clip is kept until the next one starts, or until a frame recorded a second after the
/// stop is read: frames reach the canceller tens of milliseconds after they were recorded, and
/// those recorded before the stop still hold its echo. Read back against silence, that echo (as loud as the user, at a barge-in)
/// went through uncancelled in the middle of the user's words, and the linear filter's history
/// held zeros where the clip had played for as long as it spans (WakeOverReplyTests).
public final class EchoReference: Sendable {
    private struct Clip {
        var start: ContinuousClock.Instant
        var samples: [Int16]
        var id: Int
        /// When it was stopped, and the index of the first sample not heard.
        var ended: (at: ContinuousClock.Instant, index: Int)?
    }
    private let state = Mutex<Clip?>(nil)
    private let clips = Mutex(0)
    private let offset = Mutex<Duration?>(nil)
    /// How far past its stop a frame's time goes before the stopped clip is let go. Measured on
    /// the frames' own times, not the wall clock, so a reader that stalls loses nothing.
    package static let stoppedHold: Duration = .seconds(1)
    public init() {}

    /// A clip starts playing now.
    public func begin(_ pcm: PCMBuffer) {
        let mono = pcm.mono()
        let at16k = (try? Resampler.convert(mono, toRateHz: 16_000).samples) ?? []
        let clip = clips.withLock { $0 += 1; return $0 }
        state.withLock { $0 = Clip(start: .now, samples: at16k, id: clip) }
    }

    /// PulseAudio's timing info says when the clip's first sample is heard (PlaybackTiming):
    /// from now on the reference follows it instead of the moment the clip was handed over.
    public func align(startedAt: ContinuousClock.Instant) {
        state.withLock { s in
            guard var current = s, current.ended == nil else { return }
            offset.withLock { $0 = startedAt - current.start }
            current.start = startedAt
            s = current
        }
    }

    /// The last measured playback latency: from handing a clip over to its first sample heard.
    public var measuredPlaybackLatency: Duration? { offset.withLock { $0 } }

    /// The clip ended or was stopped: nothing is heard from now on.
    public func end() {
        let now = ContinuousClock.now
        state.withLock { s in
            guard var c = s, c.ended == nil else { return }
            c.ended = (now, max(0, Self.index(now - c.start)))
            s = c
        }
    }

    /// A streamed clip (a realtime call's audio, 16 kHz mono) grows by what was just written to
    /// the speaker; `begin` an empty one first. Only the last minute is kept: 30 s go at a time,
    /// and the start moves on with them, so every kept sample keeps its time.
    public func append(_ samples16k: [Int16]) {
        state.withLock { s in
            guard var current = s, current.ended == nil else { return }
            s = nil  // one copy of the array while it grows
            current.samples += samples16k
            if current.samples.count > 16_000 * 60 {
                current.samples.removeFirst(16_000 * 30)
                current.start += .seconds(30)
            }
            s = current
        }
    }

    /// A time as a count of 16 kHz samples, and back.
    static func index(_ d: Duration) -> Int {
        Int(d.components.seconds) * 16_000 + Int(d.components.attoseconds / 62_500_000_000_000)
    }
    static func duration(samples n: Int) -> Duration { .microseconds(Int64(n) * 1_000_000 / 16_000) }

    /// The clip playing at `t` and the index in it of the sample heard then (nil: nothing plays).
    /// `span`: the caller reads that long a stretch up to `t`, so a clip stopped within it counts.
    func position(at t: ContinuousClock.Instant, span: Duration = .zero) -> (clip: Int, index: Int)? {
        let playing: (start: ContinuousClock.Instant, id: Int)? = state.withLock { s in
            guard let c = s else { return nil }
            if let e = c.ended {
                if t - e.at > Self.stoppedHold { s = nil; return nil }  // no earlier frame is still coming: let its samples go
                if t - span >= e.at { return nil }
            }
            return (c.start, c.id)
        }
        guard let playing else { return nil }
        return (playing.id, Self.index(t - playing.start))
    }

    /// `count` samples of `clip` ending at `end` (zeros outside it, after its stop, or when
    /// another clip plays).
    func samples(clip: Int, endingAt end: Int, count: Int) -> [Int16] {
        var out = [Int16](repeating: 0, count: count)
        state.withLock { s in
            guard let s, s.id == clip else { return }
            let heard = min(s.samples.count, s.ended?.index ?? Int.max)
            for i in 0..<count {
                let j = end - count + i
                if j >= 0 && j < heard { out[i] = s.samples[j] }
            }
        }
        return out
    }

    /// The `count` samples that were playing up to `t` (zeros where nothing played).
    public func samples(endingAt t: ContinuousClock.Instant, count: Int) -> [Int16] {
        guard let p = position(at: t, span: Self.duration(samples: count)) else { return [Int16](repeating: 0, count: count) }
        return samples(clip: p.clip, endingAt: p.index, count: count)
    }
}

/// Keeps the reference continuous: frame times jitter by milliseconds (the sound server hands
/// audio over in bursts, and its timing readings wander by a fragment, 5 ms, for up to a second
/// at a time), and a reference read afresh at each frame's time would repeat or skip samples,
/// which the cancellers cannot follow (a linear filter loses all it learnt on any move). So the
/// reference advances by exactly one frame per frame, and the frames' times only steer it, by
/// the median of their recent errors: more than 30 ms over the last five frames (the speaker
/// really started later: an underrun, a first timing reading) or 10 ms over the last 25 moves it
/// at once by that median, so that it lands on the frames' time and stays there; a new clip or
/// a jump of more than 100 ms (a new alignment) takes it at once. Smaller errors are left to the
/// cancellers, whose filters span them.
package struct ReferenceCursor {
    package init() {}
    private var next: Int?
    private var clip = -1
    private var errors: [Int] = []
    static let shortWindow = 5, shortSteer = 480
    static let longWindow = 25, longSteer = 160
    static let jumpSamples = 1_600
    /// How often the reference moved other than by one frame (a new clip excepted).
    private(set) var moves = 0

    /// The end, in the clip, of the reference for a frame of `count` samples whose time puts its end at `target`.
    package mutating func end(target: Int, clip c: Int, count: Int) -> Int {
        if c != clip || next == nil {
            next = target
            clip = c
            errors = []
        } else if abs(target - next!) > Self.jumpSamples {
            next = target
            errors = []
            moves += 1
        } else {
            errors.append(target - next!)
            if errors.count > Self.longWindow { errors.removeFirst() }
            func median(_ last: Int) -> Int? {
                guard errors.count >= last else { return nil }
                return errors.suffix(last).sorted()[last / 2]
            }
            let move = median(Self.shortWindow).flatMap { abs($0) > Self.shortSteer ? $0 : nil }
                ?? median(Self.longWindow).flatMap { abs($0) > Self.longSteer ? $0 : nil }
            if let move {
                next! += move
                errors = []   // they measured the old alignment
                moves += 1
            }
        }
        let e = next!
        next = e + count
        return e
    }
}

/// The capture's own clock: frames arrive late by whatever the machine's load adds (tens of
/// milliseconds, now and then hundreds), never early, while the samples themselves come at the
/// sound card's steady rate. So frame `i` ends at the stream's origin plus `i + 1` frames, the
/// origin being the earliest any frame's time puts it, allowed to creep later by a quarter of a
/// millisecond per frame (12.5 ms a second), so that it follows the lower edge of the recent
/// frames' times, and a sound card whose clock runs slower than ours. A server that skipped audio
/// under load makes every later frame late: after half a second of frames all more than 100 ms
/// late the origin moves to the earliest of them. Positions in samples.
package struct FrameClock {
    package init() {}
    private var origin: Int?
    private var samples = 0
    private var lateRun: [Int] = []

    /// The end of a frame of `count` samples whose time puts its end at `observed`.
    package mutating func end(observed: Int, count: Int) -> Int {
        samples += count
        let candidate = observed - samples
        if let o = origin, candidate >= o {
            origin = o + count / 80   // 4 samples (0.25 ms) per 20 ms frame
            if candidate - o > 1_600 {
                lateRun.append(candidate)
                if lateRun.count >= 25 { origin = lateRun.min(); lateRun = [] }
            } else {
                lateRun = []
            }
        } else {
            origin = candidate
            lateRun = []
        }
        return origin! + samples
    }

    /// A gap in the capture: the next frame starts a new stream.
    mutating func reset() { origin = nil; samples = 0; lateRun = [] }
}

/// One microphone frame cleaned two ways against the same reference.
package struct CleanedFrame {
    /// webrtc's canceller and noise suppressor: the uplink, the barge-in rule and the voice detector.
    package var uplink: PCMBuffer
    /// The linear canceller alone, no suppression (SpeexEchoCanceller): the wake and stop heads,
    /// which need the user's voice whole in double talk more than the last decibels of echo gone.
    /// The uplink's frame again once the speaker has been silent for longer than an echo lasts.
    package var detector: PCMBuffer
}

/// Cleans microphone frames against the reference; one per capture stream, used by one owner.
///
/// While the speaker is silent there is no echo to cancel (issue 25: at idle the cancellers were
/// most of the node's CPU): once the reference has been silent for longer than an echo lasts, a
/// frame goes through the noise suppressor alone (`quiet`, a webrtc instance without the
/// canceller) and the linear canceller is skipped, whose history is then all zeros and whose
/// output would be the microphone itself. The full instance keeps what it learnt of the room and
/// takes over again with the first frame the speaker plays; it is made only then.
package final class CaptureCleaner {
    private let options: AudioFrontEndOptions
    private var frontEnd: AudioFrontEnd?
    private var quiet: AudioFrontEnd?
    private var linear: SpeexEchoCanceller?
    /// Reference samples since the speaker last played anything (starts as "long ago").
    private var farQuietSamples = Int.max / 2
    /// How long the cancellers run, and the detectors stay on the linear path, after the speaker
    /// went quiet: an echo outlasts the reference by the filter's span (120 ms) and a margin, and
    /// a trigger begun over the reply and finished after a barge-in stopped it must be heard
    /// through one path, not half through each (1.5 s, a trigger's length; WakeOverReplyTests).
    static let detectorHoldSamples = 24_000
    /// False: every frame runs the cancellers (the bench's "before" figure).
    package var idleSkip = true
    /// Frames that went through the cancellers (the rest: the noise suppressor alone).
    private(set) var cancelledFrames = 0
    private let reference: EchoReference
    private var cursor = ReferenceCursor()
    /// The linear canceller's reference: each clip's delay, read from its echo.
    private var alignment = EchoAlignment()
    private var alignedClip = -1
    private var linearEnd = 0
    private var clock = FrameClock()
    private var base: ContinuousClock.Instant?
    /// The speaker's and the microphone's buffering: how late the echo reaches the microphone.
    let delayMs: Int

    package init(reference: EchoReference, delayMs: Int, options: AudioFrontEndOptions = CaptureCleaner.options) throws {
        self.options = options
        // Tried now, so that a front end that cannot be made fails here and not mid-stream; kept
        // only from the first frame the speaker plays (until then it would learn nothing).
        _ = try AudioFrontEnd(options: options)
        self.reference = reference
        self.delayMs = delayMs
    }

    /// What the node's capture runs: the canceller and the noise suppressor (webrtc's own voice
    /// verdict is not used: the voice detector decides).
    package static let options = AudioFrontEndOptions(echoCancel: true, noiseSuppress: true, gainControl: false, voiceDetect: false)

    /// The frame with the speaker's echo taken out (same length; the front end works in 10 ms
    /// steps, so a 20 ms frame comes back whole). `t`: when the frame's last sample was recorded.
    package func clean(_ frame: PCMBuffer, at observed: ContinuousClock.Instant) -> CleanedFrame {
        let n = frame.samples.count
        let base = self.base ?? observed
        self.base = base
        let d = observed - base
        let at = clock.end(observed: EchoReference.index(d), count: n)
        let t = base + EchoReference.duration(samples: at)
        let silence = [Int16](repeating: 0, count: n)
        guard let p = reference.position(at: t, span: EchoReference.duration(samples: n)) else { return clean(frame, far: silence, linearFar: silence) }
        let end = cursor.end(target: p.index, clip: p.clip, count: n)
        // The linear filter's reference runs on one frame per frame from where the clip began,
        // unsteered, and is moved onto the echo's own delay (EchoAlignment; negative: read ahead in
        // the clip); silence while the filter is held.
        if p.clip != alignedClip {
            alignedClip = p.clip
            linearEnd = end
            alignment.beginClip()
        } else {
            linearEnd += n
        }
        let linearFar = alignment.reference(near: frame.samples, end: linearEnd) { reference.samples(clip: p.clip, endingAt: $0, count: n) }
        return clean(frame, far: reference.samples(clip: p.clip, endingAt: end, count: n), linearFar: linearFar)
    }

    /// The capture lost audio: its clock starts afresh.
    func gap() {
        clock.reset()
        base = nil
    }

    /// The frame cleaned by both cancellers against the same `far` (the echo room's recordings and
    /// tests, whose reference is already where the frames were recorded).
    package func clean(_ frame: PCMBuffer, far: [Int16]) -> CleanedFrame { clean(frame, far: far, linearFar: far) }

    /// The frame cleaned against `far`, the speaker's samples that were playing while it was
    /// recorded, by webrtc (delayed by `delayMs` inside it), and against `linearFar` by the linear
    /// canceller, whose filter spans 0–120 ms of echo after it (`linearFar`: moved by the clip's
    /// measured echo delay, EchoAlignment, or silence while the filter is held).
    func clean(_ frame: PCMBuffer, far: [Int16], linearFar: [Int16]) -> CleanedFrame {
        let farSilent = !far.contains(where: { $0 != 0 })
        let quietBefore = farQuietSamples
        farQuietSamples = farSilent ? farQuietSamples + far.count : 0
        if idleSkip && farSilent && quietBefore > Self.detectorHoldSamples {
            let out = suppressedOnly(frame)
            return CleanedFrame(uplink: out, detector: out)
        }
        var uplink = frame
        cancelledFrames += 1
        do {
            let fe = try frontEnd ?? AudioFrontEnd(options: options)
            frontEnd = fe
            try fe.far(far)
            let (out, _) = try fe.near(frame.samples, delayMs: delayMs)
            if out.count == frame.samples.count { uplink = PCMBuffer(format: frame.format, samples: out) }
        } catch {}
        let lin = linear ?? SpeexEchoCanceller()
        linear = lin
        let linearOut = lin.process(near: frame.samples, far: linearFar)
        // With nothing played for longer than the filter's span there is no echo to take out, and
        // the heads hear better through the noise suppressor (more wakes with the speaker silent):
        // the detectors get the linear path only while an echo can be in the frame, and for a
        // trigger's length after.
        let detector = farQuietSamples > Self.detectorHoldSamples ? uplink : PCMBuffer(format: frame.format, samples: linearOut)
        return CleanedFrame(uplink: uplink, detector: detector)
    }

    /// The speaker is silent: the noise suppressor alone (the frame itself when it is off too).
    private func suppressedOnly(_ frame: PCMBuffer) -> PCMBuffer {
        guard options.noiseSuppress else { return frame }
        do {
            let q = try quiet ?? AudioFrontEnd(options: AudioFrontEndOptions(echoCancel: false, noiseSuppress: true, gainControl: options.gainControl, voiceDetect: false))
            quiet = q
            let (out, _) = try q.near(frame.samples, delayMs: 0)
            if out.count == frame.samples.count { return PCMBuffer(format: frame.format, samples: out) }
        } catch {}
        return frame
    }
}
