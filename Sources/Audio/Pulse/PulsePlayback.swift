// PulsePlayback: owns PulseAudio playback streams to one sink: a whole clip (`play`) or audio
// that arrives in pieces (`open`, `write`, `finish`), each stream at the audio's own rate and
// channels, with a short server buffer so `stop()` silences the speaker within tens of
// milliseconds. The only file that calls pa_stream_connect_playback, pa_stream_write,
// pa_stream_drain and pa_stream_flush.

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

/// One playback stream: the bytes waiting for libpulse to ask for them, and the waiters for its
/// connection and its drain. Everything here runs with the connection's main loop lock held:
/// PulsePlayback reaches it only through its MainloopLocked box, libpulse through its callbacks.
private final class PlaybackSession {
    let format: AudioFormat
    let connection: PulseConnection
    let sink: String?
    let targetLatencyMs: Int

    private enum Phase { case created, connecting, open, draining, done(PlaybackOutcome), failed(PulseError) }

    private var phase: Phase = .created
    private var stream: OpaquePointer?
    private var retainedSelf: Unmanaged<PlaybackSession>?
    private var drainOperation: OpaquePointer?
    private var pending: [UInt8] = []
    private var pendingOffset = 0
    private var finishing = false
    private var connectWaiter: CheckedContinuation<Void, any Error>?
    private var finishWaiters: [CheckedContinuation<PlaybackOutcome, any Error>] = []
    private(set) var firstWriteAt: ContinuousClock.Instant?
    /// Lock held: the stream's level, set before it connects.
    var volumePercent = 100

    init(connection: PulseConnection, format: AudioFormat, sink: String?, targetLatencyMs: Int) {
        self.connection = connection
        self.format = format
        self.sink = sink
        self.targetLatencyMs = targetLatencyMs
    }

    var isActive: Bool {
        switch phase {
        case .created, .connecting, .open, .draining: return true
        case .done, .failed: return false
        }
    }

    // MARK: - Lock held throughout

    /// Creates and connects the stream; `waiter` resumes when it is ready (or was stopped meanwhile).
    func connect(_ waiter: CheckedContinuation<Void, any Error>) {
        guard case .created = phase else {
            // stop() came first: let the caller go on to a finish() that says .stopped.
            waiter.resume()
            return
        }
        connectWaiter = waiter
        phase = .connecting
        openStream()
    }

    /// `waiter` resumes once everything queued has played (`.finished`) or the stream was stopped.
    func finish(_ waiter: CheckedContinuation<PlaybackOutcome, any Error>) {
        switch phase {
        case .done(let outcome): waiter.resume(returning: outcome)
        case .failed(let error): waiter.resume(throwing: error)
        case .created, .connecting, .open, .draining:
            finishWaiters.append(waiter)
            finishing = true
            pump()
        }
    }

    func enqueue(_ pcm: PCMBuffer) {
        guard isActive, !finishing else { return }
        pending += pcm.bytes
        pump()
    }

    func stop() {
        guard isActive else { return }
        if let s = stream {
            cancelDrain()
            // Flush drops what the server holds for this stream and rewinds the sink; the
            // disconnect then removes the stream, so nothing queued reaches the speaker.
            if PA_STREAM_IS_GOOD(pa_stream_get_state(s)) != 0, let op = pa_stream_flush(s, nil, nil) {
                pa_operation_unref(op)
            }
        }
        end(.done(.stopped))
    }

    func fail(_ error: PulseError) {
        guard isActive else { return }
        end(.failed(error))
    }

    /// Lock held.
    func timingLocked() -> PlaybackTiming? {
        guard let s = stream, pa_stream_get_state(s) == PA_STREAM_READY, firstWriteAt != nil else { return nil }
        var position: pa_usec_t = 0, latency: pa_usec_t = 0
        var negative: Int32 = 0
        // -PA_ERR_NODATA until the first timing update arrives.
        guard pa_stream_get_time(s, &position) == 0, pa_stream_get_latency(s, &latency, &negative) == 0 else { return nil }
        return PlaybackTiming(at: .now, positionMicroseconds: position, latencyMicroseconds: negative != 0 ? 0 : latency)
    }

    private func openStream() {
        guard let (ctx, _) = connection.readyContext else {
            end(.failed(.notConnected(state: connection.stateLocked.description)))
            return
        }
        var spec = pa_sample_spec(format: PA_SAMPLE_S16LE, rate: UInt32(clamping: format.sampleRateHz),
                                  channels: UInt8(clamping: format.channels))
        guard pa_sample_spec_valid(&spec) != 0 else {
            end(.failed(.call("pa_sample_spec_valid", message: "PulseAudio cannot play \(format)")))
            return
        }
        guard let s = pa_stream_new(ctx, "clawvoice playback", &spec, nil) else {
            end(.failed(.call("pa_stream_new", message: connection.lastError())))
            return
        }
        stream = s
        let retained = Unmanaged.passRetained(self)
        retainedSelf = retained
        let userdata = retained.toOpaque()
        pa_stream_set_state_callback(s, { s, userdata in
            guard let userdata else { return }
            Unmanaged<PlaybackSession>.fromOpaque(userdata).takeUnretainedValue().streamStateChanged(s)
        }, userdata)
        pa_stream_set_write_callback(s, { _, _, userdata in
            guard let userdata else { return }
            Unmanaged<PlaybackSession>.fromOpaque(userdata).takeUnretainedValue().pump()
        }, userdata)
        // tlength bounds what the server holds for us, hence what stop() can still let out;
        // ADJUST_LATENCY makes the sink's own buffer follow it instead of its 2 s default.
        // Timing updates (interpolated between them) tell the echo canceller when each sample is heard.
        let flags = pa_stream_flags_t(PA_STREAM_ADJUST_LATENCY.rawValue | PA_STREAM_INTERPOLATE_TIMING.rawValue
                                      | PA_STREAM_AUTO_TIMING_UPDATE.rawValue)
        let targetBytes = format.frames(milliseconds: targetLatencyMs) * format.bytesPerFrame
        var attr = pa_buffer_attr(maxlength: UInt32.max, tlength: UInt32(targetBytes), prebuf: UInt32.max,
                                  minreq: UInt32.max, fragsize: UInt32.max)
        // At 100 the server's own choice stands (module-stream-restore, a level set in pavucontrol).
        var volume = Self.cvolume(volumePercent, channels: format.channels)
        let result: Int32 = withUnsafeMutablePointer(to: &volume) { v in
            let level = volumePercent == 100 ? nil : v
            if let sink { return sink.withCString { pa_stream_connect_playback(s, $0, &attr, flags, level, nil) } }
            return pa_stream_connect_playback(s, nil, &attr, flags, level, nil)
        }
        if result < 0 { end(.failed(errorForFailure(call: "pa_stream_connect_playback"))) }
    }

    /// PulseAudio's volume for `percent` (PA_VOLUME_NORM = 0x10000 is 100%), on every channel.
    static func cvolume(_ percent: Int, channels: Int) -> pa_cvolume {
        var v = pa_cvolume()
        pa_cvolume_set(&v, UInt32(max(channels, 1)), pa_volume_t(UInt64(0x10000) * UInt64(max(percent, 0)) / 100))
        return v
    }

    /// Lock held. Changes the level of this stream while it plays.
    func applyVolume(_ percent: Int) {
        volumePercent = percent
        guard let s = stream, PA_STREAM_IS_GOOD(pa_stream_get_state(s)) != 0, pa_stream_get_state(s) == PA_STREAM_READY,
              let (ctx, _) = connection.readyContext else { return }
        var volume = Self.cvolume(percent, channels: format.channels)
        if let op = pa_context_set_sink_input_volume(ctx, pa_stream_get_index(s), &volume, nil, nil) { pa_operation_unref(op) }
    }

    private func streamStateChanged(_ s: OpaquePointer?) {
        guard let s, s == stream else { return }
        let state = pa_stream_get_state(s)
        if state == PA_STREAM_READY {
            phase = .open
            connectWaiter?.resume()
            connectWaiter = nil
            pump()
        } else if state == PA_STREAM_FAILED || state == PA_STREAM_TERMINATED {
            // A dying context fails its streams too; PulsePlayback's observer reports that one.
            guard connection.isReadyLocked else { return }
            let wasConnecting: Bool
            if case .connecting = phase { wasConnecting = true } else { wasConnecting = false }
            end(.failed(errorForFailure(call: wasConnecting ? "pa_stream_connect_playback" : "pa_stream (playback)")))
        }
    }

    private func errorForFailure(call: String) -> PulseError {
        if let sink, connection.lastErrorCode() == Int32(PA_ERR_NOENTITY.rawValue) { return .noSuchSink(sink) }
        return .call(call, message: connection.lastError())
    }

    /// Hands libpulse as much queued audio as it asked for; starts the drain once all is written.
    private func pump() {
        guard let s = stream else { return }
        switch phase {
        case .open, .draining: break
        default: return
        }
        let available = pending.count - pendingOffset
        if available > 0 {
            let writable = pa_stream_writable_size(s)
            guard writable > 0 else { return }  // (size_t)-1, an error, arrives as -1
            // Whole frames only: libpulse rejects a write that splits one.
            var count = min(writable, available)
            count -= count % format.bytesPerFrame
            guard count > 0 else { return }
            let result = pending.withUnsafeBytes { bytes in
                pa_stream_write(s, bytes.baseAddress! + pendingOffset, count, nil, 0, PA_SEEK_RELATIVE)
            }
            if result < 0 {
                end(.failed(.call("pa_stream_write", message: connection.lastError())))
                return
            }
            if firstWriteAt == nil { firstWriteAt = .now }
            pendingOffset += count
            if pendingOffset == pending.count {
                pending.removeAll(keepingCapacity: true)
                pendingOffset = 0
            } else if pendingOffset > 1 << 16 {
                pending.removeFirst(pendingOffset)
                pendingOffset = 0
            }
        }
        if finishing, pending.count == pendingOffset, drainOperation == nil, case .open = phase {
            phase = .draining
            drainOperation = pa_stream_drain(s, { _, success, userdata in
                guard let userdata else { return }
                Unmanaged<PlaybackSession>.fromOpaque(userdata).takeUnretainedValue().drained(success != 0)
            }, Unmanaged.passUnretained(self).toOpaque())
            if drainOperation == nil { end(.failed(.call("pa_stream_drain", message: connection.lastError()))) }
        }
    }

    private func drained(_ success: Bool) {
        if let op = drainOperation { pa_operation_unref(op) }
        drainOperation = nil
        guard isActive else { return }
        if success {
            end(.done(.finished))
        } else if connection.isReadyLocked {
            end(.failed(.call("pa_stream_drain", message: connection.lastError())))
        }
    }

    private func cancelDrain() {
        guard let op = drainOperation else { return }
        drainOperation = nil
        // A cancelled operation never calls back, so the unretained userdata cannot dangle.
        pa_operation_cancel(op)
        pa_operation_unref(op)
    }

    private func end(_ final: Phase) {
        phase = final
        cancelDrain()
        pending = []
        pendingOffset = 0
        switch final {
        case .done(let outcome):
            connectWaiter?.resume()
            for waiter in finishWaiters { waiter.resume(returning: outcome) }
        case .failed(let error):
            connectWaiter?.resume(throwing: error)
            for waiter in finishWaiters { waiter.resume(throwing: error) }
        default: break
        }
        connectWaiter = nil
        finishWaiters = []
        teardownStream()
    }

    private func teardownStream() {
        guard let s = stream else { return }
        stream = nil
        pa_stream_set_state_callback(s, nil, nil)
        pa_stream_set_write_callback(s, nil, nil)
        if PA_STREAM_IS_GOOD(pa_stream_get_state(s)) != 0 { pa_stream_disconnect(s) }
        pa_stream_unref(s)
        // Last: this may be the final reference to self.
        let retained = retainedSelf
        retainedSelf = nil
        retained?.release()
    }
}
