// Which push-to-talk capture is live, and what each PTT command answers, as a pure value.
// It mirrors the iPhone app: `start` is idempotent, `stop`/`cancel` with nothing live answer
// `idle` with a fresh id, `once` while live answers `busy`, concurrent stops join one end.
// No I/O and no clock: TalkController opens and closes the microphone as told.

/// The status strings the gateway and the official clients know.
public enum PTTStatus: String, Sendable, Codable, Equatable {
    case queued, empty, idle, cancelled, busy
    case notQueued = "not_queued"
}

/// The payload of a finished PTT command: `{captureId, transcript?, status}`.
public struct PTTResult: Sendable, Equatable, Codable {
    public var captureId: String
    public var transcript: String?
    public var status: PTTStatus
    public init(captureId: String, transcript: String? = nil, status: PTTStatus) {
        self.captureId = captureId
        self.transcript = transcript
        self.status = status
    }
}

/// A PTT failure for the gateway: `UNAVAILABLE` with a `CODE: message` text.
public struct PTTError: Error, Sendable, Equatable, CustomStringConvertible {
    public var code: String
    public var message: String
    public init(code: String, message: String) { self.code = code; self.message = message }
    public var description: String { "\(code): \(message)" }

    public static let alreadyStarting = PTTError(code: "ALREADY_STARTING", message: "push-to-talk is already starting")
    public static func gatewayNotConnected(_ detail: String) -> PTTError {
        PTTError(code: "GATEWAY_NOT_CONNECTED", message: "the operator session is not connected (\(detail))")
    }
    public static func microphone(_ detail: String) -> PTTError {
        PTTError(code: "MICROPHONE_UNAVAILABLE", message: detail)
    }
}

public struct PTTMachine: Sendable, Equatable {
    public enum Phase: Sendable, Equatable {
        case idle
        /// The microphone is being opened for this capture.
        case starting(id: String, once: Bool)
        case capturing(id: String, once: Bool)
        /// The capture is closing; a transcript is on its way.
        case ending(id: String)
    }

    public enum StartDecision: Sendable, Equatable {
        /// Open the microphone for a new capture with this id.
        case begin(String)
        /// Already capturing: answer with the live id.
        case alreadyActive(String)
        /// A start is in flight: refuse.
        case alreadyStarting
    }

    public enum EndDecision: Sendable, Equatable {
        /// Nothing live: answer with this fresh id and status `idle`.
        case idle(String)
        /// Close this capture and produce its result.
        case end(String)
        /// This capture is already closing: wait for the same result.
        case join(String)
    }

    public enum CancelDecision: Sendable, Equatable {
        case idle(String)
        /// Drop this capture; it answers `cancelled`.
        case discard(String)
    }

    public enum OnceDecision: Sendable, Equatable {
        case begin(String)
        /// Something is live: answer `busy` with its id.
        case busy(String)
    }

    public private(set) var phase: Phase = .idle
    public init() {}

    public var activeCaptureId: String? {
        switch phase {
        case .idle: return nil
        case .starting(let id, _), .capturing(let id, _), .ending(let id): return id
        }
    }

    public mutating func start(freshId: String) -> StartDecision {
        switch phase {
        case .idle:
            phase = .starting(id: freshId, once: false)
            return .begin(freshId)
        case .starting:
            return .alreadyStarting
        case .capturing(let id, _), .ending(let id):
            return .alreadyActive(id)
        }
    }

    public mutating func once(freshId: String) -> OnceDecision {
        switch phase {
        case .idle:
            phase = .starting(id: freshId, once: true)
            return .begin(freshId)
        case .starting(let id, _), .capturing(let id, _), .ending(let id):
            return .busy(id)
        }
    }

    /// The microphone is open: the capture is live.
    public mutating func started(_ id: String) {
        if case .starting(let s, let once) = phase, s == id { phase = .capturing(id: id, once: once) }
    }

    /// Opening the microphone failed: back to idle.
    public mutating func startFailed(_ id: String) {
        if activeCaptureId == id { phase = .idle }
    }

    public mutating func stop(freshId: String) -> EndDecision {
        switch phase {
        case .idle:
            return .idle(freshId)
        case .starting(let id, _), .capturing(let id, _):
            phase = .ending(id: id)
            return .end(id)
        case .ending(let id):
            return .join(id)
        }
    }

    public mutating func cancel(freshId: String) -> CancelDecision {
        switch phase {
        case .idle:
            return .idle(freshId)
        case .starting(let id, _), .capturing(let id, _), .ending(let id):
            phase = .idle
            return .discard(id)
        }
    }

    /// The capture's result was produced (or it was discarded): nothing is live.
    public mutating func finished(_ id: String) {
        if activeCaptureId == id { phase = .idle }
    }
}
