// CaptureCore: one PulseAudio record stream as libpulse drives it: reads, re-chunks into exact
// frames, stamps each with when it was recorded, and hands it on; PulseCapture reaches it only
// with the main loop lock held. The only file that calls pa_stream_connect_record and pa_stream_peek.

internal import CPulse
import ClawvoiceCore
import Foundation

/// PulseCapture's state; every member runs with the main loop lock held. The stream's callbacks
/// hold a retain of it (so a started capture records until `stop()`), not of the PulseCapture.
final class CaptureCore: PulseStreamOwner {
    let connection: PulseConnection
    let source: String?
    let format: AudioFormat
    let frameMilliseconds: Int
    let continuation: AsyncStream<CapturedFrame>.Continuation
    private let events = DispatchQueue(label: "clawvoice.pulse.capture.events")
    /// For retries scheduled on a dispatch queue.
    weak var owner: PulseCapture?

    private var handle: PulseStreamHandle<CaptureCore>?
    private var stream: OpaquePointer? { handle?.stream }
    private var started = false
    private var wantRunning = false
    private var everRan = false
    private var startWaiter: CheckedContinuation<Void, any Error>?
    private var observerID: Int?
    private var chunker: PCMFrameChunker
    /// The read size asked of the server (fragsize), a whole number of frames.
    private var fragmentMilliseconds: Int
    /// The read size the current stream was last asked for.
    private var streamFragmentMilliseconds = 0
    private var nextSequence = 0
    private var lastFrameAt: ContinuousClock.Instant?
    private var lostAt: ContinuousClock.Instant?
    private var nextFollowsGap = false
    var retryToken = 0
    var currentStatus: CaptureStatus = .idle
    var statusHandler: (@Sendable (CaptureStatus) -> Void)?
    var frameHandler: (@Sendable (CapturedFrame) -> Void)?
    var dropped = 0
    var recordedGaps: [Duration] = []

    init(connection: PulseConnection, source: String?, format: AudioFormat, frameMilliseconds: Int,
         continuation: AsyncStream<CapturedFrame>.Continuation) {
        self.connection = connection
        self.source = source
        self.format = format
        self.frameMilliseconds = frameMilliseconds
        self.continuation = continuation
        self.chunker = PCMFrameChunker(format: format, frameMilliseconds: frameMilliseconds)
        self.fragmentMilliseconds = frameMilliseconds
    }

    deinit {
        continuation.finish()
    }

    func start(_ waiter: CheckedContinuation<Void, any Error>) {
        guard !started else {
            waiter.resume(throwing: PulseError.call("PulseCapture.start", message: "already started"))
            return
        }
        started = true
        wantRunning = true
        startWaiter = waiter
        observerID = connection.addObserver { [weak self] state, _ in self?.connectionChanged(state) }
        setStatus(.starting)
        openStream()
    }

    func stop() {
        wantRunning = false
        retryToken += 1
        teardownStream()
        if let id = observerID { connection.removeObserver(id) }
        observerID = nil
        if let waiter = startWaiter {
            startWaiter = nil
            waiter.resume(throwing: PulseError.closed)
        }
        if started { setStatus(.stopped) }
        continuation.finish()
    }

    // MARK: - Stream (lock held from here on)

    /// Timing updates give each frame's recording time (CapturedFrame.recordedAt).
    private static let flags = pa_stream_flags_t(PA_STREAM_ADJUST_LATENCY.rawValue | PA_STREAM_AUTO_TIMING_UPDATE.rawValue)

    func openStream() {
        guard wantRunning, stream == nil else { return }
        guard let (ctx, _) = connection.readyContext else {
            setStatus(.waitingForServer)
            return
        }
        var spec = pa_sample_spec(format: PA_SAMPLE_S16LE, rate: UInt32(format.sampleRateHz),
                                  channels: UInt8(format.channels))
        guard let s = pa_stream_new(ctx, "clawvoice capture", &spec, nil) else {
            streamFailed(.call("pa_stream_new", message: connection.lastError()))
            return
        }
        let handle = PulseStreamHandle(s, retaining: self)
        self.handle = handle
        let userdata = handle.userdata
        pa_stream_set_read_callback(s, { s, _, userdata in
            guard let userdata else { return }
            Unmanaged<CaptureCore>.fromOpaque(userdata).takeUnretainedValue().readable(s)
        }, userdata)
        var attr = bufferAttributes()
        streamFragmentMilliseconds = fragmentMilliseconds
        let result: Int32
        if let source {
            result = source.withCString { pa_stream_connect_record(s, $0, &attr, Self.flags) }
        } else {
            result = pa_stream_connect_record(s, nil, &attr, Self.flags)
        }
        if result < 0 {
            streamFailed(errorForFailure(call: "pa_stream_connect_record"))
        }
    }

    /// fragsize = the read size, with ADJUST_LATENCY (the source's latency follows it), asks the
    /// server for reads that often instead of its default of about 2 s per fragment.
    private func bufferAttributes() -> pa_buffer_attr {
        pa_buffer_attr(maxlength: UInt32.max, tlength: UInt32.max, prebuf: UInt32.max, minreq: UInt32.max,
                       fragsize: UInt32(format.frames(milliseconds: fragmentMilliseconds) * format.bytesPerFrame))
    }

    func setFragment(milliseconds: Int) {
        let whole = max(1, milliseconds / frameMilliseconds) * frameMilliseconds
        fragmentMilliseconds = whole
        applyFragment()
    }

    /// Tells a ready stream the read size asked for now (one still connecting hears when ready).
    private func applyFragment() {
        guard let s = stream, streamFragmentMilliseconds != fragmentMilliseconds, pa_stream_get_state(s) == PA_STREAM_READY else { return }
        streamFragmentMilliseconds = fragmentMilliseconds
        var attr = bufferAttributes()
        if let op = pa_stream_set_buffer_attr(s, &attr, nil, nil) { pa_operation_unref(op) }
    }

    func streamStateChanged(_ s: OpaquePointer?) {
        guard let s, s == stream else { return }
        let state = pa_stream_get_state(s)
        if state == PA_STREAM_READY {
            let now = ContinuousClock.now
            if everRan {
                // Back after the server went away: the frames on either side do not join.
                if let before = lastFrameAt ?? lostAt { recordedGaps.append(now - before) }
                nextFollowsGap = true
                chunker.reset()
            }
            everRan = true
            applyFragment()
            setStatus(.running)
            if let waiter = startWaiter {
                startWaiter = nil
                waiter.resume()
            }
        } else if state == PA_STREAM_FAILED || state == PA_STREAM_TERMINATED {
            // A dying context fails its streams too; the connection observer handles that case.
            guard connection.isReadyLocked else { return }
            streamFailed(errorForFailure(call: everRan ? "pa_stream (record)" : "pa_stream_connect_record"))
        }
    }

    private func errorForFailure(call: String) -> PulseError {
        if let source, connection.lastErrorCode() == Int32(PA_ERR_NOENTITY.rawValue) {
            return .noSuchSource(source)
        }
        return .call(call, message: connection.lastError())
    }

    private func streamFailed(_ error: PulseError) {
        teardownStream()
        if let waiter = startWaiter {
            // start() fails as a whole: nothing keeps running behind the caller's back.
            startWaiter = nil
            wantRunning = false
            if let id = observerID { connection.removeObserver(id) }
            observerID = nil
            setStatus(.failed(error.description))
            continuation.finish()
            waiter.resume(throwing: error)
            return
        }
        setStatus(.failed(error.description))
        scheduleRetry()
    }

    /// A stream that failed on a healthy server (its source was unplugged, say) is retried every 2 s.
    private func scheduleRetry() {
        retryToken += 1
        owner?.retry(after: 2, token: retryToken)
    }

    private func connectionChanged(_ state: PulseConnectionState) {
        guard wantRunning else { return }
        if state == .ready {
            openStream()
            return
        }
        if startWaiter != nil {
            streamFailed(.connectionLost)
            return
        }
        // The context is gone, and with it the stream: drop ours before libpulse fails it.
        if stream != nil {
            lostAt = ContinuousClock.now
            teardownStream()
        }
        retryToken += 1
        setStatus(.waitingForServer)
    }

    private func readable(_ s: OpaquePointer?) {
        guard let s, s == stream else { return }
        let now = ContinuousClock.now
        var complete: [PCMBuffer] = []
        while pa_stream_readable_size(s) > 0 {
            var data: UnsafeRawPointer?
            var length = 0
            guard pa_stream_peek(s, &data, &length) == 0, length > 0 else { break }
            if let data {
                complete += chunker.append(littleEndianBytes: UnsafeRawBufferPointer(start: data, count: length))
            } else {
                // A hole (the server lost data): what is pending no longer joins what follows.
                chunker.reset()
            }
            pa_stream_drop(s)
        }
        // The newest sample read was recorded one source latency ago (pa_stream_get_latency, with
        // everything read); frames complete before it by what the chunker still holds.
        var latency: pa_usec_t = 0
        var negative: Int32 = 0
        let sourceUs = pa_stream_get_latency(s, &latency, &negative) == 0 && negative == 0 ? Int64(min(latency, 1_000_000)) : 0
        let rate = Int64(format.sampleRateHz)
        var newerUs = Int64(chunker.pendingSamples) * 1_000_000 / rate + sourceUs
        var stamps: [ContinuousClock.Instant] = []
        for pcm in complete.reversed() {
            stamps.append(now - .microseconds(newerUs))
            newerUs += Int64(pcm.samples.count / max(format.channels, 1)) * 1_000_000 / rate
        }
        stamps.reverse()
        for (i, pcm) in complete.enumerated() {
            let frame = CapturedFrame(pcm: pcm, sequence: nextSequence, receivedAt: now, followsGap: nextFollowsGap, recordedAt: stamps[i])
            nextSequence += 1
            nextFollowsGap = false
            lastFrameAt = now
            if let frameHandler { frameHandler(frame) } else if case .dropped = continuation.yield(frame) { dropped += 1 }
        }
    }

    private func teardownStream() {
        guard let handle else { return }
        self.handle = nil
        // Last: this may release the final reference to self.
        handle.close { pa_stream_set_read_callback($0, nil, nil) }
    }

    private func setStatus(_ newStatus: CaptureStatus) {
        guard newStatus != currentStatus else { return }
        currentStatus = newStatus
        if let handler = statusHandler { events.async { handler(newStatus) } }
    }
}
