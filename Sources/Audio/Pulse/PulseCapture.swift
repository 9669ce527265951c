// PulseCapture: owns one PulseAudio record stream: 16 kHz mono s16le from a source chosen by name,
// re-chunked into exact 20 ms frames and handed out through a bounded AsyncStream. When the server
// goes away it waits, and when the connection is ready again it re-creates its stream by itself
// and records the gap. The stream itself is a CaptureCore (PulseCaptureCore.swift).

internal import CPulse
public import ClawvoiceCore
import Foundation

/// One 20 ms frame as it left PulseAudio.
public struct CapturedFrame: Sendable {
    /// Exactly one frame length of 16 kHz mono s16le (320 samples for 20 ms).
    public var pcm: PCMBuffer
    /// 0, 1, 2, … in delivery order for this capture (a dropped frame still used its number).
    public var sequence: Int
    /// When libpulse handed over the bytes that completed this frame.
    public var receivedAt: ContinuousClock.Instant
    /// The first frame after the server came back: the audio before it does not join up.
    public var followsGap: Bool
    /// When its last sample was recorded, as PulseAudio's timing info puts it: receivedAt less
    /// the source's latency and the newer audio read with it (frames read together are 20 ms
    /// apart). The echo canceller matches the speaker's reference to it.
    public var recordedAt: ContinuousClock.Instant

    public init(pcm: PCMBuffer, sequence: Int, receivedAt: ContinuousClock.Instant, followsGap: Bool,
                recordedAt: ContinuousClock.Instant? = nil) {
        self.pcm = pcm
        self.sequence = sequence
        self.receivedAt = receivedAt
        self.followsGap = followsGap
        self.recordedAt = recordedAt ?? receivedAt
    }
}

/// What a capture is doing, for `clawvoice status`.
public enum CaptureStatus: Sendable, Equatable, CustomStringConvertible {
    /// Not started.
    case idle
    /// Waiting for its stream to connect.
    case starting
    /// Frames are flowing.
    case running
    /// The sound server is gone; the stream comes back with the connection.
    case waitingForServer
    /// The stream failed while the server was fine (one line); it is retried every 2 s.
    case failed(String)
    /// `stop()` was called.
    case stopped

    public var description: String {
        switch self {
        case .idle: return "idle"
        case .starting: return "starting"
        case .running: return "running"
        case .waitingForServer: return "waiting for the sound server"
        case .failed(let reason): return "failed: \(reason)"
        case .stopped: return "stopped"
        }
    }
}

/// Records from a PulseAudio source at 16 kHz mono s16le in 20 ms frames.
///
/// Create, `start()`, read `frames`, `stop()` (which also finishes `frames`). One start per object.
/// Call `stop()`: a started capture keeps itself alive, and keeps recording, until then.
public final class PulseCapture: Sendable {
    public let connection: PulseConnection
    /// The source name (`audio.source`), or nil for the server's default source.
    public let source: String?
    public let format: AudioFormat
    public let frameMilliseconds: Int
    /// Frames waiting for the consumer; when it falls behind, the oldest are dropped and counted.
    public let frames: AsyncStream<CapturedFrame>
    /// The capture's state, behind the connection's main loop lock.
    private let locked: MainloopLocked<CaptureCore>

    /// - Parameters:
    ///   - source: a source name from `clawvoice audio devices`, or nil for the default.
    ///   - bufferedFrames: how many frames may wait for the consumer (default 100 = 2 s).
    public init(connection: PulseConnection, source: String? = nil, frameMilliseconds: Int = 20,
                bufferedFrames: Int = 100) {
        self.connection = connection
        self.source = source
        self.format = .voice
        self.frameMilliseconds = frameMilliseconds
        let (frames, continuation) = AsyncStream.makeStream(of: CapturedFrame.self,
                                                            bufferingPolicy: .bufferingNewest(max(bufferedFrames, 1)))
        self.frames = frames
        locked = MainloopLocked(mainloop: connection.locked.mainloop,
                                core: CaptureCore(connection: connection, source: source, format: .voice,
                                                  frameMilliseconds: frameMilliseconds, continuation: continuation))
        locked.withLock { $0.owner = self }
    }

    // MARK: - Observing

    public var status: CaptureStatus { locked.withLock { $0.currentStatus } }

    /// Frames dropped because the consumer of `frames` fell behind.
    public var droppedFrames: Int { locked.withLock { $0.dropped } }

    /// One entry per resumption after the server came back: the time from the last frame before
    /// the loss to the first frame after it.
    public var gaps: [Duration] { locked.withLock { $0.recordedGaps } }

    /// Called on a private serial queue, in order, for every status change.
    public var onStatusChange: (@Sendable (CaptureStatus) -> Void)? {
        get { locked.withLock { $0.statusHandler } }
        set { locked.withLock { $0.statusHandler = newValue } }
    }

    /// Called on the sound server's thread, in order, for every frame, instead of `frames` (which
    /// then only finishes): it must return at once (post the frame on). Saves the consumer's wake-up
    /// per frame, most of an idle node's CPU (issue 25). Set before `start()`.
    public var onFrame: (@Sendable (CapturedFrame) -> Void)? {
        get { locked.withLock { $0.frameHandler } }
        set { locked.withLock { $0.frameHandler = newValue } }
    }

    // MARK: - Control

    /// Connects the record stream and returns once it runs.
    /// - Throws: `PulseError.noSuchSource` for an unknown source name, `.notConnected` when the
    ///   server is unreachable for `timeout`, `.call` for anything else libpulse refuses.
    public func start(timeout: Duration = .seconds(5)) async throws {
        try await connection.waitUntilReady(timeout: timeout)
        try await withCheckedThrowingContinuation { (waiter: CheckedContinuation<Void, any Error>) in
            locked.withLock { $0.start(waiter) }
        }
    }

    /// Stops recording and finishes `frames`. Safe to call more than once, from any thread.
    public func stop() { locked.withLock { $0.stop() } }

    /// Asks the server for reads of `milliseconds` (whole frames, at least one) from now on, and
    /// for a stream opened again after the server came back: larger reads, fewer wake-ups of the
    /// sound server's thread and ours (issue 25). Frames stay `frameMilliseconds` long.
    public func setFragment(milliseconds: Int) { locked.withLock { $0.setFragment(milliseconds: milliseconds) } }

    /// A stream that failed on a healthy server (its source was unplugged, say) is retried every 2 s.
    func retry(after seconds: Double, token: Int) {
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [weak self] in
            self?.locked.withLock { core in
                guard core.retryToken == token else { return }
                core.openStream()
            }
        }
    }
}
