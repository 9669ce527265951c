// PTTButtonService end to end without real input hardware: recorded streams through the
// reader thread, and fifos standing in for a device that is missing, appears, goes away
// mid-capture and comes back.

import ClawvoiceCore
import Foundation
import Testing
import Buttons

@Suite struct `Recorded event streams` {
    @Test func `the headset fixture in hold mode starts, stops, starts and stops`() async throws {
        let actions = try await replay(HeadsetFixture.url.path, mode: .hold)
        #expect(actions == [.start, .stop, .start, .stop])
    }

    @Test func `the headset fixture in toggle mode starts on the first press and stops on the second`() async throws {
        let actions = try await replay(HeadsetFixture.url.path, mode: .toggle)
        #expect(actions == [.start, .stop])
    }

    @Test func `the fixture with the volume key configured ignores play-pause`() async throws {
        let actions = try await replay(HeadsetFixture.url.path, mode: .hold, key: "volumeup")
        #expect(actions == [.start, .stop])
    }

    @Test func `a recording that ends with the key held stops, as a lost device does`() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = try writeRecording(encode([.key(playPause, value: 1), .report(), .key(playPause, value: 2), .report()]),
                                      in: directory)
        #expect(try await replay(path, mode: .hold) == [.start, .stop])
        #expect(try await replay(path, mode: .toggle) == [.start, .stop])
    }

    @Test func `events between SYN_DROPPED and the next report are skipped`() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let dropped = InputEvent(type: InputEvent.synType, code: InputEvent.synDropped, value: 0)
        let path = try writeRecording(encode([dropped, .key(playPause, value: 1), .report()]), in: directory)
        #expect(try await replay(path, mode: .hold) == [])
        let after = try writeRecording(encode([dropped, .key(playPause, value: 1), .report(),
                                               .key(playPause, value: 1), .report(), .key(playPause, value: 0), .report()]),
                                       in: directory, name: "after.events")
        #expect(try await replay(after, mode: .hold) == [.start, .stop])
    }

    @Test func `a torn record at the end of a recording is dropped without an action`() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let bytes = try HeadsetFixture.bytes() + Array(InputEvent.key(playPause, value: 1).encoded().prefix(13))
        let path = try writeRecording(bytes, in: directory)
        #expect(try await replay(path, mode: .hold) == [.start, .stop, .start, .stop])
    }

    @Test func `a replay reports what it read`() async throws {
        let service = try PTTButtonService(recordedEvents: HeadsetFixture.url.path, key: "KEY_PLAYPAUSE", mode: .hold) { _ in }
        #expect(service.status.state == .stopped)
        try service.start()
        try await waitUntil("the recording is read", describe: { service.status.description }) {
            service.status.state == .finished
        }
        let status = service.status
        #expect(status.eventCount == HeadsetFixture.events.count)
        #expect(status.description.contains("finished after 24 events"))
        #expect(status.key == "KEY_PLAYPAUSE")
        service.stop()
        #expect(service.status.state == .stopped)
    }

    @Test func `a missing recording fails at init with the path in the message`() {
        let error = #expect(throws: ButtonsError.self) {
            _ = try PTTButtonService(recordedEvents: "/nonexistent/x.events", key: "KEY_PLAYPAUSE", mode: .hold) { _ in }
        }
        #expect(error == .system(call: "access", path: "/nonexistent/x.events", errno: ENOENT))
        #expect(error?.description.contains("/nonexistent/x.events") == true)
    }

    @Test func `an unknown key fails at init`() {
        #expect(throws: ButtonsError.unknownKey("KEY_NOPE")) {
            _ = try PTTButtonService(device: "auto", key: "KEY_NOPE", mode: .hold) { _ in }
        }
    }
}

@Suite struct `A device path that comes and goes` {
    @Test func `a missing device waits with a clear status, then opens it when it appears and follows it when it goes and comes back`() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("usb-Test_Headset-event-if03")
        let log = ActionLog()
        // The long rescan interval proves inotify, not the fallback rescan, finds the device.
        let service = try PTTButtonService(device: path, key: "KEY_PLAYPAUSE", mode: .hold, rescanInterval: .seconds(60)) {
            log.append($0)
        }
        try service.start()
        defer { service.stop() }

        try await waitUntil("the service reports the path missing", describe: { service.status.description }) {
            service.status.state == .waiting
        }
        let waiting = service.status.description
        #expect(waiting.contains("\(path) does not exist"))
        #expect(waiting.contains("when it appears"))
        #expect(service.status.problems == [InputDeviceProblem(path: path, reason: .missing)])

        // The device appears.
        try makeFifo(path)
        try await waitUntil("the new device is opened", describe: { service.status.description }) {
            service.status.state == .listening
        }
        #expect(service.status.devices.map(\.path) == [path])
        #expect(service.status.description.contains("listening on raw event stream (\(path))"))

        var writer = try #require(FifoWriter(path: path))
        writer.write(try HeadsetFixture.bytes())
        try await waitUntil("the fixture's four actions", describe: { "\(log.actions)" }) { log.actions.count == 4 }
        #expect(log.actions == [.start, .stop, .start, .stop])

        // Pressed, and then the device vanishes mid-capture: the capture must stop.
        writer.write(encode([.key(playPause, value: 1), .report()]))
        try await waitUntil("the press starts", describe: { "\(log.actions)" }) { log.actions.count == 5 }
        writer.close()
        try await waitUntil("losing the device stops", describe: { "\(log.actions)" }) { log.actions.count == 6 }
        #expect(log.actions.suffix(2) == [.start, .stop])
        try await waitUntil("the service waits again", describe: { service.status.description }) {
            service.status.state == .waiting
        }
        #expect(service.status.description.contains("went away"))

        // The device comes back as a new node at the same path (as a headset reconnecting does).
        unlink(path)
        try makeFifo(path)
        try await waitUntil("the returning device is opened", describe: { service.status.description }) {
            service.status.state == .listening
        }
        writer = try #require(FifoWriter(path: path))
        defer { writer.close() }
        writer.write(encode([.key(playPause, value: 1), .report(), .key(playPause, value: 0), .report()]))
        try await waitUntil("presses work again", describe: { "\(log.actions)" }) { log.actions.count == 8 }
        #expect(log.actions.suffix(2) == [.start, .stop])
    }

    @Test func `a by-id link is resolved to the node it points at`() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try FileManager.default.createDirectory(atPath: directory.file("by-id"), withIntermediateDirectories: true)
        let node = directory.file("event7")
        let link = directory.file("by-id/usb-Test_Headset-event-if03")
        try makeFifo(node)
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: "../event7")

        let scan = InputDeviceScanner(device: link, keyCode: playPause, inputDirectory: directory.path).scan()
        let resolvedNode = URL(fileURLWithPath: node).resolvingSymlinksInPath().path
        #expect(scan.candidates == [InputDeviceInfo(path: resolvedNode, byIdPath: link, name: "", isEvdev: false,
                                                    hasKey: false, hasHeadsetKeys: false)])
        #expect(scan.problems == [])

        let log = ActionLog()
        let service = try PTTButtonService(device: link, key: "KEY_PLAYPAUSE", mode: .toggle,
                                           inputDirectory: directory.path) { log.append($0) }
        try service.start()
        defer { service.stop() }
        try await waitUntil("the link's node is opened", describe: { service.status.description }) {
            service.status.state == .listening
        }
        #expect(service.status.description.contains("\(link) -> \(resolvedNode)"))
        let writer = try #require(FifoWriter(path: node))
        writer.write(try HeadsetFixture.bytes())
        try await waitUntil("toggle start and stop", describe: { "\(log.actions)" }) { log.actions.count == 2 }
        // Closing the writer ends the stream; nothing was capturing, so nothing more happens.
        writer.close()
        try await waitUntil("the service waits again", describe: { service.status.description }) {
            service.status.state == .waiting
        }
        #expect(log.actions == [.start, .stop])
    }

    @Test func `stopping the service while a key holds the mic open stops the capture`() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("headset")
        try makeFifo(path)
        let log = ActionLog()
        let service = try PTTButtonService(device: path, key: "KEY_PLAYPAUSE", mode: .hold) { log.append($0) }
        try service.start()
        try await waitUntil("the device is opened", describe: { service.status.description }) {
            service.status.state == .listening
        }
        let writer = try #require(FifoWriter(path: path))
        defer { writer.close() }
        writer.write(encode([.key(playPause, value: 1), .report()]))
        try await waitUntil("the press starts", describe: { "\(log.actions)" }) { log.actions == [.start] }
        service.stop()
        // stop() waits for the reader, so the stop is already delivered.
        #expect(log.actions == [.start, .stop])
        #expect(service.status.state == .stopped)
        service.stop()
        #expect(log.actions == [.start, .stop])
    }

    @Test func `start twice runs one reader, and the service can start again after stop`() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("headset")
        try makeFifo(path)
        let log = ActionLog()
        let service = try PTTButtonService(device: path, key: "KEY_PLAYPAUSE", mode: .hold) { log.append($0) }
        try service.start()
        try service.start()
        try await waitUntil("the device is opened", describe: { service.status.description }) {
            service.status.state == .listening
        }
        var writer = try #require(FifoWriter(path: path))
        writer.write(encode([.key(playPause, value: 1), .report(), .key(playPause, value: 0), .report()]))
        try await waitUntil("one start and one stop", describe: { "\(log.actions)" }) { log.actions.count == 2 }
        writer.close()
        service.stop()

        try service.start()
        defer { service.stop() }
        try await waitUntil("the device is opened again", describe: { service.status.description }) {
            service.status.state == .listening
        }
        writer = try #require(FifoWriter(path: path))
        defer { writer.close() }
        writer.write(encode([.key(playPause, value: 1), .report(), .key(playPause, value: 0), .report()]))
        try await waitUntil("a second start and stop", describe: { "\(log.actions)" }) { log.actions.count == 4 }
        #expect(log.actions == [.start, .stop, .start, .stop])
    }

    @Test func `stop can be called from inside onAction without a deadlock`() async throws {
        let box = ServiceBox()
        let log = ActionLog()
        let service = try PTTButtonService(recordedEvents: HeadsetFixture.url.path, key: "KEY_PLAYPAUSE", mode: .hold) {
            log.append($0)
            box.service?.stop()
        }
        box.service = service
        try service.start()
        // The stop() inside onAction(.start) skips the rest of the recording; the reader closes
        // the capture it leaves open as it exits.
        try await waitUntil("the reader stops itself", describe: { "\(log.actions) \(service.status)" }) {
            log.actions.count == 2 && service.status.state == .stopped
        }
        #expect(log.actions == [.start, .stop])
        box.service = nil
    }
}

/// Lets onAction reach the service it belongs to.
private final class ServiceBox: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: PTTButtonService?
    var service: PTTButtonService? {
        get { lock.lock(); defer { lock.unlock() }; return stored }
        set { lock.lock(); stored = newValue; lock.unlock() }
    }
}

@Suite struct `Auto device selection without devices` {
    @Test func `an empty input directory waits and says no device can send the key`() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let service = try PTTButtonService(device: "auto", key: "KEY_PHONE", mode: .toggle,
                                           inputDirectory: directory.path) { _ in }
        try service.start()
        defer { service.stop() }
        try await waitUntil("the first scan", describe: { service.status.description }) {
            service.status.state == .waiting
        }
        let line = service.status.description
        #expect(line.contains("no input device can send KEY_PHONE (checked 0)"))
        #expect(line.contains("/dev/input/by-id"))
    }

    @Test func `files in the input directory that are not evdev devices are not candidates`() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try makeFifo(directory.file("event0"))
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: directory.file("event1")))
        try makeFifo(directory.file("mouse0"))
        let scan = InputDeviceScanner(device: "auto", keyCode: playPause, inputDirectory: directory.path).scan()
        #expect(scan.candidates == [])
        #expect(scan.problems == [])
        #expect(scan.checkedCount == 2)
    }

    @Test func `a missing input directory is reported`() {
        let scan = InputDeviceScanner(device: "auto", keyCode: playPause, inputDirectory: "/nonexistent/input").scan()
        #expect(scan.problems == [InputDeviceProblem(path: "/nonexistent/input", reason: .missing)])
    }

    @Test(arguments: [("auto", InputDeviceSelection.auto), ("AUTO", .auto), ("", .auto),
                      ("/dev/input/by-id/usb-x-event-kbd", .path("/dev/input/by-id/usb-x-event-kbd"))])
    func `ptt device settings select auto or a path`(setting: String, selection: InputDeviceSelection) {
        #expect(InputDeviceSelection(setting) == selection)
    }
}

@Suite struct `Status lines` {
    @Test func `unreadable devices are reported with the input group hint`() {
        var status = PTTButtonStatus(key: "KEY_PLAYPAUSE", mode: .hold, source: "auto")
        status.state = .waiting
        status.checkedCount = 5
        status.problems = (0..<5).map { InputDeviceProblem(path: "/dev/input/event\($0)", reason: .permissionDenied) }
        let line = status.description
        #expect(line.contains("cannot read 5 devices (/dev/input/event0, /dev/input/event1, /dev/input/event2, …): permission denied"))
        #expect(line.contains("sudo usermod -aG input $USER"))
    }

    @Test func `one unreadable explicit device names its path and the fix`() {
        let problem = InputDeviceProblem(path: "/dev/input/by-id/usb-Jabra-event-if03", reason: .permissionDenied)
        #expect(problem.description == "cannot read /dev/input/by-id/usb-Jabra-event-if03: permission denied; "
            + "add your user to the 'input' group (sudo usermod -aG input $USER) and log in again")
    }

    @Test func `a permission error from open maps to the permission hint`() {
        let error = ButtonsError.system(call: "open", path: "/dev/input/event3", errno: EACCES)
        #expect(error.description == "open /dev/input/event3: Permission denied; "
            + "add your user to the 'input' group (sudo usermod -aG input $USER) and log in again")
    }

    @Test func `listening names each open device and warns about one that lacks the key`() {
        var status = PTTButtonStatus(key: "KEY_F13", mode: .toggle, source: "/dev/input/by-id/usb-kbd-event-kbd")
        status.state = .listening
        status.devices = [InputDeviceInfo(path: "/dev/input/event4", byIdPath: "/dev/input/by-id/usb-kbd-event-kbd",
                                          name: "Cherry Keyboard", hasKey: false, hasHeadsetKeys: true)]
        #expect(status.description == "push-to-talk KEY_F13 (toggle, /dev/input/by-id/usb-kbd-event-kbd): listening on "
            + "\"Cherry Keyboard\" (/dev/input/by-id/usb-kbd-event-kbd -> /dev/input/event4); "
            + "warning: /dev/input/event4 does not report KEY_F13")
    }
}

@Suite struct `The service under a supervisor` {
    @Test func `run listens until its task is cancelled, then stops the reader`() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("headset")
        try makeFifo(path)
        let log = ActionLog()
        let service = try PTTButtonService(device: path, key: "KEY_PLAYPAUSE", mode: .hold) { log.append($0) }
        let task = Task { try await service.run() }
        try await waitUntil("the device is opened", describe: { service.status.description }) {
            service.status.state == .listening
        }
        let writer = try #require(FifoWriter(path: path))
        defer { writer.close() }
        writer.write(encode([.key(playPause, value: 1), .report()]))
        try await waitUntil("the press starts", describe: { "\(log.actions)" }) { log.actions == [.start] }
        task.cancel()
        try await task.value
        #expect(service.status.state == .stopped)
        #expect(log.actions == [.start, .stop])
    }

    @Test func `a directory as the device path is refused with a reason`() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let scan = InputDeviceScanner(device: directory.path, keyCode: playPause).scan()
        #expect(scan.candidates == [])
        #expect(scan.problems == [InputDeviceProblem(path: directory.path, reason: .failed(call: "open", errno: EISDIR))])
        #expect(scan.problems.first?.description == "cannot use \(directory.path): open: Is a directory")
    }
}
