// PulseTestServer: plumbing for the PulseAudio suites: makes sure the private server from
// tests/audio/pulse-server.sh runs and PULSE_SERVER points at it, loads throwaway null sinks so
// no test hears another's audio, records a sink's monitor, and makes and measures test tones.

import Audio
import ClawvoiceCore
import ClawvoiceTesting
import Foundation
import Testing

/// Every suite that plays or records real audio nests in here, so they run one at a time: the
/// timing checks (30 ms span, 50 ms stop) should not compete with each other for the CPU.
@Suite(.serialized) struct PulseAudioTests {}

enum PulseTestServer {
    /// The repository root, from this file's path: Tests/AudioTests/PulseTestServer.swift.
    static let repoRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
    static let script = repoRoot.appendingPathComponent("tests/audio/pulse-server.sh").path

    private static let lock = NSLock()
    nonisolated(unsafe) private static var cachedServer: String?

    /// The shared private server's address, started if `PULSE_SERVER` is unset or does not answer.
    /// Also exports it as `PULSE_SERVER` for everything else in this process.
    static func ensure() throws -> String {
        lock.lock()
        defer { lock.unlock() }
        if let server = cachedServer, answers(server) { return server }
        if let server = ProcessInfo.processInfo.environment["PULSE_SERVER"], answers(server) {
            cachedServer = server
            return server
        }
        let result = try runScript("start")
        guard result.status == 0, let server = exportedServer(in: result.out) else {
            throw TestFailure("pulse-server.sh start failed (\(result.status)): \(result.err)")
        }
        setenv("PULSE_SERVER", server, 1)
        cachedServer = server
        return server
    }

    /// Runs the server script with `CLAWVOICE_PULSE_DIR` set to `dir` when given.
    static func runScript(_ command: String, dir: String? = nil) throws -> ProcessResult {
        var env = ProcessInfo.processInfo.environment
        if let dir { env["CLAWVOICE_PULSE_DIR"] = dir }
        return try run("/bin/bash", [script, command], environment: env)
    }

    static func exportedServer(in output: String) -> String? {
        for line in output.split(separator: "\n") where line.hasPrefix("export PULSE_SERVER=") {
            return String(line.dropFirst("export PULSE_SERVER=".count))
        }
        return nil
    }

    static func answers(_ server: String) -> Bool {
        (try? pactl(["info"], server: server).status) == 0
    }

    static func pactl(_ arguments: [String], server: String) throws -> ProcessResult {
        var env = ProcessInfo.processInfo.environment
        env["PULSE_SERVER"] = server
        return try run("/usr/bin/pactl", arguments, environment: env)
    }

    struct ProcessResult {
        var status: Int32
        var out: String
        var err: String
    }

    static func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                    stdin: Data? = nil) throws -> ProcessResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        let input = Pipe()
        process.standardInput = stdin == nil ? FileHandle.nullDevice : input
        try process.run()
        if let stdin {
            input.fileHandleForWriting.write(stdin)
            try input.fileHandleForWriting.close()
        }
        // Read before waiting, so a chatty child cannot block on a full pipe.
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        let errData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return ProcessResult(status: process.terminationStatus,
                             out: String(decoding: outData, as: UTF8.self),
                             err: String(decoding: errData, as: UTF8.self))
    }

    /// A null sink loaded for one test and unloaded after it.
    struct ScratchSink {
        var name: String
        var module: String
        var server: String
        var monitor: String { name + ".monitor" }

        func unload() { _ = try? PulseTestServer.pactl(["unload-module", module], server: server) }

        /// Suspends and resumes the sink, which restarts its clock at now. Call it once a
        /// low-latency capture of the monitor runs: a fresh null sink has rendered up to 2 s ahead
        /// (see pulse-server.sh), which would delay the first sound by as much.
        func resetClock() throws {
            for state in ["1", "0"] {
                let result = try PulseTestServer.pactl(["suspend-sink", name, state], server: server)
                guard result.status == 0 else { throw TestFailure("pactl suspend-sink failed: \(result.err)") }
            }
        }
    }

    /// Loads a null sink shaped like cv_speaker (48 kHz stereo) or cv_mic (16 kHz mono), without
    /// rewinds like those (see pulse-server.sh), so its monitor hears exactly what was played.
    static func scratchSink(_ label: String, rate: Int, channels: Int, server: String) throws -> ScratchSink {
        let name = "cvt_\(label)_\(UUID().uuidString.prefix(8).lowercased())"
        let result = try pactl(["load-module", "module-null-sink", "sink_name=\(name)", "rate=\(rate)",
                                "channels=\(channels)", "norewinds=1"], server: server)
        let module = result.out.trimmingCharacters(in: .whitespacesAndNewlines)
        guard result.status == 0, Int(module) != nil else {
            throw TestFailure("pactl load-module module-null-sink failed: \(result.err)")
        }
        return ScratchSink(name: name, module: module, server: server)
    }

    /// Plays raw s16le into `sink` with pacat, independently of our own playback code.
    static func pacat(_ pcm: PCMBuffer, sink: String, server: String) throws {
        var env = ProcessInfo.processInfo.environment
        env["PULSE_SERVER"] = server
        let result = try run("/usr/bin/pacat", ["--playback", "--device=\(sink)", "--format=s16le",
                                                "--rate=\(pcm.format.sampleRateHz)", "--channels=\(pcm.format.channels)",
                                                "--raw"], environment: env, stdin: Data(pcm.bytes))
        guard result.status == 0 else { throw TestFailure("pacat failed: \(result.err)") }
    }

    /// Polls `condition` every 10 ms until it holds or `timeout` passes.
    static func waitUntil(timeout: Duration, _ condition: () -> Bool) async -> Bool {
        await eventually(timeout, every: .milliseconds(10), condition)
    }
}

/// Collects everything a PulseCapture delivers, for inspection while it runs.
final class PulseFrameRecorder: @unchecked Sendable {
    private let lock = NSLock()
    private var collected: [CapturedFrame] = []
    private var task: Task<Void, Never>?

    init(_ capture: PulseCapture) {
        task = Task { [weak self] in
            for await frame in capture.frames { self?.append(frame) }
        }
    }

    private func append(_ frame: CapturedFrame) {
        lock.lock()
        collected.append(frame)
        lock.unlock()
    }

    var frames: [CapturedFrame] {
        lock.lock()
        defer { lock.unlock() }
        return collected
    }

    var count: Int { frames.count }

    /// Waits for the capture's stream to finish (after `stop()`), so `frames` is complete.
    func finished() async { await task?.value }

    /// A capture of `sink`'s monitor with a recorder on it, started, the sink's clock reset.
    static func start(_ sink: PulseTestServer.ScratchSink, on connection: PulseConnection, bufferedFrames: Int = 500)
        async throws -> (PulseCapture, PulseFrameRecorder) {
        let capture = PulseCapture(connection: connection, source: sink.monitor, bufferedFrames: bufferedFrames)
        let recorder = PulseFrameRecorder(capture)
        try await capture.start()
        try sink.resetClock()
        return (capture, recorder)
    }
}

/// Test tones and measurements on 16-bit PCM.
enum PulseTestAudio {
    static func tone(hz: Double, milliseconds: Int, format: AudioFormat, amplitude: Double = 0.5) -> PCMBuffer {
        let frames = format.frames(milliseconds: milliseconds)
        var samples = [Int16](repeating: 0, count: frames * format.channels)
        for i in 0..<frames {
            let value = Int16(amplitude * 32767 * sin(2 * Double.pi * hz * Double(i) / Double(format.sampleRateHz)))
            for c in 0..<format.channels { samples[i * format.channels + c] = value }
        }
        return PCMBuffer(format: format, samples: samples)
    }

    static func silence(milliseconds: Int, format: AudioFormat) -> PCMBuffer {
        PCMBuffer(format: format, samples: [Int16](repeating: 0, count: format.frames(milliseconds: milliseconds) * format.channels))
    }

    static func concatenate(_ buffers: [PCMBuffer]) -> PCMBuffer {
        PCMBuffer(format: buffers[0].format, samples: buffers.flatMap(\.samples))
    }

    /// Frequency from zero crossings of a mono buffer.
    static func frequency(of pcm: PCMBuffer) -> Double {
        let s = pcm.samples
        var crossings = 0
        for i in 1..<s.count where (s[i - 1] < 0) != (s[i] < 0) { crossings += 1 }
        return Double(crossings) / 2 / (Double(s.count) / Double(pcm.format.sampleRateHz))
    }

    /// Index of the first and last sample louder than `threshold` (0…1 of full scale).
    static func loudSpan(_ samples: [Int16], threshold: Double = 0.02) -> ClosedRange<Int>? {
        let limit = Int(threshold * 32768)
        guard let first = samples.firstIndex(where: { abs(Int($0)) > limit }),
              let last = samples.lastIndex(where: { abs(Int($0)) > limit }) else { return nil }
        return first...last
    }
}
