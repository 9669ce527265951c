import ClawvoiceTesting
import Foundation
import Testing
import LoopbackGateway
import GatewayProtocol
@testable import NodeRuntime
#if canImport(Glibc)
import Glibc
#endif

/// A fresh directory under /tmp (short, so control socket paths stay under 108 bytes), removed at the end.
final class Scratch: Sendable {
    let path: String

    init() throws {
        path = "/tmp/cvt-" + UUID().uuidString.prefix(12).lowercased()
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    func sub(_ name: String) -> String { (path as NSString).appendingPathComponent(name) }

    /// Writes `text` to `name` inside the scratch dir and returns its path.
    @discardableResult
    func write(_ name: String, _ text: String) throws -> String {
        let p = sub(name)
        try FileManager.default.createDirectory(atPath: (p as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try text.write(toFile: p, atomically: true, encoding: .utf8)
        return p
    }
}

/// The repository root, from this file's path (Tests/NodeRuntimeTests/Support.swift).
func repositoryRoot(_ file: String = #filePath) -> URL {
    URL(fileURLWithPath: file).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
}

enum ExecutableLookup {
    /// The `clawvoice` executable SwiftPM built next to the test bundle.
    static let clawvoice: Result<URL, LookupError> = find()

    struct LookupError: Error, CustomStringConvertible {
        var description: String
    }

    static func find() -> Result<URL, LookupError> {
        var starts: [URL] = [Bundle.main.bundleURL, Bundle.main.executableURL, URL(fileURLWithPath: CommandLine.arguments[0])]
            .compactMap { $0 }
        if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            starts.append(URL(fileURLWithPath: exe))
        }
        var tried: [String] = []
        for start in starts {
            var dir = start.standardizedFileURL
            for _ in 0..<6 {
                let candidate = dir.appendingPathComponent("clawvoice")
                var isDir: ObjCBool = false
                if FileManager.default.fileExists(atPath: candidate.path, isDirectory: &isDir), !isDir.boolValue,
                   FileManager.default.isExecutableFile(atPath: candidate.path) {
                    return .success(candidate)
                }
                tried.append(dir.path)
                let up = dir.deletingLastPathComponent()
                if up.path == dir.path { break }
                dir = up
            }
        }
        return .failure(LookupError(description: "no clawvoice executable next to the test bundle; build it first (`swift build`). Looked in: \(Set(tried).sorted().joined(separator: ", "))"))
    }

    static func require(sourceLocation: SourceLocation = #_sourceLocation) throws -> URL {
        switch clawvoice {
        case .success(let url): return url
        case .failure(let e):
            Issue.record(Comment(rawValue: e.description), sourceLocation: sourceLocation)
            throw e
        }
    }
}

/// One clawvoice process with its stdout and stderr going to files in the scratch dir, so
/// nothing blocks on a full pipe and tests can read output while it runs.
final class Spawned: @unchecked Sendable {
    let process = Process()
    let stdoutPath: String
    let stderrPath: String
    let arguments: [String]

    /// `executable` other than clawvoice: e.g. bash running tests/discovery/avahi-netns.sh exec clawvoice … in a namespace.
    init(_ arguments: [String], env: [String: String], in scratch: Scratch, executable: URL? = nil) throws {
        self.arguments = arguments
        let tag = UUID().uuidString.prefix(8)
        stdoutPath = scratch.sub("out-\(tag).txt")
        stderrPath = scratch.sub("err-\(tag).txt")
        FileManager.default.createFile(atPath: stdoutPath, contents: nil)
        FileManager.default.createFile(atPath: stderrPath, contents: nil)
        process.executableURL = try executable ?? ExecutableLookup.require()
        process.arguments = arguments
        process.environment = env
        process.currentDirectoryURL = URL(fileURLWithPath: scratch.path)
        let out = try FileHandle(forWritingTo: URL(fileURLWithPath: stdoutPath))
        let err = try FileHandle(forWritingTo: URL(fileURLWithPath: stderrPath))
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = out
        process.standardError = err
        try process.run()
        try? out.close()
        try? err.close()
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    var stdout: String { (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? "" }
    var stderr: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }
    var isRunning: Bool { process.isRunning }
    var pid: Int32 { process.processIdentifier }

    /// Waits for the process to end; nil (and SIGKILL) if it outlives `timeout`.
    func waitForExit(_ timeout: Duration) async -> Int32? {
        let ended = await eventually(timeout) { !process.isRunning }
        guard ended else {
            kill(process.processIdentifier, SIGKILL)
            _ = await eventually(.seconds(2)) { !process.isRunning }
            return nil
        }
        return process.terminationReason == .exit ? process.terminationStatus : 128 + process.terminationStatus
    }

    func signal(_ sig: Int32) { kill(process.processIdentifier, sig) }
}

/// What a finished clawvoice run printed and returned.
struct Outcome: CustomStringConvertible {
    var status: Int32?
    var stdout: String
    var stderr: String
    var description: String { "exit \(status.map(String.init) ?? "timeout")\n--- stdout\n\(stdout)--- stderr\n\(stderr)" }

    var stderrLines: [String] { stderr.split(separator: "\n", omittingEmptySubsequences: true).map(String.init) }
}

/// A per-test environment: its own state dir, config home and HOME, and nothing inherited
/// that could point clawvoice at the real user's files.
struct CLIEnvironment {
    let scratch: Scratch
    var extra: [String: String] = [:]

    init() throws { scratch = try Scratch() }

    var stateDir: String { scratch.sub("state") }
    var configHome: String { scratch.sub("config") }
    var controlSocket: String { stateDir + "/control.sock" }

    var variables: [String: String] {
        var env = ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin",
                   "HOME": scratch.sub("home"),
                   "XDG_CONFIG_HOME": configHome,
                   "XDG_STATE_HOME": scratch.sub("xdg-state"),
                   "CLAWVOICE_STATE_DIR": stateDir,
                   "LANG": "C.UTF-8"]
        for (k, v) in extra { env[k] = v }
        return env
    }

    func spawn(_ args: [String]) throws -> Spawned {
        try Spawned(args, env: variables, in: scratch)
    }

    /// Runs clawvoice to completion (killed after `timeout`).
    func run(_ args: [String], timeout: Duration = .seconds(15)) async throws -> Outcome {
        let p = try spawn(args)
        let status = await p.waitForExit(timeout)
        return Outcome(status: status, stdout: p.stdout, stderr: p.stderr)
    }
}

/// Base64url without padding, as setup codes are written.
func base64url(_ text: String) -> String {
    Data(text.utf8).base64EncodedString()
        .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

/// A started loopback gateway (the test stops it).
func startGateway(auth: LoopbackGateway.AuthMode, autoApprove: Bool = false) async throws -> LoopbackGateway {
    var c = LoopbackGateway.Configuration()
    c.auth = auth
    c.autoApprove = autoApprove
    let gateway = LoopbackGateway(configuration: c)
    try await gateway.start()
    return gateway
}

/// A loopback gateway that approves pairing by itself, and `clawvoice run` pointed at it through
/// the environment (the test stops both).
func daemonOnLoopbackGateway(token: String) async throws -> (LoopbackGateway, CLIEnvironment, Spawned) {
    let gateway = try await startGateway(auth: .token(token), autoApprove: true)
    var env = try CLIEnvironment()
    env.extra["CLAWVOICE_GATEWAY_URL"] = await gateway.url
    env.extra["CLAWVOICE_GATEWAY_TOKEN"] = token
    return (gateway, env, try env.spawn(["run"]))
}

/// `ControlSocketClient.send` on a thread of its own: it blocks for up to `timeoutSeconds`, and on
/// the cooperative pool (two threads here) it starved the server it waits for when tests ran side
/// by side (ControlSocketServiceTests timed out so in a fresh clone's round 1).
func sendOffPool(_ request: JSONValue, path: String, timeoutSeconds: Int) async throws -> JSONValue {
    try await onOwnThread { Result { try ControlSocketClient.send(request, path: path, timeoutSeconds: timeoutSeconds) } }.get()
}
