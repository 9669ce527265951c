// `clawvoice-bench --idle [--seconds N]` and `--ptt-cycles N` (issue 25): a real `clawvoice run`
// (the executable beside this one) on a private PulseAudio and the loopback gateway, default
// config (a null sink is a loudspeaker, so echo cancelling is on; wake on), measured from the
// outside: CPU as the process's own CPU time (/proc/PID/stat utime+stime) over a fixed wall
// window, which other load on the machine does not inflate, and resident memory (VmRSS).
// Beside the daemon, in the same window: `parec` reading a microphone like it (its own null
// sink's monitor) in 20 ms fragments (the cost of capture alone), and each stage of the talk
// loop measured alone (IdleStages). `--ptt-cycles N`: N push-to-talk turns through the gateway's node.invoke, RSS
// sampled as they go, and the slope of a line through the samples after the first tenth.

import Audio
import ClawvoiceTesting
import Foundation
import GatewayProtocol
import LoopbackGateway
import NodeRuntime
import Talk
import WakeWord

struct ProcStat {
    /// User + system CPU seconds of the process (all its threads).
    static func cpuSeconds(_ pid: Int32) -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // After the name: state is field 3, utime 14, stime 15.
        guard fields.count > 12, let u = Double(fields[11]), let s = Double(fields[12]) else { return nil }
        return (u + s) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// A /proc/PID/status field's number (VmRSS: and VmHWM: in kB, Threads: a count).
    static func status(_ pid: Int32, _ field: String) -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix(field) }),
              let value = line.dropFirst(field.count).split(whereSeparator: { $0 == " " || $0 == "\t" }).first else { return nil }
        return Double(value)
    }
}

/// A `clawvoice run` of its own: scratch HOME and state, the private server, the loopback gateway.
final class DaemonUnderTest {
    let gateway: LoopbackGateway
    let process = Process()
    let dir: String
    /// The daemon's environment and executable, for running the CLI against it.
    let environment: [String: String]
    let binary: String
    var pid: Int32 { process.processIdentifier }

    init(pulse: PrivatePulseServer, extraEnv: [String: String] = [:]) async throws {
        var gc = LoopbackGateway.Configuration()
        gc.auth = .token("bench-token")
        gc.autoApprove = true
        gateway = LoopbackGateway(configuration: gc)
        try await gateway.start()
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("clawvoice-bench-\(UUID().uuidString.prefix(8))").path
        for sub in ["home", "config", "xdg-state", "state"] {
            try FileManager.default.createDirectory(atPath: dir + "/" + sub, withIntermediateDirectories: true)
        }
        let exe = ((try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0])
        binary = ((exe as NSString).deletingLastPathComponent as NSString).appendingPathComponent("clawvoice")
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw BenchError("no clawvoice executable beside the bench (\(binary)): build both (swift build -c release)")
        }
        var env = ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin", "HOME": dir + "/home",
                   "XDG_CONFIG_HOME": dir + "/config", "XDG_STATE_HOME": dir + "/xdg-state", "CLAWVOICE_STATE_DIR": dir + "/state",
                   "LANG": "C.UTF-8", "PULSE_SERVER": pulse.server, "CLAWVOICE_GATEWAY_URL": await gateway.url,
                   "CLAWVOICE_GATEWAY_TOKEN": "bench-token", "CLAWVOICE_MODELS_DIR": WakeModelCatalog.defaultDirectory()]
        // The allocator's and OpenBLAS's own knobs pass through, to compare settings from outside.
        for k in ["OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS", "MALLOC_ARENA_MAX", "GLIBC_TUNABLES"] {
            if let v = ProcessInfo.processInfo.environment[k] { env[k] = v }
        }
        for (k, v) in extraEnv { env[k] = v }
        environment = env
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["run"]
        process.environment = env
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        FileManager.default.createFile(atPath: dir + "/stderr.txt", contents: nil)
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: dir + "/stderr.txt"))
        try process.run()
        let deadline = ContinuousClock.now + .seconds(30)
        while await !Set(gateway.connectedRoles()).isSuperset(of: ["node", "operator"]) {
            guard process.isRunning, ContinuousClock.now < deadline else {
                let err = (try? String(contentsOfFile: dir + "/stderr.txt", encoding: .utf8)) ?? ""
                stop()
                throw BenchError("the daemon did not connect to the loopback gateway within 30 s: \(err.suffix(600))")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    func stop() {
        if process.isRunning {
            kill(pid, SIGTERM)
            let until = Date().addingTimeInterval(5)
            while process.isRunning && Date() < until { usleep(50_000) }
            if process.isRunning { kill(pid, SIGKILL) }
        }
        try? FileManager.default.removeItem(atPath: dir)
    }

    func close() async {
        stop()
        await gateway.stop()
    }
}

/// `parec` with 20 ms fragments on a microphone like the daemon's (a 16 kHz mono null sink's
/// monitor, hearing silence) but of its own: capture alone, the daemon's floor. Not the daemon's
/// source: a source runs at the shortest latency any of its readers asks for, so a parec on it
/// would hold the idle daemon's reads to 20 ms too (it asks for 80 ms while only wake listens).
func startParec(pulse: PrivatePulseServer) throws -> Process {
    var env = ProcessInfo.processInfo.environment
    env["PULSE_SERVER"] = pulse.server
    let load = Process()
    load.executableURL = URL(fileURLWithPath: "/usr/bin/pactl")
    load.arguments = ["load-module", "module-null-sink", "sink_name=cv_bench_parec", "rate=16000", "channels=1"]
    load.environment = env
    load.standardOutput = FileHandle.nullDevice
    load.standardError = FileHandle.nullDevice
    try load.run()
    load.waitUntilExit()
    guard load.terminationStatus == 0 else { throw BenchError("pactl could not add the baseline's null sink") }
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/parec")
    p.arguments = ["-d", "cv_bench_parec.monitor", "--rate=16000", "--channels=1", "--format=s16le", "--latency-msec=20", "--raw"]
    p.environment = env
    p.standardOutput = FileHandle.nullDevice
    p.standardError = FileHandle.nullDevice
    try p.run()
    return p
}

/// The idle daemon's CPU (share of one core) and RSS, capture alone beside it, and the stages.
func idleFigures(seconds: Double, pulse: PrivatePulseServer) async throws -> [Figure] {
    var out: [Figure] = []
    let daemon = try await DaemonUnderTest(pulse: pulse)
    defer { daemon.stop() }
    let parec = try? startParec(pulse: pulse)
    // Settled and at rest: models loaded, the first frames through every stage, talk.config and
    // wake triggers fetched, and the rest's one-off memory release (10 s after the last activity)
    // done, so the window holds the steady idle cost, as an idle node runs for hours.
    try await Task.sleep(for: .seconds(12))
    let d0 = ProcStat.cpuSeconds(daemon.pid) ?? 0, p0 = parec.flatMap { ProcStat.cpuSeconds($0.processIdentifier) } ?? 0
    let t0 = ContinuousClock.now
    try await Task.sleep(for: .seconds(seconds))
    let wall = ms(ContinuousClock.now - t0) / 1000
    let d1 = ProcStat.cpuSeconds(daemon.pid) ?? 0, p1 = parec.flatMap { ProcStat.cpuSeconds($0.processIdentifier) } ?? 0
    let rss = (ProcStat.status(daemon.pid, "VmRSS:") ?? 0) / 1024
    let anon = (ProcStat.status(daemon.pid, "RssAnon:") ?? 0) / 1024, file = (ProcStat.status(daemon.pid, "RssFile:") ?? 0) / 1024
    // CLAWVOICE_BENCH_SMAPS=FILE keeps the daemon's /proc/PID/smaps of that moment (what holds the RSS).
    if let keep = ProcessInfo.processInfo.environment["CLAWVOICE_BENCH_SMAPS"], let smaps = FileHandle(forReadingAtPath: "/proc/\(daemon.pid)/smaps")?.readDataToEndOfFile() {
        FileManager.default.createFile(atPath: keep, contents: smaps)
    }
    let threads = ProcStat.status(daemon.pid, "Threads:") ?? 0
    parec?.terminate()
    let daemonShare = (d1 - d0) / wall, parecShare = (p1 - p0) / wall
    out.append(Figure(name: "idle_daemon_cpu", value: daemonShare * 100, unit: "% of a core", baseline: parec == nil ? nil : parecShare * 100,
                      ratio: parec == nil || parecShare == 0 ? nil : daemonShare / parecShare,
                      detail: String(format: "clawvoice run, default config (echo cancelling on a null-sink loudspeaker, wake on, stop word loaded), microphone hearing silence, from 12 s after start (after the rest's memory release): CPU time over %.0f s of wall time (/proc/PID/stat); baseline: parec reading a microphone of its own like it (a null sink's monitor) in 20 ms fragments over the same window; goal ≤ 1 %%", wall)))
    out.append(Figure(name: "idle_daemon_rss", value: rss, unit: "MB", baseline: 30, ratio: rss / 30,
                      detail: String(format: "VmRSS of the same daemon at the end of the window: %.1f MB anonymous, %.1f MB file-backed (shared libraries' pages it touched); %d threads; baseline column: the goal, 30 MB", anon, file, Int(threads))))
    // Each stage alone, on this thread.
    for s in try IdleStages.measure(seconds: 30, modelsDirectory: WakeModelCatalog.defaultDirectory()) {
        out.append(Figure(name: "idle_stage: " + s.name, value: s.coreShare * 100, unit: "% of a core", baseline: nil, ratio: nil, detail: s.detail))
    }
    return out
}

/// `cycles` push-to-talk turns (start, 200 ms of microphone, stop) on the real daemon, as the
/// gateway asks for them; RSS sampled every tenth of the run; the slope after the first tenth.
func pttCycleFigures(cycles: Int, pulse: PrivatePulseServer) async throws -> [Figure] {
    let daemon = try await DaemonUnderTest(pulse: pulse)
    defer { daemon.stop() }
    try await Task.sleep(for: .seconds(2))
    var samples: [(Int, Double)] = []
    let every = max(cycles / 50, 1)
    var failures = 0
    let start = ContinuousClock.now
    for i in 0..<cycles {
        do {
            _ = try await daemon.gateway.invoke(command: "talk.ptt.start")
            try await Task.sleep(for: .milliseconds(200))
            _ = try await daemon.gateway.invoke(command: "talk.ptt.stop")
        } catch { failures += 1 }
        if i % every == every - 1 || i == cycles - 1, let rss = ProcStat.status(daemon.pid, "VmRSS:") { samples.append((i + 1, rss)) }
        if i % 100 == 99 { note("ptt cycles: \(i + 1), RSS \(String(format: "%.1f", (samples.last?.1 ?? 0) / 1024)) MB") }
    }
    let elapsed = ms(ContinuousClock.now - start) / 1000
    // Least squares over the samples after the first tenth (allocators, caches and SQLite's page
    // cache fill first): kB per cycle.
    let fit = samples.filter { $0.0 > cycles / 10 }
    let n = Double(fit.count)
    let mx = fit.reduce(0) { $0 + Double($1.0) } / n, my = fit.reduce(0) { $0 + $1.1 } / n
    let sxy = fit.reduce(0) { $0 + (Double($1.0) - mx) * ($1.1 - my) }, sxx = fit.reduce(0) { $0 + (Double($1.0) - mx) * (Double($1.0) - mx) }
    let slope = sxx > 0 ? sxy / sxx : .nan
    let first = samples.first?.1 ?? 0, last = samples.last?.1 ?? 0
    return [
        Figure(name: "ptt_cycles_rss_slope", value: slope, unit: "kB/cycle", baseline: nil, ratio: nil,
               detail: String(format: "%d push-to-talk cycles (gateway node.invoke talk.ptt.start, 200 ms, talk.ptt.stop; %d failed) in %.0f s; RSS %.1f MB after the first %d, %.1f MB at the end; slope by least squares after the first tenth", cycles, failures, elapsed, first / 1024, samples.first?.0 ?? 0, last / 1024)),
        Figure(name: "ptt_cycles_rss_growth_per_1000", value: slope * 1000 / 1024, unit: "MB", baseline: 1, ratio: slope * 1000 / 1024,
               detail: "the slope over 1,000 cycles (goal < 1 MB)"),
    ]
}
