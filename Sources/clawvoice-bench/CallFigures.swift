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
import ClawvoiceTesting
import Foundation
import GatewayClient
import GatewayProtocol
import LoopbackGateway
import NodeRuntime
import Realtime
import Talk
import Store

/// The aiortc peer (ClawvoiceTesting's AiortcPeer, no reply delay); its stdout's `reply-gap-ms N`
/// lines are its share of each reply.
final class BenchWebRTCPeer: Sendable {
    let peer: AiortcPeer
    /// Per reply: its share (ms) and the wall-clock times (s) it heard our last voiced frame and sent its first.
    let gaps = Locked<[(ms: Double, heard: Double, sent: Double)]>([])

    init() throws {
        let gaps = self.gaps
        peer = try AiortcPeer(replyDelayMs: 0) { l in
            // "reply-gap-ms 402.1 heard 1764... sent 1764..."
            guard l.hasPrefix("reply-gap-ms ") else { return }
            let f = l.split(separator: " ")
            if f.count >= 6, let v = Double(f[1]), let h = Double(f[3]), let s = Double(f[5]) { gaps.withLock { $0.append((v, h, s)) } }
        }
    }

    var origin: String { peer.origin }
    var secret: String { peer.secret }
    func stop() { peer.stop() }
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
    /// The operator's talk events and the speaker's re-opens after a flush, carried out in order
    /// by `run()` (the session's and the service's callbacks cannot await).
    private let talkEvents: AsyncStream<JSONValue?>
    private let reopens: AsyncStream<Void>

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
        let (talkEvents, eventSink) = AsyncStream.makeStream(of: JSONValue?.self)
        let (reopens, reopenSink) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        self.talkEvents = talkEvents
        self.reopens = reopens
        op = GatewaySession(role: .operator, endpoint: GatewayEndpoint(name: "lb", url: url), credentials: GatewayCredentials(sharedToken: "bench-t"),
                            identity: identity, instanceId: instance, store: store, options: options, log: sink,
                            onEvent: { frame in
                                guard frame.event == "talk.event" else { return }
                                eventSink.yield(frame.payload)
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
                reopenSink.yield()
            }))
        self.service = service
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

    /// The service's timers, the talk events into it and the speaker's re-opens, until cancelled:
    /// `callFigures` runs it beside each call as a child task (`async let`).
    func run() async {
        let service = self.service, playback = self.playback, talkEvents = self.talkEvents, reopens = self.reopens
        await withDiscardingTaskGroup { group in
            group.addTask { await service.run() }
            group.addTask { for await payload in talkEvents { await service.talkEvent(payload) } }
            group.addTask { for await _ in reopens { _ = try? await playback.open(format: .voice) } }
        }
    }

    func close() async {
        _ = await service.stop(cause: .hangup)
        try? await Task.sleep(for: .milliseconds(300))
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

/// A voiced, speech-like signal at 16 kHz, as the call tests use (ClawvoiceTesting's speechLike).
func callSpeech(ms: Int, dbfs: Double = -14) -> [Int16] { speechLike(ms: ms, rate: 16_000, dbfs: dbfs) }
