// `clawvoice-bench --calls [--rounds N]` (issue 23): a realtime call's figures on the loopback, per
// path. The node's CallService (the daemon's) on real gateway sessions; WebRTC through the aiortc
// peer (tests/peer/webrtc_peer.py), the relay through the loopback gateway's realtime relay. The
// call's audio goes to a PulseAudio stream on a private server, as the daemon's CallPlayer writes it.
//
// Per reply, timestamps at the node's edges: the last voiced frame handed to the call (what the
// microphone pump does) → the first voiced received frame written to the PulseAudio stream. The
// far end reports its own share (its last voiced frame heard → its answer's first voiced frame
// sent: its 400 ms endpoint, scripted delay 0, frame pacing); the node's share is the rest (both
// legs: our encode/send, the loopback, the far end's receive; its send, our jitter buffer and
// decode). Also: the same reply at the speaker's monitor, barge-in → silence at the monitor (relay),
// and the process's CPU time over the call's wall time.

import Audio
import ClawvoiceCore
import Foundation
import GatewayClient
import GatewayProtocol
import LoopbackGateway
import NodeRuntime
import Realtime
import Talk
import Store

/// One run of the aiortc peer; its stdout's `reply-gap-ms N` lines are its share of each reply.
final class BenchWebRTCPeer: Sendable {
    let process = Process()
    let stdin = Pipe()
    let port: Int
    let secret = "bench-broker-\(UInt32.random(in: 0...UInt32.max))"
    /// Per reply: its share (ms) and the wall-clock times (s) it heard our last voiced frame and sent its first.
    let gaps = Locked<[(ms: Double, heard: Double, sent: Double)]>([])

    init() throws {
        // The repository: the sources' own place (a bench is run from a checkout), else the working directory.
        let fromSource = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
        let root = FileManager.default.fileExists(atPath: fromSource + "/tests/peer/webrtc_peer.py") ? fromSource : FileManager.default.currentDirectoryPath
        let python = root + "/tests/peer/.venv/bin/python"
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw BenchError("\(python) is missing: run `make tests/peer/.venv/.ready` (the WebRTC figures need the aiortc peer)")
        }
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [root + "/tests/peer/webrtc_peer.py", "--secret", secret, "--reply-delay-ms", "0"]
        let out = Pipe()
        process.standardInput = stdin
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        var line = Data()
        let handle = out.fileHandleForReading
        while !line.contains(UInt8(ascii: "\n")) {
            let d = handle.availableData
            if d.isEmpty { throw BenchError("the WebRTC peer exited before it listened") }
            line += d
        }
        let first = String(decoding: line, as: UTF8.self).split(separator: "\n")[0]
        guard first.hasPrefix("listening "), let p = Int(first.dropFirst("listening ".count)) else { throw BenchError("the WebRTC peer said \(first)") }
        port = p
        let gaps = self.gaps
        let pending = Locked("")
        handle.readabilityHandler = { h in
            let d = h.availableData
            guard !d.isEmpty else { return }
            let lines = pending.withLock { p -> [Substring] in
                p += String(decoding: d, as: UTF8.self)
                var parts = p.split(separator: "\n", omittingEmptySubsequences: false)
                p = String(parts.removeLast())
                return parts
            }
            // "reply-gap-ms 402.1 heard 1764... sent 1764..."
            for l in lines where l.hasPrefix("reply-gap-ms ") {
                let f = l.split(separator: " ")
                if f.count >= 6, let v = Double(f[1]), let h = Double(f[3]), let s = Double(f[5]) { gaps.withLock { $0.append((v, h, s)) } }
            }
        }
    }

    var origin: String { "http://127.0.0.1:\(port)" }

    func stop() {
        try? stdin.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}

/// A node + operator session on a loopback gateway, a CallService on them, its audio to PulseAudio.
final class BenchCallRig: Sendable {
    let dir: String
    let gateway: LoopbackGateway
    let node: GatewaySession
    let op: GatewaySession
    let service: CallService
    let playback: PulsePlayback
    /// Edge timestamps: each voiced received frame written to the stream, each flush.
    let written = Locked<[ContinuousClock.Instant]>([])
    /// The same, on the wall clock (the aiortc peer's clock), to split a reply's legs.
    let writtenWall = Locked<[Double]>([])
    let flushes = Locked<[ContinuousClock.Instant]>([])
    let runTask: Task<Void, Never>

    init(pulse: PrivatePulseServer, configure: (inout LoopbackGateway.Configuration) -> Void) async throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("clawvoice-bench-call-\(UUID().uuidString.prefix(8))").path
        let store = try ClawStore(directory: dir)
        let (identity, instance) = try store.loadOrCreateIdentity()
        var c = LoopbackGateway.Configuration()
        c.auth = .token("bench-t")
        c.autoApprove = true
        configure(&c)
        let g = LoopbackGateway(configuration: c)
        try await g.start()
        gateway = g
        let url = await g.url
        try store.upsertGateway(GatewayRecord(name: "lb", url: url, sharedToken: "bench-t", isActive: true, addedAtMs: Int64(Date().timeIntervalSince1970 * 1000)))
        let options = SessionOptions(displayName: "bench call node", version: "0.1.0-bench")
        let sink = LogSink(minimum: .warning) { _, _, _ in }
        let serviceBox = Locked<CallService?>(nil)
        op = GatewaySession(role: .operator, endpoint: GatewayEndpoint(name: "lb", url: url), credentials: GatewayCredentials(sharedToken: "bench-t"),
                            identity: identity, instanceId: instance, store: store, options: options, log: sink,
                            onEvent: { frame in
                                guard frame.event == "talk.event", let s = serviceBox.withLock({ $0 }) else { return }
                                Task { await s.talkEvent(frame.payload) }
                            })
        node = GatewaySession(role: .node, endpoint: GatewayEndpoint(name: "lb", url: url), credentials: GatewayCredentials(sharedToken: "bench-t"),
                              identity: identity, instanceId: instance, store: store, options: options, commands: NodeCommandRegistry(), log: sink)
        let playback = PulsePlayback(connection: PulseConnection(server: pulse.server, clientName: "bench-call"), sink: PrivatePulseServer.speaker)
        self.playback = playback
        let op = self.op, written = self.written, writtenWall = self.writtenWall, flushes = self.flushes
        let service = CallService(sampleRate: 16_000, settings: CallService.defaultSettings, localAddress: "127.0.0.1", edges: CallService.Edges(
            request: { method, params in try await op.request(method, params: params) },
            resolveTarget: {
                guard let t = await op.talkTarget()?.target else { return .failure(.init(code: "NO_TARGET", message: "no talk target")) }
                return .success(CallMachine.Target(sessionKey: t.sessionKey, agentId: t.gatewayTakesAgentId ? t.agentId : nil))
            },
            httpOrigin: { await g.callOfferOrigin },
            play: { chunk in
                // As CallPlayer.write: the chunk into the call's stream; stamped once written.
                try? playback.write(PCMBuffer(format: .voice, samples: chunk))
                if callLevel(chunk) > 0.01 {
                    written.withLock { $0.append(.now) }
                    writtenWall.withLock { $0.append(Date().timeIntervalSince1970) }
                }
            },
            flushPlayback: {
                playback.stop()
                flushes.withLock { $0.append(.now) }
                Task { _ = try? await playback.open(format: .voice) }
            }))
        self.service = service
        serviceBox.withLock { $0 = service }
        runTask = Task { await service.run() }
        await op.start()
        await node.start()
        let deadline = ContinuousClock.now + .seconds(20)
        while true {
            let up = await op.isConnected, nodeUp = await node.isConnected, target = await op.talkTarget()
            if up && nodeUp && target != nil { break }
            guard ContinuousClock.now < deadline else { throw BenchError("the bench's sessions did not connect to the loopback gateway within 20 s") }
            try await Task.sleep(for: .milliseconds(50))
        }
        _ = try await playback.open(format: .voice)
        let methods = await op.currentHello()?.methods ?? []
        let catalog = try? await op.request("talk.catalog", params: [:])
        await service.offer(CallOffer(webrtc: methods.contains("talk.client.create"), relay: CallOffer.relayOffered(catalog: catalog)))
        await service.operatorState(connected: true, incarnation: 1)
    }

    func close() async {
        _ = await service.stop(cause: .hangup)
        try? await Task.sleep(for: .milliseconds(300))
        runTask.cancel()
        playback.stop()
        await node.stop()
        await op.stop()
        await gateway.stop()
        try? FileManager.default.removeItem(atPath: dir)
    }
}

/// RMS as a fraction of full scale.
func callLevel(_ s: [Int16]) -> Double {
    guard !s.isEmpty else { return 0 }
    return (s.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(s.count)).squareRoot() / 32768
}

/// A voiced, speech-like signal (180 Hz and harmonics under a syllable envelope), as the call tests use.
func callSpeech(ms: Int, dbfs: Double = -14) -> [Int16] {
    let n = ms * 16
    let amp = pow(10, dbfs / 20) * 32767
    return (0..<n).map { i in
        let t = Double(i) / 16_000
        let env = 0.6 + 0.4 * sin(2 * .pi * 4 * t)
        let v = sin(2 * .pi * 180 * t) + 0.5 * sin(2 * .pi * 360 * t) + 0.25 * sin(2 * .pi * 540 * t)
        return Int16(max(-32767, min(32767, amp * env * v / 1.75)))
    }
}
