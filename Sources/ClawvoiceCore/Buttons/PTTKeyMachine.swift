// Owns: what one push-to-talk key means. Key edges in, `.start`/`.stop` out. No I/O, no clock;
// the reader thread feeds it and carries out what it returns.

/// One change of the push-to-talk key, as the decoder or the reader reports it.
public enum KeyEdge: Sendable, Equatable, CustomStringConvertible {
    /// The key went down (evdev value 1).
    case down
    /// The key came up (evdev value 0).
    case up
    /// The key is held and auto-repeating (evdev value 2).
    case `repeat`
    /// The device that pressed the key went away (read returned ENODEV, or its stream ended).
    case deviceLost

    public var description: String {
        switch self {
        case .down: "down"
        case .up: "up"
        case .repeat: "repeat"
        case .deviceLost: "deviceLost"
        }
    }
}

/// What the key asks of the talk turn.
public enum PTTKeyAction: Sendable, Equatable, CustomStringConvertible {
    /// Open the microphone and start a capture.
    case start
    /// Close the microphone and finish the capture.
    case stop

    public var description: String { self == .start ? "start" : "stop" }
}

/// Turns key edges into start/stop requests, in hold-to-talk or toggle mode.
///
/// Debounce: a second `.down` without an `.up` in between is ignored in both modes, so a
/// duplicated press (two devices, a replayed report, a SYN_DROPPED resync) never toggles twice.
/// A lost device while capturing always stops: a headset vanishing mid-capture must not leave
/// the microphone open.
public struct PTTKeyMachine: Sendable, Equatable {
    /// How the key drives a capture.
    public enum Mode: String, Sendable, Equatable, CaseIterable {
        /// Press starts, release stops.
        case hold
        /// One press starts, the next press stops; releases do nothing.
        case toggle
    }

    /// Where the machine is. Both cases carry whether the key is physically down, which is what
    /// the debounce and toggle's "next press" are decided on.
    public enum State: Sendable, Equatable {
        /// No capture requested.
        case idle(keyDown: Bool)
        /// A `.start` was returned and no `.stop` since.
        case capturing(keyDown: Bool)
    }

    public let mode: Mode
    public private(set) var state: State = .idle(keyDown: false)

    public init(mode: Mode) {
        self.mode = mode
    }

    /// Whether the last action returned was `.start`.
    public var isCapturing: Bool {
        if case .capturing = state { return true }
        return false
    }

    /// Whether the key is down as far as the machine has been told.
    public var isKeyDown: Bool {
        switch state {
        case .idle(let keyDown), .capturing(let keyDown): keyDown
        }
    }

    /// Feeds one edge; returns the action to carry out, if any.
    public mutating func handle(_ edge: KeyEdge) -> PTTKeyAction? {
        switch (state, edge) {
        case (_, .repeat):
            return nil

        case (.idle(keyDown: true), .down), (.capturing(keyDown: true), .down):
            // A second down without an up: a bounce or a duplicate report.
            return nil

        case (.idle(keyDown: false), .down):
            state = .capturing(keyDown: true)
            return .start

        case (.capturing(keyDown: false), .down):
            // Only reachable in toggle mode: hold stops on the release that cleared keyDown.
            state = .idle(keyDown: true)
            return .stop

        case (.idle, .up):
            state = .idle(keyDown: false)
            return nil

        case (.capturing, .up):
            switch mode {
            case .hold:
                state = .idle(keyDown: false)
                return .stop
            case .toggle:
                state = .capturing(keyDown: false)
                return nil
            }

        case (.idle, .deviceLost):
            state = .idle(keyDown: false)
            return nil

        case (.capturing, .deviceLost):
            state = .idle(keyDown: false)
            return .stop
        }
    }
}
