// Owns: which input devices push-to-talk listens to. `auto` looks at every /dev/input/event*
// and keeps those that can send the key, headsets first; an explicit path is that one file,
// /dev/input/by-id links resolved. Problems (a missing path, no permission) become values
// with a hint, never a crash.

import Foundation

/// What `ptt.device` selects.
public enum InputDeviceSelection: Sendable, Equatable, CustomStringConvertible {
    /// Every evdev device that can send the key; devices with headset keys listed first.
    case auto
    /// One file: a /dev/input/by-id link, a /dev/input/eventN node, or any file of raw
    /// `struct input_event` records (a fifo in tests).
    case path(String)

    /// "auto" (any case) or empty selects `.auto`; anything else is a path.
    public init(_ setting: String) {
        let trimmed = setting.trimmingCharacters(in: .whitespaces)
        self = trimmed.isEmpty || trimmed.lowercased() == "auto" ? .auto : .path(trimmed)
    }

    public var description: String {
        switch self {
        case .auto: "auto"
        case .path(let path): path
        }
    }
}

/// One device push-to-talk can listen to.
public struct InputDeviceInfo: Sendable, Equatable, CustomStringConvertible {
    /// The file opened: the /dev/input/eventN node, symlinks resolved.
    public var path: String
    /// A /dev/input/by-id link to it, when udev made one (stable across reconnects).
    public var byIdPath: String?
    /// The kernel's device name; empty for a file that is not an evdev node.
    public var name: String
    /// libevdev could read its capabilities: it is a real evdev node, not a fifo or a file.
    public var isEvdev: Bool
    /// It can send the push-to-talk key (always false when `isEvdev` is false: unknown).
    public var hasKey: Bool
    /// It can send headset keys (`KeyCode.headsetKeys`).
    public var hasHeadsetKeys: Bool

    public init(path: String, byIdPath: String? = nil, name: String, isEvdev: Bool = true,
                hasKey: Bool, hasHeadsetKeys: Bool) {
        self.path = path
        self.byIdPath = byIdPath
        self.name = name
        self.isEvdev = isEvdev
        self.hasKey = hasKey
        self.hasHeadsetKeys = hasHeadsetKeys
    }

    public var description: String {
        let label = isEvdev ? "\"\(name)\"" : "raw event stream"
        let where_ = byIdPath.map { "\($0) -> \(path)" } ?? path
        return "\(label) (\(where_))"
    }
}

/// Why a device could not be used. Renders as one line that says what to do.
public struct InputDeviceProblem: Sendable, Equatable, CustomStringConvertible {
    /// The kinds of trouble a device path can be in.
    public enum Reason: Sendable, Equatable {
        /// The path does not exist (yet): the headset is off or not connected.
        case missing
        /// open(2) said EACCES or EPERM: the user may not read input devices.
        case permissionDenied
        /// It was open and went away (ENODEV, or its stream ended); the same file is still there,
        /// so it is not opened again until it is re-created.
        case lost
        /// Something else failed; the call and its errno.
        case failed(call: String, errno: Int32)
    }

    /// What to run when input devices cannot be read.
    public static let permissionHint =
        "add your user to the 'input' group (sudo usermod -aG input $USER) and log in again"

    public var path: String
    public var reason: Reason

    public init(path: String, reason: Reason) {
        self.path = path
        self.reason = reason
    }

    init(path: String, error: ButtonsError) {
        self.path = path
        switch error {
        case .system(_, _, let code) where code == EACCES || code == EPERM:
            reason = .permissionDenied
        case .system(_, _, let code) where code == ENOENT:
            reason = .missing
        case .system(let call, _, let code):
            reason = .failed(call: call, errno: code)
        case .unknownKey:
            reason = .failed(call: "probe", errno: EINVAL)
        }
    }

    public var description: String {
        switch reason {
        case .missing:
            return "\(path) does not exist (is the device connected?); it will be opened when it appears"
        case .permissionDenied:
            return "cannot read \(path): permission denied; \(Self.permissionHint)"
        case .lost:
            return "\(path) went away; it will be opened again when it reappears"
        case .failed(let call, let code):
            return "cannot use \(path): \(call): \(String(cString: strerror(code)))"
        }
    }
}

/// The outcome of one look at the devices.
public struct InputDeviceScan: Sendable, Equatable {
    /// Devices to listen to, preferred first (headset keys, then a by-id link, then node order).
    public var candidates: [InputDeviceInfo]
    /// Devices (or the configured path) that could not be used, with the reason.
    public var problems: [InputDeviceProblem]
    /// How many device files were looked at.
    public var checkedCount: Int
}

/// Finds the devices `ptt.device` selects and reads their capabilities with libevdev.
public struct InputDeviceScanner: Sendable {
    public let selection: InputDeviceSelection
    public let keyCode: UInt16
    /// Where evdev nodes live: /dev/input.
    public let inputDirectory: String

    public init(selection: InputDeviceSelection, keyCode: UInt16, inputDirectory: String = "/dev/input") {
        self.selection = selection
        self.keyCode = keyCode
        self.inputDirectory = inputDirectory
    }

    /// - Parameter device: `ptt.device`: "auto" or a path.
    public init(device: String, keyCode: UInt16, inputDirectory: String = "/dev/input") {
        self.init(selection: InputDeviceSelection(device), keyCode: keyCode, inputDirectory: inputDirectory)
    }

    /// Looks at the devices now, opening each just long enough to read its capabilities.
    public func scan() -> InputDeviceScan {
        let pass = open(skipping: [], known: [:])
        return InputDeviceScan(candidates: pass.opened.map(\.info), problems: pass.problems,
                               checkedCount: pass.checkedCount)
    }

    // MARK: - For the reader

    /// Devices opened by one pass, and what was learned about the rest.
    struct Pass {
        var opened: [(file: InputDeviceFile, info: InputDeviceInfo)] = []
        var problems: [InputDeviceProblem] = []
        var checkedCount = 0
        /// Auto only: devices that can never be candidates (no key, not evdev), so later passes
        /// skip them until the file at that path changes.
        var rejected: [String: FileIdentity] = [:]
    }

    /// Directories whose changes (IN_CREATE, IN_DELETE, IN_ATTRIB) can change what `open` finds.
    var watchDirectories: [String] {
        switch selection {
        case .auto:
            return [inputDirectory]
        case .path(let path):
            let parent = (path as NSString).deletingLastPathComponent
            // The by-id link appears in its directory, but the permissions udev sets a moment
            // later change the node in /dev/input, so watch both.
            return parent == inputDirectory ? [parent] : [parent, inputDirectory]
        }
    }

    /// Opens every selected device except those whose path is in `skipping` (already open) or
    /// whose file is the one `known` remembers (lost or rejected before, not re-created since).
    func open(skipping: Set<String>, known: [String: FileIdentity]) -> Pass {
        switch selection {
        case .auto: openAuto(skipping: skipping, known: known)
        case .path(let path): openExplicit(path, skipping: skipping, known: known)
        }
    }

    private func openExplicit(_ path: String, skipping: Set<String>, known: [String: FileIdentity]) -> Pass {
        var pass = Pass()
        pass.checkedCount = 1
        guard let identity = FileIdentity(path: path) else {
            pass.problems.append(InputDeviceProblem(path: path, reason: .missing))
            return pass
        }
        let node = Self.resolve(path)
        if skipping.contains(node) { return pass }
        var info = stat()
        if stat(node, &info) == 0, info.st_mode & S_IFMT == S_IFDIR {
            pass.problems.append(InputDeviceProblem(path: path, reason: .failed(call: "open", errno: EISDIR)))
            return pass
        }
        if known[path] == identity {
            pass.problems.append(InputDeviceProblem(path: path, reason: .lost))
            return pass
        }
        let file: InputDeviceFile
        do {
            file = try InputDeviceFile(path: node)
        } catch {
            pass.problems.append(InputDeviceProblem(path: path, error: error))
            return pass
        }
        let byId = path == node ? byIdLinks()[node] : path
        do {
            let caps = try file.probe(keyCode: keyCode)
            pass.opened.append((file, InputDeviceInfo(path: node, byIdPath: byId, name: caps.name,
                                                      hasKey: caps.hasKey, hasHeadsetKeys: caps.hasHeadsetKeys)))
        } catch .system(_, _, let code) where code == ENOTTY || code == EINVAL {
            // Not an evdev node (a fifo, a file of records): it was named explicitly, so read it
            // as a raw stream of input_event records anyway.
            pass.opened.append((file, InputDeviceInfo(path: node, byIdPath: byId, name: "", isEvdev: false,
                                                      hasKey: false, hasHeadsetKeys: false)))
        } catch {
            pass.problems.append(InputDeviceProblem(path: path, error: error))
        }
        return pass
    }

    private func openAuto(skipping: Set<String>, known: [String: FileIdentity]) -> Pass {
        var pass = Pass()
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: inputDirectory)
        } catch {
            pass.problems.append(InputDeviceProblem(path: inputDirectory, reason: .missing))
            return pass
        }
        let nodes = names.filter { $0.hasPrefix("event") }
            .sorted { Self.nodeNumber($0) < Self.nodeNumber($1) }
            .map { inputDirectory + "/" + $0 }
        pass.checkedCount = nodes.count
        var links: [String: String]?
        for node in nodes where !skipping.contains(node) {
            guard let identity = FileIdentity(path: node) else { continue }  // went away meanwhile
            if known[node] == identity { continue }
            let file: InputDeviceFile
            do {
                file = try InputDeviceFile(path: node)
            } catch {
                pass.problems.append(InputDeviceProblem(path: node, error: error))
                continue
            }
            guard let caps = try? file.probe(keyCode: keyCode), caps.hasKey else {
                pass.rejected[node] = identity
                continue
            }
            if links == nil { links = byIdLinks() }
            pass.opened.append((file, InputDeviceInfo(path: node, byIdPath: links?[node], name: caps.name,
                                                      hasKey: true, hasHeadsetKeys: caps.hasHeadsetKeys)))
        }
        pass.opened.sort { Self.preferred($0.info, over: $1.info) }
        return pass
    }

    /// Headset keys first, then devices with a stable by-id name, then node order.
    static func preferred(_ a: InputDeviceInfo, over b: InputDeviceInfo) -> Bool {
        if a.hasHeadsetKeys != b.hasHeadsetKeys { return a.hasHeadsetKeys }
        if (a.byIdPath != nil) != (b.byIdPath != nil) { return a.byIdPath != nil }
        return nodeNumber(a.path) < nodeNumber(b.path)
    }

    /// 7 for "/dev/input/event7", so event10 sorts after event9.
    static func nodeNumber(_ path: String) -> Int {
        let digits = path.reversed().prefix(while: \.isNumber)
        return Int(String(digits.reversed())) ?? Int.max
    }

    /// The path with every symlink resolved, or the path itself when that fails.
    static func resolve(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// Node path -> the first /dev/input/by-id link pointing at it (event links preferred).
    private func byIdLinks() -> [String: String] {
        let directory = inputDirectory + "/by-id"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return [:] }
        var links: [String: String] = [:]
        // "-event-" links name the evdev interface; plain ones may be joystick or mouse nodes.
        for name in names.sorted(by: { ($0.contains("-event-") ? 0 : 1, $0) < ($1.contains("-event-") ? 0 : 1, $1) }) {
            let link = directory + "/" + name
            let node = Self.resolve(link)
            if links[node] == nil { links[node] = link }
        }
        return links
    }
}
