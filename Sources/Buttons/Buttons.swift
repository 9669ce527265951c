// Buttons owns push-to-talk keys: evdev input devices (headset media keys, keyboards), their
// discovery and hot-plugging, and turning key presses into start/stop requests.
//
// The pieces, bottom up: `InputEventDecoder` turns raw `struct input_event` bytes into events
// and key edges (pure, no I/O); `PTTKeyMachine` turns edges into `.start`/`.stop` (pure, no
// clock); `InputDeviceScanner` finds and probes devices with libevdev; `PTTButtonService`
// runs one reader thread that polls the devices, an inotify watch and a wake pipe, and
// pushes every byte it reads (or every byte of a recorded stream) through the decoder and
// the machine. `VirtualKeyDevice` makes a uinput key device for tests and diagnostics.
// C (libevdev, inotify, poll) stays inside this module: no C type is public. Buttons must not
// touch audio, the gateway or the talk turn; it only reports what the key asked for.

import Synchronization
import Foundation

/// Failures a caller of Buttons can act on. Each renders as one line that says what to do.
public enum ButtonsError: Error, Sendable, Equatable, CustomStringConvertible {
    /// `ptt.key` names no evdev key code.
    case unknownKey(String)
    /// A system or libevdev call failed. `errno` is positive; `path` is the file involved.
    case system(call: String, path: String?, errno: Int32)

    public var description: String {
        switch self {
        case .unknownKey(let name):
            return "unknown key name \"\(name)\" for ptt.key; use an evdev key name such as "
                + KeyCode.exampleNames.joined(separator: ", ")
                + " (run `evtest` or `libinput debug-events` to see what your headset sends)"
        case .system(let call, let path, let errno):
            let on = path.map { " \($0)" } ?? ""
            var line = "\(call)\(on): \(String(cString: strerror(errno)))"
            if errno == EACCES || errno == EPERM { line += "; " + InputDeviceProblem.permissionHint }
            return line
        }
    }
}

/// The key's status, written by the reader thread and read by `status`; it outlives each reader.
final class PTTStatusBoard: Sendable {
    private let state: Mutex<PTTButtonStatus>
    init(_ status: PTTButtonStatus) { state = Mutex(status) }
    func update<R>(_ body: (inout PTTButtonStatus) -> R) -> R { state.withLock { body(&$0) } }
    var current: PTTButtonStatus { state.withLock { $0 } }
}
