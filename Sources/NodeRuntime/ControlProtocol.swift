// The control socket's rules without its sockets: what a request line must be, the lines the
// daemon answers with, and which connections to admit, shed or pause for (ControlAdmission).
// Pure values, so the fuzz target and the tests drive them without a daemon.
//
// Wire: the client writes one JSON object line with a string "cmd". The daemon answers
// `{"accepted":true}` as soon as the line is read, then one JSON response line when the
// command is done. The early line lets the CLI tell "the daemon does not answer" (no line
// within about a second) from "the command takes a while" (ptt, say).

import Foundation
public import GatewayProtocol
#if canImport(Glibc)
import Glibc
#endif

public enum ControlLine {
    /// Longest request line read; anything longer is refused (no command needs more than a few KiB).
    public static let maxRequestBytes = 64 * 1024
    /// Written as soon as a well-formed request line is read.
    public static let acceptedLine = "{\"accepted\":true}"

    public struct Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        public var description: String
    }

    /// A request line (without its newline) as the request object, or the reason it is refused.
    public static func parseRequest(_ bytes: some Collection<UInt8>) -> Result<JSONValue, Refusal> {
        guard bytes.count <= maxRequestBytes else {
            return .failure(Refusal(description: "request is longer than \(maxRequestBytes) bytes"))
        }
        guard let value = try? JSONCoding.decode(JSONValue.self, from: Data(bytes)) else {
            return .failure(Refusal(description: "request is not JSON"))
        }
        guard let object = value.objectValue else { return .failure(Refusal(description: "request is not a JSON object")) }
        guard let cmd = object["cmd"]?.stringValue, !cmd.isEmpty else {
            return .failure(Refusal(description: "request has no \"cmd\" string"))
        }
        if cmd == "session", let use = object["use"] {
            // A non-string key used to answer ok (as a "show"), and any length was taken.
            guard let key = use.stringValue else {
                return .failure(Refusal(description: "session \"use\" must be a string (a session key)"))
            }
            if let why = sessionKeyProblem(key) { return .failure(Refusal(description: why)) }
        }
        return .success(value)
    }

    /// Longest session key accepted; gateway keys look like `agent:main:kitchen`.
    public static let maxSessionKeyLength = 256

    /// Why `key` cannot be a session key, or nil when it can.
    public static func sessionKeyProblem(_ key: String) -> String? {
        if key.isEmpty { return "a session key cannot be empty" }
        if key.utf8.count > maxSessionKeyLength { return "a session key is at most \(maxSessionKeyLength) bytes (this one has \(key.utf8.count))" }
        if key.unicodeScalars.contains(where: { $0.properties.generalCategory == .control || $0 == " " }) {
            return "a session key has no spaces or control characters"
        }
        return nil
    }

    /// The line answering a refused request.
    public static func refusalLine(_ message: String) -> String {
        (try? JSONCoding.string(JSONValue.object(["ok": false, "error": .string(message)]))) ?? "{\"ok\":false}"
    }

    /// A response as one line (JSON never holds a raw newline).
    public static func responseLine(_ response: JSONValue) -> String {
        (try? JSONCoding.string(response)) ?? refusalLine("the response could not be encoded")
    }

    /// What a line from the daemon is, to the client.
    public enum Reply: Sendable, Equatable {
        case accepted
        case response(JSONValue)
        case malformed
    }

    public static func parseReply(_ bytes: some Collection<UInt8>) -> Reply {
        guard let value = try? JSONCoding.decode(JSONValue.self, from: Data(bytes)), let o = value.objectValue else { return .malformed }
        if o.count == 1, o["accepted"] == .bool(true) { return .accepted }
        return .response(value)
    }
}

/// Which control connections the daemon keeps. A flood of idle clients used to run the daemon
/// out of file descriptors, and the accept loop gave up for good on the first EMFILE. Now at
/// most `maxConnections` are open, idle ones (no request line yet) are shed oldest first, and a
/// failing accept pauses with a doubling backoff instead of ending the loop.
public struct ControlAdmission: Sendable {
    public struct Limits: Sendable, Equatable {
        public var maxConnections = 32
        /// How long a client has to send its whole request line.
        public var requestTimeoutMs: Int64 = 3_000
        public var backoffMinMs: Int64 = 10
        public var backoffMaxMs: Int64 = 1_000
        public init() {}
    }

    public enum Phase: Sendable, Equatable { case reading, handling }

    public enum Admission: Sendable, Equatable {
        case serve
        /// Serve the new one after shutting down this idle connection.
        case serveShedding(Int)
        /// Every slot is busy running a command: answer "busy" and close.
        case refuseBusy
    }

    public struct FailureResponse: Sendable, Equatable {
        /// An idle connection to shut down, freeing its descriptor.
        public var shed: Int?
        public var pauseMs: Int64
        /// Whether the descriptor table is full, so the spare descriptor should be spent to answer
        /// the waiting client "busy" rather than leave it hanging.
        public var outOfDescriptors: Bool
    }

    public let limits: Limits
    private(set) var open: [Int: (since: Int64, phase: Phase)] = [:]
    private(set) var backoffMs: Int64 = 0

    public init(limits: Limits = Limits()) { self.limits = limits }

    public var count: Int { open.count }
    public func phase(of id: Int) -> Phase? { open[id]?.phase }

    /// The idle connection that has waited longest.
    public func oldestIdle() -> Int? {
        open.filter { $0.value.phase == .reading }.min { ($0.value.since, $0.key) < ($1.value.since, $1.key) }?.key
    }

    /// A connection was accepted at `nowMs`.
    public mutating func accepted(_ id: Int, nowMs: Int64) -> Admission {
        backoffMs = 0
        var decision = Admission.serve
        if open.count >= limits.maxConnections {
            guard let victim = oldestIdle() else { return .refuseBusy }
            open[victim] = nil
            decision = .serveShedding(victim)
        }
        open[id] = (nowMs, .reading)
        return decision
    }

    /// `accept` failed with `errno`.
    public mutating func acceptFailed(errno e: Int32) -> FailureResponse {
        switch e {
        case EINTR, ECONNABORTED, EPROTO, EAGAIN:
            // The client went away before we took it, or a signal: nothing is wrong with us.
            return FailureResponse(shed: nil, pauseMs: 0, outOfDescriptors: false)
        default:
            backoffMs = backoffMs == 0 ? limits.backoffMinMs : min(backoffMs * 2, limits.backoffMaxMs)
            let full = e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM
            var victim: Int?
            if full, let v = oldestIdle() { open[v] = nil; victim = v }
            return FailureResponse(shed: victim, pauseMs: backoffMs, outOfDescriptors: full)
        }
    }

    /// The connection's request line arrived; it now runs a command and is no longer idle.
    public mutating func requestRead(_ id: Int) { open[id]?.phase = .handling }

    /// The connection is closed (answered, timed out, shed or gone).
    public mutating func closed(_ id: Int) { open[id] = nil }

    /// When `id` must have sent its request line by.
    public func readDeadline(_ id: Int) -> Int64? {
        guard let c = open[id], c.phase == .reading else { return nil }
        return c.since + limits.requestTimeoutMs
    }
}
