// Pieces shared by the lws wrappers: process-wide libwebsockets setup and logging, the lock
// that serialises context creation, and for the server fragment assembly, close-frame
// payloads and the one place that calls lws_write for WebSocket messages.
internal import CWebsockets
internal import Foundation
internal import Synchronization

/// Process-wide libwebsockets state.
///
/// lws 4.1 (re)allocates its OpenSSL ex-data indexes every time a context is created with
/// `LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT`, and stores them in plain globals. A second TLS
/// context created while another is mid-handshake makes the first one's verify callback
/// read the wrong index ("can't get wsi from ssl privdata") and the handshake fails; the
/// indexes also pile up in OpenSSL with every context. So the flag is given exactly once,
/// to a throwaway context with no vhosts, and every real context is created with
/// `LWS_SERVER_OPTION_EXPLICIT_VHOSTS`; a TLS server passes the flag only to its vhost,
/// where lws reads it to build the vhost's `SSL_CTX`. (Clients do their own TLS.)
enum LWSRuntime {
    /// Serialises lws_create_context / lws_create_vhost / lws_context_destroy across threads;
    /// they touch process globals (log level, OpenSSL init, signal setup).
    static let contextLock = NSLock()

    private static let initialised: Bool = {
        // Errors only (CLAWVOICE_LWS_LOG=<lws bitmask> for more, e.g. 31), to stderr with a
        // prefix; the last error is also kept so a failed create can say why.
        let level: Int32
        if let text = ProcessInfo.processInfo.environment["CLAWVOICE_LWS_LOG"], let value = Int32(text) {
            level = value
        } else {
            level = Int32(LLL_ERR)
        }
        lws_set_log_level(level, lwsLogEmit)

        var info = lws_context_creation_info()
        info.options = UInt64(LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT) | UInt64(LWS_SERVER_OPTION_EXPLICIT_VHOSTS)
        info.port = CONTEXT_PORT_NO_LISTEN
        info.fd_limit_per_thread = 8
        guard let context = lws_create_context(&info) else { return false }
        lws_context_destroy(context)
        return true
    }()

    private static let logLock = NSLock()
    nonisolated(unsafe) private static var errorLines: [(thread: pthread_t, line: String)] = []

    fileprivate static func record(errorLine: String) {
        logLock.lock()
        errorLines.append((pthread_self(), errorLine))
        if errorLines.count > 8 { errorLines.removeFirst() }
        logLock.unlock()
    }

    /// The lws error lines the calling thread logged since its previous call, joined by "; ".
    static func takeLastError() -> String? {
        logLock.lock()
        defer { logLock.unlock() }
        let me = pthread_self()
        let mine = errorLines.filter { pthread_equal($0.thread, me) != 0 }.map(\.line)
        errorLines.removeAll { pthread_equal($0.thread, me) != 0 }
        return mine.isEmpty ? nil : mine.joined(separator: "; ")
    }

    /// Runs `body` holding ``contextLock``, after the one-time global initialisation.
    static func withContextLock<T>(_ body: () throws(WebSocketError) -> T) throws(WebSocketError) -> T {
        contextLock.lock()
        defer { contextLock.unlock() }
        guard initialised else { throw .contextCreationFailed }
        return try body()
    }
}

/// lws log sink: one line per call, already newline-terminated.
private let lwsLogEmit: @convention(c) (Int32, UnsafePointer<CChar>?) -> Void = { level, line in
    guard let line else { return }
    let text = String(cString: line)
    if level & Int32(LLL_ERR) != 0 {
        LWSRuntime.record(errorLine: text.trimmingASCIIWhitespace().description)
    }
    FileHandle.standardError.write(Data(("libwebsockets: " + text).utf8))
}

/// Joins the fragments of one incoming message and enforces the size limit.
///
/// lws hands over a message in pieces of at most the protocol's `rx_buffer_size`; a message
/// is complete when the piece is a final fragment and no payload of its frame remains.
struct MessageAssembler {
    let limitBytes: Int
    private var buffer: [UInt8] = []
    private var isBinary = false

    init(limitBytes: Int) { self.limitBytes = limitBytes }

    enum Outcome {
        case incomplete
        case complete(WebSocketMessage)
        /// The message would exceed the limit; the payload is its known size so far (bytes
        /// received plus what the current frame header still announces).
        case tooLarge(Int)
    }

    /// Called from the RECEIVE callback; copies the bytes before returning.
    mutating func append(wsi: OpaquePointer, bytes: UnsafeRawPointer?, count: Int) -> Outcome {
        if lws_is_first_fragment(wsi) != 0 && buffer.isEmpty {
            isBinary = lws_frame_is_binary(wsi) != 0
        }
        let remaining = Int(lws_remaining_packet_payload(wsi))
        let announced = buffer.count + count + remaining
        if announced > limitBytes {
            buffer = []
            return .tooLarge(announced)
        }
        if let bytes, count > 0 {
            buffer.append(contentsOf: UnsafeRawBufferPointer(start: bytes, count: count))
        }
        guard lws_is_final_fragment(wsi) != 0 && remaining == 0 else { return .incomplete }
        let payload = buffer
        buffer = []
        buffer.reserveCapacity(0)
        if isBinary { return .complete(.binary(payload)) }
        return .complete(.text(String(decoding: payload, as: UTF8.self)))
    }
}

/// A close frame's payload: an optional 2-byte big-endian code and a UTF-8 reason.
enum ClosePayload {
    static func parse(_ bytes: UnsafeRawPointer?, count: Int) -> (code: Int?, reason: String) {
        guard let bytes, count >= 2 else { return (nil, "") }
        let raw = UnsafeRawBufferPointer(start: bytes, count: count)
        let code = Int(raw[0]) << 8 | Int(raw[1])
        let reason = String(decoding: raw[2...], as: UTF8.self)
        return (code, reason)
    }

    /// Sets the close frame lws will send when the callback returns -1. The reason is cut to
    /// 123 bytes (a control frame carries at most 125, two of them the code) on a UTF-8
    /// character boundary.
    static func set(on wsi: OpaquePointer, code: Int, reason: String) {
        var bytes = Array(reason.utf8)
        if bytes.count > 123 {
            var cut = 123
            while cut > 0 && (bytes[cut] & 0xC0) == 0x80 { cut -= 1 }
            bytes = Array(bytes[..<cut])
        }
        let status = lws_close_status(rawValue: UInt32(truncatingIfNeeded: code))
        bytes.withUnsafeMutableBufferPointer { buffer in
            lws_close_reason(wsi, status, buffer.baseAddress, buffer.count)
        }
    }
}

enum LWSWriter {
    /// Writes one whole message as one frame. lws_write may only be called from a WRITEABLE
    /// callback; it needs LWS_PRE bytes of writable headroom before the payload (and masks a
    /// client's payload in place). If the socket takes less than all of it, lws keeps the
    /// rest and sends it before the next WRITEABLE callback, still returning the full length.
    /// Returns false when lws reports a failure, in which case the connection must close.
    static func write(_ message: WebSocketMessage, to wsi: OpaquePointer) -> Bool {
        let pre = Int(cv_lws_pre())
        let payload: [UInt8]
        let isText: Bool
        switch message {
        case .text(let string): payload = Array(string.utf8); isText = true
        case .binary(let bytes): payload = bytes; isText = false
        }
        var frame = [UInt8](repeating: 0, count: pre + payload.count)
        frame.withUnsafeMutableBufferPointer { buffer in
            payload.withUnsafeBufferPointer { source in
                if let base = source.baseAddress, source.count > 0 {
                    (buffer.baseAddress! + pre).update(from: base, count: source.count)
                }
            }
        }
        let written = frame.withUnsafeMutableBufferPointer { buffer -> Int32 in
            let start = buffer.baseAddress! + pre
            return isText ? cv_lws_write_text(wsi, start, payload.count) : cv_lws_write_binary(wsi, start, payload.count)
        }
        return Int(written) >= payload.count
    }
}

/// C strings that must outlive an lws context (protocol names, connect-info strings, TLS
/// paths): allocated with strdup, freed together after lws_context_destroy.
final class CStringArena {
    private var pointers: [UnsafeMutablePointer<CChar>] = []

    func make(_ string: String) -> UnsafePointer<CChar> {
        let pointer = strdup(string)!
        pointers.append(pointer)
        return UnsafePointer(pointer)
    }

    deinit { pointers.forEach { free($0) } }
}

/// The lws protocol table for one context: our single protocol and the zeroed terminator.
/// protocols[0] also receives the HTTP callbacks of a server (delegated to
/// lws_callback_http_dummy), and is the one a client or an upgrade without
/// Sec-WebSocket-Protocol binds to.
final class ProtocolTable {
    let pointer: UnsafeMutablePointer<lws_protocols>
    private let name: UnsafeMutablePointer<CChar>

    /// `rxBufferBytes` is both the per-connection receive buffer and the size of the pieces a
    /// message is delivered in; large messages are assembled from pieces, so it stays small.
    init(callback: LWSCallback, rxBufferBytes: Int) {
        name = strdup("clawvoice")!
        pointer = .allocate(capacity: 2)
        pointer.initialize(repeating: lws_protocols(), count: 2)
        pointer[0].name = UnsafePointer(name)
        pointer[0].callback = callback
        pointer[0].per_session_data_size = 0
        pointer[0].rx_buffer_size = rxBufferBytes
        pointer[0].tx_packet_size = 0
    }

    deinit {
        pointer.deinitialize(count: 2)
        pointer.deallocate()
        free(name)
    }
}

/// A thread-safe flag a waiter can block on with a deadline: a dispatch group entered once and
/// left on the first `signal()` (any number of threads may wait on it).
final class CompletionSignal: Sendable {
    private let group = DispatchGroup()
    private let done = Mutex(false)

    init() { group.enter() }

    func signal() {
        let first = done.withLock { done in defer { done = true }; return !done }
        if first { group.leave() }
    }

    var isSignalled: Bool { done.withLock { $0 } }

    /// Returns true if signalled before `timeout` elapsed.
    @discardableResult
    func wait(timeout: Duration) -> Bool {
        let c = timeout.components
        let nanoseconds = max(0, c.seconds) * 1_000_000_000 + max(0, c.attoseconds) / 1_000_000_000
        return group.wait(timeout: .now() + .nanoseconds(Int(clamping: nanoseconds))) == .success
    }

    deinit { if !isSignalled { group.leave() } }  // a DispatchGroup must not be freed entered
}

/// The C signature of an lws protocol callback: (wsi, reason, per-session user, in, len).
typealias LWSCallback = @convention(c) (
    OpaquePointer?, lws_callback_reasons, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?, Int
) -> Int32
