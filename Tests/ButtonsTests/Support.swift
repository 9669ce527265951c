// Shared pieces for the Buttons tests: the recorded headset fixture, an action log, waits with
// deadlines, temporary directories and fifos.

import ClawvoiceCore
import Foundation
import Testing
import Buttons

let playPause: UInt16 = 164    // KEY_PLAYPAUSE
let volumeUp: UInt16 = 115     // KEY_VOLUMEUP
let mscType: UInt16 = 4        // EV_MSC
let mscScan: UInt16 = 4        // MSC_SCAN

/// Tests/ButtonsTests/Fixtures/headset-playpause.events, made by make-headset-playpause.py
/// beside it, and the same stream written out here.
enum HeadsetFixture {
    static let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures/headset-playpause.events")

    static func bytes() throws -> [UInt8] {
        [UInt8](try Data(contentsOf: url))
    }

    /// Seconds since the epoch that the fixture's times are offsets from.
    static let base = Duration.seconds(1_737_264_000)

    /// The fixture's events, in order. Keep in step with make-headset-playpause.py.
    static let events: [InputEvent] = {
        func report(_ usec: Int64, _ events: [(UInt16, UInt16, Int32)]) -> [InputEvent] {
            let time = base + .microseconds(usec)
            return events.map { InputEvent(type: $0.0, code: $0.1, value: $0.2, time: time) } + [.report(time: time)]
        }
        func key(_ usec: Int64, _ code: UInt16, _ value: Int32, scan: Int32? = nil) -> [InputEvent] {
            report(usec, (scan.map { [(mscType, mscScan, $0)] } ?? []) + [(InputEvent.keyType, code, value)])
        }
        return key(0, playPause, 1, scan: 0xC00CD)
            + key(500_000, playPause, 2)
            + key(533_000, playPause, 2)
            + key(566_000, playPause, 2)
            + key(600_000, volumeUp, 1, scan: 0xC00E9)
            + key(680_000, volumeUp, 0, scan: 0xC00E9)
            + key(900_000, playPause, 0, scan: 0xC00CD)
            + key(2_000_000, playPause, 1, scan: 0xC00CD)
            + key(2_350_000, playPause, 0, scan: 0xC00CD)
    }()

    /// What the fixture means for KEY_PLAYPAUSE.
    static let edges: [KeyEdge] = [.down, .repeat, .repeat, .repeat, .up, .down, .up]
}

/// Raw bytes of a stream of events, as a device would produce them.
func encode(_ events: [InputEvent]) -> [UInt8] {
    events.flatMap { $0.encoded() }
}

/// Collects actions from the reader thread.
final class ActionLog: @unchecked Sendable {
    private var items: [PTTKeyAction] = []
    private let lock = NSLock()

    func append(_ action: PTTKeyAction) {
        lock.lock()
        items.append(action)
        lock.unlock()
    }

    var actions: [PTTKeyAction] {
        lock.lock()
        defer { lock.unlock() }
        return items
    }
}

struct TimedOut: Error, CustomStringConvertible {
    let what: String
    let timeout: Duration
    let last: String
    var description: String { "timed out after \(timeout) waiting until \(what); last seen: \(last)" }
}

/// Polls `condition` every few milliseconds until it holds, or throws `TimedOut` at the deadline.
/// `describe` says what was seen instead, for the failure message.
func waitUntil(_ what: String, timeout: Duration = .seconds(5),
               describe: () -> String = { "" }, _ condition: () -> Bool) async throws {
    let deadline = ContinuousClock.now.advanced(by: timeout)
    while !condition() {
        guard ContinuousClock.now < deadline else { throw TimedOut(what: what, timeout: timeout, last: describe()) }
        try await Task.sleep(for: .milliseconds(5))
    }
}

/// A fresh directory under the system temporary directory, removed by `remove()`.
struct TemporaryDirectory {
    let path: String

    init() throws {
        path = NSTemporaryDirectory() + "clawvoice-buttons-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }

    func file(_ name: String) -> String { path + "/" + name }
}

/// mkfifo(3), failing the test on error.
func makeFifo(_ path: String) throws {
    guard mkfifo(path, 0o600) == 0 else {
        throw ButtonsError.system(call: "mkfifo", path: path, errno: errno)
    }
}

/// The write end of a fifo, opened without blocking once a reader has it open.
final class FifoWriter {
    let fd: Int32

    /// Opens the fifo for writing; ENXIO means no reader has it open yet.
    init?(path: String) {
        let fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        self.fd = fd
    }

    func write(_ bytes: [UInt8]) {
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        #expect(written == bytes.count, "fifo write")
    }

    /// Closing the last writer is what the reader sees as the device going away.
    func close() {
        Glibc.close(fd)
    }
}

/// Writes bytes to a new file in `directory` and returns its path.
func writeRecording(_ bytes: [UInt8], in directory: TemporaryDirectory, name: String = "stream.events") throws -> String {
    let path = directory.file(name)
    try Data(bytes).write(to: URL(fileURLWithPath: path))
    return path
}

/// Runs a recorded stream through a service to its end and returns the actions.
func replay(_ path: String, mode: PTTKeyMachine.Mode, key: String = "KEY_PLAYPAUSE") async throws -> [PTTKeyAction] {
    let log = ActionLog()
    let service = try PTTButtonService(recordedEvents: path, key: key, mode: mode) { log.append($0) }
    try service.start()
    defer { service.stop() }
    try await waitUntil("the recording is read to its end", describe: { service.status.description }) {
        service.status.state == .finished
    }
    return log.actions
}
