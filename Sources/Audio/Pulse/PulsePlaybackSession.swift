// PlaybackSession: one PulseAudio playback stream as libpulse drives it: the bytes waiting for
// the server to ask for them, the waiters for its connection and its drain, and the stream's
// callbacks. PulsePlayback holds at most one and reaches it only with the main loop lock held.
// The only file that calls pa_stream_connect_playback, pa_stream_write, pa_stream_drain and
// pa_stream_flush.

internal import CPulse
import ClawvoiceCore
import Foundation

/// One playback stream: the bytes waiting for libpulse to ask for them, and the waiters for its
/// connection and its drain. Everything here runs with the connection's main loop lock held:
/// PulsePlayback reaches it only through its MainloopLocked box, libpulse through its callbacks.
final class PlaybackSession: PulseStreamOwner {
    let format: AudioFormat
    let connection: PulseConnection
    let sink: String?
    let targetLatencyMs: Int

    private enum Phase { case created, connecting, open, draining, done(PlaybackOutcome), failed(PulseError) }

    private var phase: Phase = .created
    private var handle: PulseStreamHandle<PlaybackSession>?
    private var stream: OpaquePointer? { handle?.stream }
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
        let handle = PulseStreamHandle(s, retaining: self)
        self.handle = handle
        let userdata = handle.userdata
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

    func streamStateChanged(_ s: OpaquePointer?) {
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
        guard let handle else { return }
        self.handle = nil
        // Last: this may release the final reference to self.
        handle.close { pa_stream_set_write_callback($0, nil, nil) }
    }
}
