// Owns: the push-to-talk key's lifecycle: start and stop the reader thread, and share its
// status. The reading itself is in PTTButtonService+Reader.swift.

public import ClawvoiceCore
import Synchronization
import Foundation
public import GatewayProtocol

/// Listens to a push-to-talk key on evdev devices (or replays a recorded event stream) and calls
/// `onAction` with `.start` / `.stop`.
///
/// One dedicated thread blocks in poll(2) on the open devices, an inotify watch on /dev/input
/// and a wake pipe; nothing blocks the cooperative pool. Devices that go away (a Bluetooth
/// headset switching off) report `.deviceLost`, which stops a capture they started; devices
/// that appear or come back are opened without a restart, on the inotify event or at the
/// latest on the next periodic rescan.
///
/// `onAction` runs on the reader thread, in key order, and must return quickly (hand the
/// action to an actor or a stream). After `stop()` returns it is not called again (unless
/// `stop()` was called from `onAction`; see there).
public final class PTTButtonService: Service {
    public typealias Mode = PTTKeyMachine.Mode

    /// Where events come from.
    enum Source: Sendable {
        /// Live devices, as `ptt.device` selects them.
        case devices(InputDeviceScanner)
        /// A file (or fifo) of recorded `struct input_event` records, read to its end once.
        case recorded(String)
    }

    /// The push-to-talk key's evdev code.
    public let keyCode: UInt16
    public let mode: Mode
    let source: Source
    let onAction: @Sendable (PTTKeyAction) -> Void
    /// How often devices are looked at again even without an inotify event: the fallback for a
    /// /dev/input that did not exist when the watch was set up, or a lost inotify event.
    let rescanInterval: Duration
    let statusBox: PTTStatusBoard
    private let lifecycle = Mutex<Lifecycle>(.idle)

    /// The reader thread's lifecycle. `stopping` keeps a `start()` that races a `stop()` from
    /// spawning a second reader before the first has exited.
    private enum Lifecycle {
        /// No reader thread; `start()` makes one.
        case idle
        /// A reader thread is running (or, for a recording, has finished and awaits `stop()`).
        case running(ReaderControl)
        /// `stop()` is waiting for the reader thread to exit.
        case stopping
    }

    /// Listens to live devices.
    /// - Parameters:
    ///   - device: `ptt.device`: "auto", or a path (/dev/input/by-id/… or /dev/input/eventN).
    ///   - key: `ptt.key`: an evdev key name ("KEY_PLAYPAUSE", "KEY_PHONE", "f13").
    ///   - mode: `ptt.mode`.
    ///   - rescanInterval: the fallback rescan period; 3 s.
    ///   - inputDirectory: where evdev nodes live; /dev/input.
    /// - Throws: `ButtonsError.unknownKey` when `key` names no key.
    public init(device: String, key: String, mode: Mode, rescanInterval: Duration = .seconds(3),
                inputDirectory: String = "/dev/input",
                onAction: @escaping @Sendable (PTTKeyAction) -> Void) throws(ButtonsError) {
        let code = try KeyCode.resolve(key)
        let selection = InputDeviceSelection(device)
        keyCode = code
        self.mode = mode
        source = .devices(InputDeviceScanner(selection: selection, keyCode: code, inputDirectory: inputDirectory))
        self.onAction = onAction
        // poll(2) with a zero timeout would spin.
        self.rescanInterval = max(rescanInterval, .milliseconds(100))
        statusBox = PTTStatusBoard(PTTButtonStatus(key: KeyCode.label(code), mode: mode, source: selection.description))
    }

    /// Replays a recorded event stream (raw `struct input_event` records, as `cat
    /// /dev/input/eventN > file` captures them) through the same decoder and machine as live
    /// devices. `start()` reads it to its end on the reader thread; the end of the stream counts
    /// as the device going away.
    /// - Throws: `ButtonsError.unknownKey`, or `.system(call: "access", …)` when the file cannot be read.
    public init(recordedEvents path: String, key: String, mode: Mode,
                onAction: @escaping @Sendable (PTTKeyAction) -> Void) throws(ButtonsError) {
        let code = try KeyCode.resolve(key)
        guard access(path, R_OK) == 0 else { throw .system(call: "access", path: path, errno: errno) }
        keyCode = code
        self.mode = mode
        source = .recorded(path)
        self.onAction = onAction
        rescanInterval = .seconds(3)
        statusBox = PTTStatusBoard(PTTButtonStatus(key: KeyCode.label(code), mode: mode, source: "recording \(path)"))
    }

    deinit {
        stop()
    }

    /// What the reader is doing now.
    public var status: PTTButtonStatus {
        statusBox.current
    }

    /// Starts the reader thread. A no-op while it is running.
    /// - Throws: `ButtonsError.system` when the wake pipe cannot be made (out of descriptors).
    public func start() throws(ButtonsError) {
        // Made before taking the lock (so the lock holds no throwing work); a second caller's
        // spare one just closes its pipe again.
        let control = try ReaderControl()
        let installed = lifecycle.withLock { state in
            guard case .idle = state else { return false }
            state = .running(control)
            return true
        }
        guard installed else { return }
        statusBox.update { $0.state = .starting }
        let source = source, keyCode = keyCode, mode = mode, onAction = onAction
        let rescanInterval = rescanInterval, statusBox = statusBox
        let thread = Thread {
            let reader = PTTReader(source: source, keyCode: keyCode, mode: mode, rescanInterval: rescanInterval,
                                   control: control, status: statusBox, onAction: onAction)
            reader.run()
            control.finished.signal()
        }
        thread.name = "clawvoice-ptt-keys"
        thread.start()
    }

    /// The service (a child of the daemon's `ServiceGroup`): `start()`, wait until the task is
    /// cancelled, `stop()`. The work happens on the reader thread.
    public func run() async throws {
        try start()
        defer { stop() }
        while !Task.isCancelled {
            // Wakes at once on cancellation (the sleep throws); the hour is just "a long time".
            try? await Task.sleep(for: .seconds(3600))
        }
    }

    /// Stops the reader and waits for its thread to exit. If a capture that a key started is
    /// still open, `onAction(.stop)` is called first, so stopping never leaves the mic open.
    /// Safe to call more than once. Called from `onAction`, it returns at once: the reader skips
    /// the rest of what it read and makes that closing `onAction(.stop)` call as it exits.
    public func stop() {
        let control: ReaderControl? = lifecycle.withLock { state in
            guard case .running(let control) = state else { return nil }
            state = .stopping
            return control
        }
        guard let control else { return }
        control.requestStop()
        if !control.isReaderThread {
            control.finished.wait()
        }
        statusBox.update {
            $0.state = .stopped
            $0.devices = []
        }
        lifecycle.withLock { $0 = .idle }
    }
}

/// What the service and its reader thread share: the stop flag, the wake pipe that interrupts
/// poll(2), and the semaphore the reader signals when it has exited.
final class ReaderControl: Sendable {
    let wakeRead: Int32
    let wakeWrite: Int32
    let finished = DispatchSemaphore(value: 0)
    private let stopRequested = Mutex(false)
    private let readerThread = Mutex<pthread_t?>(nil)

    init() throws(ButtonsError) {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw .system(call: "pipe", path: nil, errno: errno) }
        for fd in fds {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, O_NONBLOCK)
        }
        wakeRead = fds[0]
        wakeWrite = fds[1]
    }

    deinit {
        close(wakeRead)
        close(wakeWrite)
    }

    var shouldStop: Bool { stopRequested.withLock { $0 } }

    func requestStop() {
        stopRequested.withLock { $0 = true }
        var byte: UInt8 = 1
        // The pipe is non-blocking: if it is full, a wake-up is already pending.
        _ = write(wakeWrite, &byte, 1)
    }

    /// Called by the reader as it starts, so `stop()` from inside `onAction` does not wait for
    /// the thread it is running on.
    func markReaderThread() {
        readerThread.withLock { $0 = pthread_self() }
    }

    var isReaderThread: Bool {
        readerThread.withLock { thread in thread.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
    }

    /// Empties the wake pipe.
    func drainWake() {
        var buffer = [UInt8](repeating: 0, count: 64)
        while buffer.withUnsafeMutableBytes({ read(wakeRead, $0.baseAddress, $0.count) }) > 0 {}
    }
}
