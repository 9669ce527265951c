// `clawvoice-bench --wake-over-reply [--tries N]` (issue 22, item 5): a real `clawvoice run` on a
// private PulseAudio whose speaker is looped back into its microphone (module-loopback, 40 ms,
// about −9 dB), default config but for replies not spoken, wake trigger "computer". Each try
// has the daemon speak a long reply (`clawvoice say --local`, through the daemon), then plays
// the trigger into the microphone at the echo's level (0 dB) some way into it, and counts the
// turns the gateway receives (chat.send) for it: exactly one is a hit, whichever of voice
// barge-in and the wake detector fires first. The reply, the trigger, its level and timing are
// WakeOverReplyScenario's, which WakeOverReplyTests runs inside the test process.

import ClawvoiceCore
import ClawvoiceTesting
import Foundation
import LoopbackGateway
import NodeRuntime

/// `body` run against a daemon whose speaker is looped into its microphone: default config but
/// for replies not spoken, wake trigger "computer", its models loaded and triggers fetched.
func withLoopbackDaemon<T>(pulse: PrivatePulseServer, _ body: (DaemonUnderTest) async throws -> T) async throws -> T {
    let config = FileManager.default.temporaryDirectory.appendingPathComponent("clawvoice-bench-room-\(UUID().uuidString.prefix(8)).json5").path
    try Data("{ talk: { speakReplies: false } }\n".utf8).write(to: URL(fileURLWithPath: config))
    defer { try? FileManager.default.removeItem(atPath: config) }
    let daemon = try await DaemonUnderTest(pulse: pulse, extraEnv: ["CLAWVOICE_CONFIG": config])
    defer { daemon.stop() }
    await daemon.gateway.setTriggers(["computer"])
    let room = try LoopbackRoom.load(server: pulse.server)
    defer { room.unload() }
    try await Task.sleep(for: .seconds(3))   // models loaded, triggers fetched
    return try await body(daemon)
}

func wakeOverReplyFigures(tries: Int, pulse: PrivatePulseServer) async throws -> [Figure] {
    try await withLoopbackDaemon(pulse: pulse) { try await wakeOverReply(tries: tries, daemon: $0) }
}

private func wakeOverReply(tries: Int, daemon: DaemonUnderTest) async throws -> [Figure] {
    let said = try WakeOverReplyScenario.trigger().samples

    var hits = 0, doubles = 0, void = 0
    var notes: [String] = []
    for k in 0..<tries {
        await daemon.gateway.supplyTranscript(WakeOverReplyScenario.transcript)
        let before = await daemon.gateway.requests(method: "chat.send").count
        let say = try run(daemon.binary, ["say", "--local", WakeOverReplyScenario.reply], env: daemon.environment)
        try await Task.sleep(for: WakeOverReplyScenario.delay(try: k))
        let mic = try run("/usr/bin/pacat", ["--playback", "--device=" + PrivatePulseServer.microphoneSink, "--rate=16000",
                                              "--channels=1", "--format=s16le", "--raw", "--latency-msec=20"], env: daemon.environment, stdin: true)
        said.withUnsafeBufferPointer { mic.input?.write(Data(buffer: $0)) }
        try? mic.input?.close()
        let deadline = ContinuousClock.now + .seconds(WakeOverReplyScenario.turnWaitSeconds)
        while await daemon.gateway.requests(method: "chat.send").count == before && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(100))
        }
        // A second turn for the same trigger would arrive within a wake capture's length.
        try await Task.sleep(for: .seconds(3))
        let stop = try run(daemon.binary, ["stop"], env: daemon.environment)
        stop.process.waitUntilExit()
        say.process.waitUntilExit()
        mic.process.waitUntilExit()
        // What the daemon said it spoke ("spoke 2.31 s via espeak-ng").
        let spoke = String(decoding: (try? say.output?.readToEnd()) ?? Data(), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        // The reply was still playing when the trigger began: it spoke at least until then, less
        // the time espeak-ng took to start (under half a second here). Otherwise something else
        // stopped it first and the try says nothing about a trigger over the reply.
        let seconds = spokeSeconds(spoke)
        let overReply = seconds >= Double(ms(WakeOverReplyScenario.delay(try: k))) / 1000 - 0.5
        let n = await daemon.gateway.requests(method: "chat.send").count - before
        if !overReply {
            void += 1
            notes.append("-")
        } else {
            if n == 1 { hits += 1 } else if n > 1 { doubles += 1 }
            notes.append("\(n)")
        }
        note("wake over reply: try \(k + 1) of \(tries): \(n) turn(s); the daemon \(spoke.isEmpty ? "said nothing of the reply" : spoke)\(overReply ? "" : " (stopped before the trigger: not counted)")")
    }
    return [
        Figure(name: "wake_over_reply_turns", value: Double(hits), unit: "of \(tries - void) tries", baseline: Double(tries - void), ratio: tries > void ? Double(hits) / Double(tries - void) : nil,
               detail: "a real daemon, its speaker looped into its microphone (40 ms, −9 dB), echo cancelled; \"\(WakeOverReplyScenario.said)\" said at the echo's level \(String(format: "%.2f–%.2f", ms(WakeOverReplyScenario.delay(try: 0)) / 1000, ms(WakeOverReplyScenario.delay(try: tries - 1)) / 1000)) s into a spoken reply: tries that became exactly one turn (turns per try: \(notes.joined(separator: " ")); \(void) not counted, '-', because the reply had stopped before the trigger began); baseline: the tries counted; goal ratio ≥ 8/9 (0.889)"),
        Figure(name: "wake_over_reply_double_turns", value: Double(doubles), unit: "tries", baseline: nil, ratio: nil,
               detail: "tries in which one trigger became more than one turn (goal 0)"),
    ]
}

/// The seconds in `clawvoice say`'s "spoke 2.31 s via espeak-ng" (0 when it said nothing).
func spokeSeconds(_ line: String) -> Double {
    line.split(separator: " ").dropFirst().first.flatMap { Double($0) } ?? 0
}

/// A child process with the daemon's environment; `stdin`: a pipe to write to; its output
/// readable once it has ended.
func run(_ exe: String, _ args: [String], env: [String: String], stdin: Bool = false) throws -> (process: Process, input: FileHandle?, output: FileHandle?) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: exe)
    p.arguments = args
    p.environment = env
    let out = Pipe()
    p.standardOutput = out
    p.standardError = FileHandle.nullDevice
    var input: FileHandle?
    if stdin {
        let pipe = Pipe()
        p.standardInput = pipe
        input = pipe.fileHandleForWriting
    } else {
        p.standardInput = FileHandle.nullDevice
    }
    try p.run()
    return (p, input, out.fileHandleForReading)
}
