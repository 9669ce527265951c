// Owns: how the push-to-talk key reports itself: which devices are open, or why none is, as a
// value for `status --json` and as one line for the log.

public import ClawvoiceCore

/// What the push-to-talk key reader is doing, and on which devices.
public struct PTTButtonStatus: Sendable, Equatable, CustomStringConvertible {
    /// The reader's lifecycle as seen from outside.
    public enum State: Sendable, Equatable {
        /// Not started, or stopped.
        case stopped
        /// Started; the reader has not looked at the devices yet.
        case starting
        /// Running, but no device is open; `problems` says why.
        case waiting
        /// Running with at least one device (or a recorded stream) open.
        case listening
        /// A recorded stream was read to its end; nothing more will come.
        case finished
    }

    public var state: State = .stopped
    /// The push-to-talk key's name ("KEY_PLAYPAUSE").
    public var key: String
    public var mode: PTTKeyMachine.Mode
    /// What was configured: "auto", a device path, or "recording <path>".
    public var source: String
    /// Devices open now, preferred first.
    public var devices: [InputDeviceInfo] = []
    /// Why devices (or the configured path) could not be used, from the latest look.
    public var problems: [InputDeviceProblem] = []
    /// Device files looked at by the latest scan (auto: every /dev/input/event*).
    public var checkedCount = 0
    /// `input_event` records decoded so far, over all devices.
    public var eventCount = 0

    public init(key: String, mode: PTTKeyMachine.Mode, source: String) {
        self.key = key
        self.mode = mode
        self.source = source
    }

    /// One line: "push-to-talk KEY_PLAYPAUSE (hold, auto): listening on …" or "… waiting: …".
    public var description: String {
        let head = "push-to-talk \(key) (\(mode.rawValue), \(source))"
        switch state {
        case .stopped:
            return "\(head): stopped"
        case .starting:
            return "\(head): starting"
        case .finished:
            return "\(head): finished after \(eventCount) events"
        case .listening:
            let open = devices.map(\.description).joined(separator: ", ")
            var line = "\(head): listening on \(open)"
            let missingKey = devices.filter { $0.isEvdev && !$0.hasKey }
            if !missingKey.isEmpty {
                line += "; warning: \(missingKey.map(\.path).joined(separator: ", ")) does not report \(key)"
            }
            if let trouble = problemSummary() { line += "; also \(trouble)" }
            return line
        case .waiting:
            if let trouble = problemSummary() { return "\(head): waiting: \(trouble)" }
            if source == "auto" {
                return "\(head): waiting: no input device can send \(key) (checked \(checkedCount)); "
                    + "connect the headset, or set ptt.device to its /dev/input/by-id path"
            }
            return "\(head): waiting for the device"
        }
    }

    /// Problems as one clause. Permission trouble is folded into one hint, since it is the same
    /// fix for every node.
    private func problemSummary() -> String? {
        let denied = problems.filter { $0.reason == .permissionDenied }.map(\.path)
        var parts = problems.filter { $0.reason != .permissionDenied }.map(\.description)
        if !denied.isEmpty {
            let listed = denied.count <= 3 ? denied.joined(separator: ", ") : denied.prefix(3).joined(separator: ", ") + ", …"
            let noun = denied.count == 1 ? "device" : "\(denied.count) devices"
            parts.append("cannot read \(noun) (\(listed)): permission denied; \(InputDeviceProblem.permissionHint)")
        }
        return parts.isEmpty ? nil : parts.joined(separator: "; ")
    }
}
