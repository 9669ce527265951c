// Owns: the reader thread's loop. poll(2) on the wake pipe, the inotify fd and every open
// device; bytes go through InputEventDecoder, edges through PTTKeyMachine, actions to
// onAction. Every source, live or recorded, takes this one path.

import ClawvoiceCore
import Foundation

/// One open source of events: a device node, a fifo, or a recorded file.
final class EventSource {
    let file: InputDeviceFile
    let info: InputDeviceInfo
    /// The file as it was when opened; `lose` prefers a fresh look, since writing to a fifo
    /// changes its ctime and a vanished node has nothing left to stat.
    let identity: FileIdentity?
    /// The configured path when it differs from `info.path` (a by-id link).
    let configuredPath: String?
    var decoder: InputEventDecoder
    /// Between SYN_DROPPED and the next SYN_REPORT, events are incomplete and are skipped.
    var dropping = false

    init(file: InputDeviceFile, info: InputDeviceInfo, configuredPath: String?, keyCode: UInt16) {
        self.file = file
        self.info = info
        identity = FileIdentity(path: info.path)
        self.configuredPath = configuredPath
        decoder = InputEventDecoder(keyCode: keyCode)
    }
}

/// The loop on the reader thread. Not Sendable: created on that thread and never leaves it.
final class PTTReader {
    private let source: PTTButtonService.Source
    private let keyCode: UInt16
    private var machine: PTTKeyMachine
    private let rescanInterval: Duration
    private let control: ReaderControl
    private let status: PTTStatusBoard
    private let onAction: @Sendable (PTTKeyAction) -> Void

    private var sources: [EventSource] = []
    private var watcher: DirectoryWatcher?
    /// Files not to open again until they change: lost devices (by node path and configured
    /// path) and, for auto, devices that cannot send the key.
    private var known: [String: FileIdentity] = [:]
    /// The source whose press the machine acted on last. Only its loss stops a capture: a
    /// second keyboard unplugged while the headset holds the key must not cut the user off.
    private var pressedBy: ObjectIdentifier?
    private var problems: [InputDeviceProblem] = []
    private var checkedCount = 0
    private var eventCount = 0
    private var finished = false
    private let clock = ContinuousClock()
    /// Reads are whole records for evdev (the kernel refuses buffers smaller than one record).
    private var buffer = [UInt8](repeating: 0, count: 64 * InputEvent.byteCount)

    init(source: PTTButtonService.Source, keyCode: UInt16, mode: PTTKeyMachine.Mode, rescanInterval: Duration,
         control: ReaderControl, status: PTTStatusBoard,
         onAction: @escaping @Sendable (PTTKeyAction) -> Void) {
        self.source = source
        self.keyCode = keyCode
        machine = PTTKeyMachine(mode: mode)
        self.rescanInterval = rescanInterval
        self.control = control
        self.status = status
        self.onAction = onAction
    }

    func run() {
        control.markReaderThread()
        switch source {
        case .recorded(let path):
            openRecording(path)
        case .devices:
            // Without inotify (out of watches) the periodic rescan still finds devices.
            watcher = try? DirectoryWatcher()
            rescan()
            publish()
        }
        var nextScan = clock.now.advanced(by: rescanInterval)

        while !control.shouldStop && !finished {
            var fds = [pollfd(fd: control.wakeRead, events: Int16(POLLIN), revents: 0)]
            if let watcher { fds.append(pollfd(fd: watcher.fd, events: Int16(POLLIN), revents: 0)) }
            let firstSource = fds.count
            fds += sources.map { pollfd(fd: $0.file.fd, events: Int16(POLLIN), revents: 0) }

            let timeout: Int32
            if case .recorded = source {
                timeout = -1
            } else {
                timeout = Self.milliseconds(until: nextScan, from: clock.now)
            }
            let ready = poll(&fds, nfds_t(fds.count), timeout)
            if ready < 0 {
                if errno == EINTR { continue }
                // poll only fails like this for a bad descriptor set: a bug. Do not spin.
                usleep(100_000)
                continue
            }

            if fds[0].revents != 0 { control.drainWake() }
            if control.shouldStop { break }

            var scanNow = false
            if let watcher, fds[1].revents != 0 {
                let (paths, changed) = watcher.drain()
                for path in paths { known[path] = nil }
                scanNow = changed
            }

            var lost: [(EventSource, InputDeviceProblem.Reason)] = []
            for (offset, source) in sources.enumerated() where fds[firstSource + offset].revents != 0 {
                if let reason = service(source, revents: fds[firstSource + offset].revents) {
                    lost.append((source, reason))
                }
            }
            for (source, reason) in lost { lose(source, reason: reason) }

            if case .recorded = source {
                if sources.isEmpty { finished = true }
            } else if scanNow || !lost.isEmpty || clock.now >= nextScan {
                rescan()
                nextScan = clock.now.advanced(by: rescanInterval)
            }
            publish()
        }

        // Stopping with a capture open: close it, as if every device had gone.
        if machine.isCapturing, let action = machine.handle(.deviceLost) { onAction(action) }
        sources.removeAll()
        publish()
        if control.shouldStop {
            // stop() sets this too, but not after us when it was called from onAction.
            status.update { $0.state = .stopped }
        }
    }

    // MARK: - Reading

    /// Reads what one source has. Returns why it is gone, or nil while it is alive.
    private func service(_ source: EventSource, revents: Int16) -> InputDeviceProblem.Reason? {
        switch source.file.read(into: &buffer) {
        case .bytes(let bytes):
            for event in source.decoder.decode(bytes) { handle(event, from: source) }
            return nil
        case .wouldBlock:
            // Hang-up or error with nothing to read would wake poll(2) forever: give it up.
            let broken = Int16(POLLHUP) | Int16(POLLERR) | Int16(POLLNVAL)
            return revents & broken != 0 ? .lost : nil
        case .endOfStream:
            return .lost
        case .failed(let code):
            // ENODEV: the device was unplugged or the headset disconnected.
            return code == ENODEV ? .lost : .failed(call: "read", errno: code)
        }
    }

    private func handle(_ event: InputEvent, from source: EventSource) {
        eventCount += 1
        if event.type == InputEvent.synType {
            if event.code == InputEvent.synDropped {
                // The kernel's queue overflowed; the records up to the next SYN_REPORT are not
                // a consistent picture. See the kernel's Documentation/input/event-codes.rst.
                source.dropping = true
            } else if event.code == InputEvent.synReport, source.dropping {
                source.dropping = false
                resync(source)
            }
            return
        }
        guard !source.dropping, let edge = source.decoder.edge(for: event) else { return }
        apply(edge, from: source)
    }

    /// After SYN_DROPPED, asks the device whether the key is down, so a release lost in the
    /// overflow cannot leave a hold-to-talk capture open.
    private func resync(_ source: EventSource) {
        guard let down = source.file.isKeyDown(keyCode) else { return }
        if down != machine.isKeyDown { apply(down ? .down : .up, from: source) }
    }

    private func apply(_ edge: KeyEdge, from source: EventSource) {
        // stop() may have been called from onAction for an earlier edge of this same read.
        guard !control.shouldStop else { return }
        let action = machine.handle(edge)
        if edge == .down, action != nil { pressedBy = ObjectIdentifier(source) }
        if let action { onAction(action) }
    }

    // MARK: - Devices

    private func openRecording(_ path: String) {
        do {
            let file = try InputDeviceFile(path: path)
            let info = InputDeviceInfo(path: path, name: "", isEvdev: false, hasKey: false, hasHeadsetKeys: false)
            sources = [EventSource(file: file, info: info, configuredPath: nil, keyCode: keyCode)]
            checkedCount = 1
        } catch {
            problems = [InputDeviceProblem(path: path, error: error)]
            finished = true
        }
        publish()
    }

    /// A source is gone: close it, remember its file, and stop a capture it started.
    private func lose(_ source: EventSource, reason: InputDeviceProblem.Reason) {
        sources.removeAll { $0 === source }
        // Remembered as it is now, so a dead node (or a fifo whose writer left) is not reopened
        // in a loop, while a re-created one, with a new inode and ctime, is.
        if let identity = FileIdentity(path: source.info.path) ?? source.identity {
            known[source.info.path] = identity
            if let configured = source.configuredPath { known[configured] = identity }
        }
        if reason != .lost {
            problems.append(InputDeviceProblem(path: source.configuredPath ?? source.info.path, reason: reason))
        }
        if pressedBy == ObjectIdentifier(source) {
            pressedBy = nil
            if let action = machine.handle(.deviceLost) { onAction(action) }
        }
    }

    private func rescan() {
        guard case .devices(let scanner) = source else { return }
        for directory in scanner.watchDirectories { watcher?.watch(directory) }
        let pass = scanner.open(skipping: Set(sources.map(\.info.path)), known: known)
        known.merge(pass.rejected) { _, new in new }
        let configured: String? = if case .path(let path) = scanner.selection { path } else { nil }
        for (file, info) in pass.opened {
            sources.append(EventSource(file: file, info: info,
                                       configuredPath: configured == info.path ? nil : configured, keyCode: keyCode))
        }
        sources.sort { InputDeviceScanner.preferred($0.info, over: $1.info) }
        problems = pass.problems
        checkedCount = pass.checkedCount
    }

    private func publish() {
        let devices = sources.map(\.info)
        let state: PTTButtonStatus.State = finished ? .finished : (devices.isEmpty ? .waiting : .listening)
        status.update {
            $0.state = state
            $0.devices = devices
            $0.problems = problems
            $0.checkedCount = checkedCount
            $0.eventCount = eventCount
        }
    }

    /// Milliseconds from `now` to `deadline` for poll(2), rounded up, never negative.
    static func milliseconds(until deadline: ContinuousClock.Instant, from now: ContinuousClock.Instant) -> Int32 {
        let remaining = now.duration(to: deadline)
        guard remaining > .zero else { return 0 }
        let (seconds, attoseconds) = remaining.components
        let ms = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(clamping: ms)
    }
}
