// The whole path on a real kernel device: a uinput headset that `auto` must find, that
// disappears mid-capture and comes back. Skipped where /dev/uinput is missing or not writable
// (containers, VMs without the uinput module, CI without root or the input group).

import ClawvoiceCore
import Foundation
import Testing
import Buttons

@Suite struct `A uinput headset` {
    @Test(.enabled(if: FileManager.default.fileExists(atPath: "/dev/uinput") && VirtualKeyDevice.isAvailable,
                   "needs a writable /dev/uinput"),
          .timeLimit(.minutes(1)))
    func `auto finds it, follows presses, and picks it up again after it is re-created`() async throws {
        let name = "clawvoice test headset \(UUID().uuidString.prefix(8))"
        let keys = [playPause, volumeUp]
        var device: VirtualKeyDevice? = try VirtualKeyDevice(name: name, keys: keys)
        let log = ActionLog()
        let service = try PTTButtonService(device: "auto", key: "KEY_PLAYPAUSE", mode: .hold,
                                           rescanInterval: .seconds(1)) { log.append($0) }
        try service.start()
        defer { service.stop() }
        let isOpen = { service.status.devices.contains { $0.name == name } }

        try await waitUntil("auto opens \(name)", timeout: .seconds(10), describe: { service.status.description }, isOpen)
        let info = try #require(service.status.devices.first { $0.name == name })
        #expect(info.hasKey && info.hasHeadsetKeys && info.isEvdev)
        if let node = device?.devnode { #expect(info.path == node) }

        try device?.press(playPause)
        try await waitUntil("the press starts", describe: { "\(log.actions)" }) { log.actions == [.start] }
        try device?.release(playPause)
        try await waitUntil("the release stops", describe: { "\(log.actions)" }) { log.actions == [.start, .stop] }

        // Other keys on the same device do nothing.
        try device?.press(volumeUp)
        try device?.release(volumeUp)

        // Held when the headset disconnects: the capture must stop.
        try device?.press(playPause)
        try await waitUntil("the second press starts", describe: { "\(log.actions)" }) { log.actions.count == 3 }
        device = nil
        try await waitUntil("losing the device stops", describe: { "\(log.actions)" }) { log.actions.count == 4 }
        #expect(log.actions == [.start, .stop, .start, .stop])
        try await waitUntil("the lost device is closed", describe: { service.status.description }) { !isOpen() }

        // The headset reconnects: a new kernel device with the same name, no restart.
        device = try VirtualKeyDevice(name: name, keys: keys)
        try await waitUntil("auto opens it again", timeout: .seconds(10), describe: { service.status.description }, isOpen)
        try device?.press(playPause)
        try device?.release(playPause)
        try await waitUntil("presses work again", describe: { "\(log.actions)" }) { log.actions.count == 6 }
        #expect(log.actions == [.start, .stop, .start, .stop, .start, .stop])
        device = nil
    }

    @Test(.enabled(if: FileManager.default.fileExists(atPath: "/dev/uinput") && VirtualKeyDevice.isAvailable,
                   "needs a writable /dev/uinput"))
    func `the scanner reports its name, node and headset keys`() async throws {
        let name = "clawvoice test scan \(UUID().uuidString.prefix(8))"
        let device = try VirtualKeyDevice(name: name, keys: [playPause])
        let scanner = InputDeviceScanner(device: "auto", keyCode: playPause)
        try await waitUntil("the node appears", timeout: .seconds(10)) {
            scanner.scan().candidates.contains { $0.name == name }
        }
        let info = try #require(scanner.scan().candidates.first { $0.name == name })
        #expect(info.hasHeadsetKeys)
        if let node = device.devnode { #expect(info.path == node) }
        #expect(InputDeviceScanner(device: "auto", keyCode: 183).scan().candidates.allSatisfy { $0.name != name })
    }
}
