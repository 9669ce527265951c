// PulsePlayback: owns PulseAudio playback streams to one sink: a whole clip (`play`) or audio
// that arrives in pieces (`open`, `write`, `finish`), each stream at the audio's own rate and
// channels, with a short server buffer so `stop()` silences the speaker within tens of
// milliseconds. Each stream is a PlaybackSession (PulsePlaybackSession.swift).

internal import CPulse
public import ClawvoiceCore
import Foundation

/// How a playback ended.
public enum PlaybackOutcome: Sendable, Equatable {
    /// Every sample was played (the stream drained).
    case finished
    /// `stop()` (or a newer `open`) cut it short.
    case stopped
}

/// Plays PCM on a PulseAudio sink. One stream at a time: opening a new one stops the current one.
public final class PulsePlayback: Sendable {
    public let connection: PulseConnection
    /// The sink name (`audio.sink`), or nil for the server's default sink.
    public let sink: String?
    /// Target server-side buffer (tlength) in milliseconds: what `stop()` may still let out, and
    /// the margin against underruns. 60 ms keeps stop fast and survives a busy machine.
    public let targetLatencyMs: Int
    /// The current stream and the volume, behind the connection's main loop lock.
    private let locked: MainloopLocked<PlaybackState>

    public init(connection: PulseConnection, sink: String? = nil, targetLatencyMs: Int = 60) {
        self.connection = connection
        self.sink = sink
        self.targetLatencyMs = max(targetLatencyMs, 10)
        let state = PlaybackState()
        locked = MainloopLocked(mainloop: connection.locked.mainloop, core: state)
        let id = connection.addObserver { [weak state] change, _ in
            // A clip cut off by a server restart is not resumed: its moment has passed.
            if change != .ready { state?.current?.fail(.connectionLost) }
        }
        locked.withLock { $0.observerID = id }
    }

    deinit {
        let connection = self.connection
        locked.withLock { state in
            if let id = state.observerID { connection.removeObserver(id) }
            state.current?.stop()
        }
    }

    /// The level of our own playback streams in percent of PulseAudio's normal volume (as
    /// `pactl` shows it; 100 is unchanged). Every new stream starts at it.
    public var volumePercent: Int { locked.withLock { $0.volume } }

    /// Sets the level of our playback: the stream playing now changes at once (its sink input's
    /// volume), and every later stream starts at it. Clamped to 0…150.
    public func setVolume(percent: Int) {
        locked.withLock { state in
            state.volume = min(max(percent, 0), 150)
            state.current?.applyVolume(state.volume)
        }
    }

    /// Whether a stream is open and has not finished.
    public var isPlaying: Bool { locked.withLock { $0.current?.isActive ?? false } }

    /// When the first bytes of the current (or last) stream were handed to the server: subtract
    /// the clip's arrival time to get "clip arrival to first sample" minus the sink's latency.
    public var firstWriteAt: ContinuousClock.Instant? {
        locked.withLock { $0.current?.firstWriteAt ?? $0.lastFirstWriteAt }
    }

    /// PulseAudio's timing info for the stream playing now (pa_stream_get_time and
    /// pa_stream_get_latency, interpolated between the server's timing updates), or nil before
    /// the server has reported any. The echo canceller times its reference with it.
    public func timing() -> PlaybackTiming? { locked.withLock { $0.current?.timingLocked() } }

    /// Plays `pcm` at its own rate and channels and returns once it has drained from the server
    /// (`.finished`) or was cut short by `stop()` (`.stopped`).
    /// - Throws: `PulseError.noSuchSink`, `.notConnected`, `.connectionLost`, `.call`.
    public func play(_ pcm: PCMBuffer, timeout: Duration = .seconds(5)) async throws -> PlaybackOutcome {
        let session = try await openSession(format: pcm.format, timeout: timeout)
        locked.withLock { _ in session.enqueue(pcm) }
        return try await finish(session)
    }

    /// Opens a stream for audio in `format` that will arrive through `write`; stops any current one.
    public func open(format: AudioFormat, timeout: Duration = .seconds(5)) async throws {
        _ = try await openSession(format: format, timeout: timeout)
    }

    private func openSession(format: AudioFormat, timeout: Duration) async throws -> PlaybackSession {
        try await connection.waitUntilReady(timeout: timeout)
        let session = locked.withLock { state in
            let session = PlaybackSession(connection: connection, format: format, sink: sink, targetLatencyMs: targetLatencyMs)
            session.volumePercent = state.volume
            if let previous = state.current {
                state.lastFirstWriteAt = previous.firstWriteAt
                previous.stop()
            }
            state.current = session
            return session
        }
        try await withCheckedThrowingContinuation { (waiter: CheckedContinuation<Void, any Error>) in
            locked.withLock { _ in session.connect(waiter) }
        }
        return session
    }

    /// Queues `pcm` on the stream `open` returned most recently. After `stop()` it is discarded.
    /// - Throws: `PulseError.closed` when nothing was opened, `.formatMismatch` for another format.
    public func write(_ pcm: PCMBuffer) throws {
        try locked.withLock { state in
            guard let session = state.current else { throw PulseError.closed }
            guard pcm.format == session.format else {
                throw PulseError.formatMismatch(expected: session.format, got: pcm.format)
            }
            session.enqueue(pcm)
        }
    }

    /// Says no more audio follows, waits for the queued audio to play out, and returns the outcome.
    public func finish() async throws -> PlaybackOutcome {
        guard let session = locked.withLock({ $0.current }) else { throw PulseError.closed }
        return try await finish(session)
    }

    private func finish(_ session: PlaybackSession) async throws -> PlaybackOutcome {
        try await withCheckedThrowingContinuation { (waiter: CheckedContinuation<PlaybackOutcome, any Error>) in
            locked.withLock { _ in session.finish(waiter) }
        }
    }

    /// Cuts playback now: flushes what the server holds and disconnects the stream, so the sink
    /// goes quiet within about one server buffer (targetLatencyMs). `play`/`finish` return `.stopped`.
    public func stop() {
        locked.withLock { state in
            if let session = state.current {
                state.lastFirstWriteAt = session.firstWriteAt
                session.stop()
            }
            state.current = nil
        }
    }
}

/// PulsePlayback's state; touched only with the main loop lock held.
private final class PlaybackState {
    var current: PlaybackSession?
    var observerID: Int?
    var lastFirstWriteAt: ContinuousClock.Instant?
    var volume = 100
}

/// Where a playback stream is, read at `at`.
public struct PlaybackTiming: Sendable {
    public var at: ContinuousClock.Instant
    /// How far into the stream the sample being heard now is (the sink's latency accounted).
    public var positionMicroseconds: UInt64
    /// How long a sample written now takes to be heard (what is queued plus the sink's latency).
    public var latencyMicroseconds: UInt64
    /// When the stream's first sample was (or will be) heard.
    public var startedAt: ContinuousClock.Instant { at - .microseconds(Int64(positionMicroseconds)) }
}
