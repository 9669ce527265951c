// The capture front end: acoustic echo cancellation with the speaker's own signal as the
// far-end reference, noise suppression, gain control and a voice detector, from Debian's
// libwebrtc-audio-processing behind the thin C face in CWebRTCAudio. It works in 10 ms
// frames; `process` takes the capture's 20 ms frames and hands back the same length.

import CWebRTCAudio

public struct AudioFrontEndOptions: Sendable, Equatable {
    public var echoCancel = true
    public var noiseSuppress = true
    public var gainControl = false
    public var voiceDetect = true
    public init(echoCancel: Bool = true, noiseSuppress: Bool = true, gainControl: Bool = false, voiceDetect: Bool = true) {
        self.echoCancel = echoCancel
        self.noiseSuppress = noiseSuppress
        self.gainControl = gainControl
        self.voiceDetect = voiceDetect
    }
}

public struct AudioFrontEndError: Error, Sendable, CustomStringConvertible {
    public var description: String
}

/// One echo-cancelling front end for one 16 kHz mono capture stream. Not thread-safe: one owner
/// feeds both the far end (what is played) and the near end (what is heard), in time order.
public final class AudioFrontEnd {
    private let handle: OpaquePointer
    public let sampleRateHz: Int
    /// Samples in one 10 ms frame.
    public let frameSamples: Int
    private var farPending: [Int16] = []
    private var nearPending: [Int16] = []
    /// The detector's verdict on the last 10 ms frame processed.
    public private(set) var voice = false

    public init(sampleRateHz: Int = 16_000, options: AudioFrontEndOptions = AudioFrontEndOptions()) throws(AudioFrontEndError) {
        let o = cv_apm_options(echo_cancel: options.echoCancel ? 1 : 0, noise_suppress: options.noiseSuppress ? 1 : 0,
                               gain_control: options.gainControl ? 1 : 0, voice_detect: options.voiceDetect ? 1 : 0)
        guard let h = cv_apm_create(Int32(sampleRateHz), o) else {
            throw AudioFrontEndError(description: "the echo canceller does not take \(sampleRateHz) Hz (8, 16, 32 or 48 kHz)")
        }
        handle = h
        self.sampleRateHz = sampleRateHz
        frameSamples = Int(cv_apm_frame_samples(h))
    }

    deinit { cv_apm_destroy(handle) }

    /// What the speaker plays (at this front end's rate), as it is played.
    public func far(_ samples: [Int16]) throws(AudioFrontEndError) {
        farPending += samples
        var offset = 0
        while farPending.count - offset >= frameSamples {
            let rc = farPending.withUnsafeBufferPointer { cv_apm_process_far(handle, $0.baseAddress! + offset) }
            guard rc == 0 else { throw AudioFrontEndError(description: "echo canceller far end: error \(rc)") }
            offset += frameSamples
        }
        farPending.removeFirst(offset)
    }

    /// Microphone samples in, cleaned samples out (whole 10 ms frames; a partial tail waits for
    /// the next call). `delayMs`: the playback latency, from far-end frame to the microphone.
    /// Returns the samples and whether any frame in them held voice.
    public func near(_ samples: [Int16], delayMs: Int) throws(AudioFrontEndError) -> (samples: [Int16], voice: Bool) {
        nearPending += samples
        var out: [Int16] = []
        out.reserveCapacity(nearPending.count)
        var anyVoice = false
        var frame = [Int16](repeating: 0, count: frameSamples)
        var offset = 0
        while nearPending.count - offset >= frameSamples {
            for i in 0..<frameSamples { frame[i] = nearPending[offset + i] }
            var v: Int32 = 0
            let rc = frame.withUnsafeMutableBufferPointer { cv_apm_process_near(handle, $0.baseAddress!, Int32(delayMs), &v) }
            guard rc == 0 else { throw AudioFrontEndError(description: "echo canceller near end: error \(rc)") }
            voice = v != 0
            anyVoice = anyVoice || voice
            out += frame
            offset += frameSamples
        }
        nearPending.removeFirst(offset)
        return (out, anyVoice)
    }
}
