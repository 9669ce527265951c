// One audio-only WebRTC peer (GStreamer webrtcbin through CWebRTCPeer): Opus mono sendrecv, no
// data channel, a non-trickle offer (or answer) with every candidate in it. PCM frames go in with
// `send`, decoded PCM comes out of `audio`, link changes come out of `events`. The C side runs its
// GLib loop on its own thread; its callbacks only yield into the streams below. The handle lives
// in a Mutex (every C call on it holds the lock, and close() empties it), so the peer is plainly
// Sendable; the media watchdog is a dispatch timer, not a task.

import CWebRTCPeer
import Foundation
import Synchronization

public struct WebRTCError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

public final class WebRTCPeer: Sendable {
    /// What the link reports. `closed` is always the last event, after `close()`.
    public enum Event: Sendable, Equatable {
        case connected
        case remoteAudio
        case disconnected
        case failed(String)
        case closed
    }

    public let sampleRate: Int
    public let events: AsyncStream<Event>
    /// Decoded remote audio, mono Int16 at `sampleRate`, in the chunks the decoder produces.
    public let audio: AsyncStream<[Int16]>

    /// The open pipeline and its media watchdog; nil once closed.
    private struct Live {
        let handle: OpaquePointer
        let watchdog: any DispatchSourceTimer
    }
    private let live: Mutex<Live?>
    /// What the C callbacks reach; C holds one retain of it until `close()`.
    private let sink: Sink

    /// A peer in PLAYING state. `localAddress`: gather ICE candidates on that one address only
    /// (the tests use "127.0.0.1"); nil lets ICE use every host address.
    /// `mediaTimeout`: once remote audio flowed, this long without any is a hang-up
    /// (webrtcbin 1.22 reports neither a DTLS close nor ICE consent loss of the far end).
    public init(sampleRate: Int, localAddress: String? = nil, mediaTimeout: Duration = .seconds(3)) throws {
        try WebRTCPeer.initialiseOnce()
        self.sampleRate = sampleRate
        let (events, eventsOut) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(64))
        // 2 s of decoded audio at most: a consumer that stalls loses the oldest, never the newest.
        let (audio, audioOut) = AsyncStream.makeStream(of: [Int16].self, bufferingPolicy: .bufferingNewest(100))
        self.events = events
        self.audio = audio
        let sink = Unmanaged.passRetained(Sink(events: eventsOut, audio: audioOut))
        var callbacks = cv_rtc_callbacks()
        callbacks.ctx = sink.toOpaque()
        callbacks.on_state = { ctx, kind, value, detail in
            Unmanaged<Sink>.fromOpaque(ctx!).takeUnretainedValue().state(kind: kind, value: value, detail: detail.map { String(cString: $0) })
        }
        callbacks.on_audio = { ctx, samples, count in
            guard let samples else { return }
            let s = Unmanaged<Sink>.fromOpaque(ctx!).takeUnretainedValue()
            s.heard()
            s.audio.yield(Array(UnsafeBufferPointer(start: samples, count: count)))
        }
        callbacks.on_local_sdp = { ctx, sdp, error in
            Unmanaged<Sink>.fromOpaque(ctx!).takeUnretainedValue()
                .localDescription(sdp.map { .success(String(cString: $0)) } ?? .failure(WebRTCError(error.map { String(cString: $0) } ?? "no local description")))
        }
        var error: UnsafeMutablePointer<CChar>?
        guard let handle = cv_rtc_new(Int32(sampleRate), localAddress, callbacks, &error) else {
            sink.release()
            throw WebRTCError(WebRTCPeer.take(error) ?? "the WebRTC peer could not start")
        }
        let box = sink.takeUnretainedValue()  // the timer's handler holds its own reference
        self.sink = box
        // Four looks a second at when audio last came; the first silence past the timeout is a hang-up.
        let watchdog = DispatchSource.makeTimerSource(queue: .global())
        watchdog.setEventHandler { [box] in
            if let last = box.lastAudio, ContinuousClock.now - last > mediaTimeout {
                box.state(kind: Int32(CV_RTC_CONNECTION_STATE), value: 3, detail: nil)
                watchdog.cancel()
            }
        }
        watchdog.schedule(deadline: .now() + .milliseconds(250), repeating: .milliseconds(250), leeway: .milliseconds(10))
        watchdog.resume()
        live = Mutex(Live(handle: handle, watchdog: watchdog))
    }

    deinit { close() }

    /// The complete offer (ICE gathering done, every candidate in it), or an error after `timeout`.
    public func createOffer(timeout: Duration = .seconds(10)) async throws -> String {
        try await awaitLocalDescription(timeout: timeout) { cv_rtc_create_offer($0) }
    }

    /// The remote answer to our offer.
    public func setAnswer(_ sdp: String) throws {
        try withOpen { handle in
            var error: UnsafeMutablePointer<CChar>?
            if cv_rtc_set_answer(handle, sdp, &error) != 0 { throw WebRTCError(WebRTCPeer.take(error) ?? "the answer was refused") }
        }
    }

    /// Answering side (test peers): takes a remote offer and returns the complete answer.
    public func answer(offer: String, timeout: Duration = .seconds(10)) async throws -> String {
        try await awaitLocalDescription(timeout: timeout) { [sink] handle in
            var error: UnsafeMutablePointer<CChar>?
            if cv_rtc_accept_offer(handle, offer, &error) != 0 {
                sink.localDescription(.failure(WebRTCError(WebRTCPeer.take(error) ?? "the offer was refused")))
            }
        }
    }

    /// Sends one frame of mono PCM at `sampleRate`. False once closed.
    @discardableResult
    public func send(_ samples: [Int16]) -> Bool {
        live.withLock { live in
            guard let handle = live?.handle, !samples.isEmpty else { return false }
            return samples.withUnsafeBufferPointer { cv_rtc_push(handle, $0.baseAddress, $0.count) } == 0
        }
    }

    /// Stops the media and frees the pipeline; `events` ends with `.closed`. Idempotent.
    public func close() {
        let closed = live.withLock { live -> Bool in
            guard let l = live else { return false }
            live = nil
            l.watchdog.cancel()
            cv_rtc_close(l.handle)
            return true
        }
        guard closed else { return }
        sink.finish()
        Unmanaged.passUnretained(sink).release()  // the C side's retain, taken in init
    }

    /// Runs `body` with the open handle, the lock held; throws once closed.
    private func withOpen<R>(_ body: @Sendable (OpaquePointer) throws -> R) throws -> R {
        try live.withLock { live in
            guard let handle = live?.handle else { throw WebRTCError("the WebRTC peer is closed") }
            return try body(handle)
        }
    }

    private func awaitLocalDescription(timeout: Duration, start: @escaping @Sendable (OpaquePointer) -> Void) async throws -> String {
        let s = sink
        let waiter = s.beginWaiting()
        try withOpen(start)
        // A child that fails the wait at the deadline; leaving this scope cancels it.
        async let _ = {
            try? await Task.sleep(for: timeout)
            if !Task.isCancelled { s.localDescription(.failure(WebRTCError("ICE gathering did not complete within \(timeout)"))) }
        }()
        return try await waiter.value
    }

    private static func take(_ s: UnsafeMutablePointer<CChar>?) -> String? {
        guard let s else { return nil }
        defer { cv_rtc_free_string(s) }
        return String(cString: s)
    }

    private static let initResult: Result<Void, WebRTCError> = {
        var error: UnsafeMutablePointer<CChar>?
        if cv_rtc_global_init(&error) != 0 { return .failure(WebRTCError(take(error) ?? "GStreamer would not initialise")) }
        return .success(())
    }()

    /// gst_init once per process; the error names the missing Debian package.
    public static func initialiseOnce() throws { try initResult.get() }
}

/// What the C callbacks reach: the two stream ends and the one local-description waiter.
private final class Sink: Sendable {
    private struct State {
        var last: WebRTCPeer.Event?
        var pending: Result<String, WebRTCError>?
        var waiter: CheckedContinuation<String, any Error>?
        var lastAudioAt: ContinuousClock.Instant?
    }
    let eventsOut: AsyncStream<WebRTCPeer.Event>.Continuation
    let audio: AsyncStream<[Int16]>.Continuation
    private let state = Mutex(State())

    /// When the last decoded remote audio came out (nil: none yet).
    var lastAudio: ContinuousClock.Instant? { state.withLock { $0.lastAudioAt } }
    func heard() { state.withLock { $0.lastAudioAt = .now } }

    init(events: AsyncStream<WebRTCPeer.Event>.Continuation, audio: AsyncStream<[Int16]>.Continuation) {
        self.eventsOut = events
        self.audio = audio
    }

    /// GStreamer's enums to our events; a repeat of the last event is not reported again.
    func state(kind: Int32, value: Int32, detail: String?) {
        let event: WebRTCPeer.Event?
        switch Int(kind) {
        case Int(CV_RTC_CONNECTION_STATE):
            // 5 (closed) can only come from the far end here: our own close silences the callbacks first.
            switch value { case 2: event = .connected; case 3, 5: event = .disconnected; case 4: event = .failed("the WebRTC connection failed"); default: event = nil }
        case Int(CV_RTC_ICE_STATE):
            switch value { case 4: event = .failed("ICE failed"); case 5: event = .disconnected; default: event = nil }
        case Int(CV_RTC_ERROR): event = .failed(detail ?? "pipeline error")
        case Int(CV_RTC_END_OF_STREAM): event = .disconnected
        case Int(CV_RTC_REMOTE_AUDIO): event = .remoteAudio
        default: event = nil
        }
        guard let event else { return }
        let repeated = state.withLock { s in defer { s.last = event }; return s.last == event }
        if !repeated { eventsOut.yield(event) }
    }

    struct Waiter { let sink: Sink; var value: String { get async throws { try await sink.wait() } } }
    func beginWaiting() -> Waiter { Waiter(sink: self) }

    private func wait() async throws -> String {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<String, any Error>) in
            let ready = state.withLock { s -> Result<String, WebRTCError>? in
                guard let p = s.pending else { s.waiter = c; return nil }
                s.pending = nil
                return p
            }
            if let ready { c.resume(with: ready.mapError { $0 as any Error }) }
        }
    }

    /// The first result wins; later ones (a timeout after success) are dropped.
    func localDescription(_ result: Result<String, WebRTCError>) {
        let waiting = state.withLock { s -> CheckedContinuation<String, any Error>? in
            if let w = s.waiter { s.waiter = nil; return w }
            if s.pending == nil { s.pending = result }
            return nil
        }
        waiting?.resume(with: result.mapError { $0 as any Error })
    }

    func finish() {
        localDescription(.failure(WebRTCError("the WebRTC peer is closed")))
        eventsOut.yield(.closed)
        eventsOut.finish()
        audio.finish()
    }
}
