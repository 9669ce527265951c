// The rounds of `clawvoice-bench --calls` (CallFigures.swift has the rig): per path, one call with
// N utterances answered by the far end, the CPU of that call, and on the relay N barge-ins.

import Audio
import ClawvoiceCore
import ClawvoiceTesting
import Foundation
import GatewayProtocol
import LoopbackGateway
import NodeRuntime
import Realtime
import Talk

/// The speaker's monitor, 5 ms at a time, as the live figures in main.swift read it.
final class SpeakerMonitor: Sendable {
    let capture: PulseCapture
    let heard = Locked<[(ContinuousClock.Instant, Double)]>([])

    init(pulse: PrivatePulseServer) async throws {
        capture = PulseCapture(connection: PulseConnection(server: pulse.server, clientName: "bench-call-tap"),
                               source: PrivatePulseServer.speaker + ".monitor", frameMilliseconds: 5, bufferedFrames: 2_000)
        // Straight from PulseAudio's thread until `stop`: no task reads the tap.
        let heard = self.heard
        capture.onFrame = { f in heard.withLock { $0.append((f.receivedAt, f.pcm.rms)) } }
        try await capture.start()
    }

    func firstLoud(after t: ContinuousClock.Instant) -> ContinuousClock.Instant? { heard.withLock { $0.first { $0.0 > t && $0.1 > 0.01 }?.0 } }

    /// The start of the first 200 ms of silence after `t`.
    func firstQuietRun(after t: ContinuousClock.Instant) -> ContinuousClock.Instant? {
        heard.withLock { h in
            let after = h.filter { $0.0 > t }
            for (i, f) in after.enumerated() where f.1 < 0.005 && after.dropFirst(i).prefix(40).allSatisfy({ $0.1 < 0.005 }) && after.count - i >= 40 { return f.0 }
            return nil
        }
    }

    func stop() {
        capture.stop()
    }
}

/// Microphone frames into the call at 20 ms, as the daemon's pump hands them.
struct CallMic {
    let service: CallService
    var next = ContinuousClock.now
    /// The wall-clock time (s) the last voiced frame of the last utterance was handed over.
    var lastWall = 0.0

    mutating func send(_ f: [Int16]) async throws {
        await service.capture(f)
        next += .milliseconds(20)
        try await Task.sleep(until: next)
    }

    mutating func quiet(ms: Int) async throws { for _ in 0..<(ms / 20) { try await send([Int16](repeating: 0, count: 320)) } }

    /// The utterance; returns the instant its last voiced frame was handed to the call.
    mutating func speak(_ pcm: [Int16]) async throws -> ContinuousClock.Instant {
        var last = ContinuousClock.now
        for i in stride(from: 0, to: pcm.count - 319, by: 320) {
            last = .now
            lastWall = Date().timeIntervalSince1970
            try await send(Array(pcm[i..<i + 320]))
        }
        return last
    }
}

func callFigures(rounds: Int, pulse: PrivatePulseServer) async throws -> [Figure] {
    var out: [Figure] = []
    let monitor = try await SpeakerMonitor(pulse: pulse)
    defer { monitor.stop() }
    let utterance = callSpeech(ms: 800)
    for path in ["webrtc", "relay"] {
        let peer = path == "webrtc" ? try BenchWebRTCPeer() : nil
        defer { peer?.stop() }
        let rig = try await BenchCallRig(pulse: pulse) { c in
            if path == "webrtc" { c.calls = .gatewayControl } else { c.calls = .disabled; c.realtimeRelay = true }
        }
        async let _ = rig.run()  // the rig's service and streams, a child of this round (cancelled at its end)
        if let peer {
            await rig.gateway.setCallMediaEnd { offer in try await OfferExchange.post(origin: peer.origin, path: "/talk/offer", secret: peer.secret, offer: offer) }
        }
        let dialed = ContinuousClock.now
        _ = await rig.service.start(origin: .local("bench"))
        while await rig.service.status.phase != "connected" {
            guard ContinuousClock.now - dialed < .seconds(30) else { throw BenchError("the \(path) call did not connect within 30 s: \(await rig.service.status)") }
            try await Task.sleep(for: .milliseconds(20))
        }
        let setupMs = ms(ContinuousClock.now - dialed)
        var mic = CallMic(service: rig.service)
        try await mic.quiet(ms: 1_000)  // the media settles (SRTP up, the peer's silence flowing)

        // Replies: the utterance, then quiet until the answer has played out.
        let cpu0 = ProcStat.cpuSeconds(getpid()) ?? 0, t0 = ContinuousClock.now
        var edge: [Double] = [], speaker: [Double] = [], handedWall: [Double] = [], firstWrittenWall: [Double] = []
        for _ in 0..<rounds {
            let last = try await mic.speak(utterance)
            var waited = 0
            while rig.written.withLock({ $0.first { $0 > last } }) == nil, waited < 150 { try await mic.quiet(ms: 20); waited += 1 }
            try await mic.quiet(ms: 1_200)
            if let i = rig.written.withLock({ $0.firstIndex { $0 > last } }) {
                edge.append(ms(rig.written.withLock { $0[i] } - last))
                handedWall.append(mic.lastWall)
                firstWrittenWall.append(rig.writtenWall.withLock { $0[i] })
            }
            if let s = monitor.firstLoud(after: last) { speaker.append(ms(s - last)) }
        }
        let wall = ms(ContinuousClock.now - t0) / 1000
        let cpu = ((ProcStat.cpuSeconds(getpid()) ?? 0) - cpu0) / wall * 100
        let relayGaps = await rig.gateway.realtimeRelayRecords.first?.replyGapsMs ?? []
        let peerGaps = peer?.gaps.withLock { $0 } ?? []
        let farGaps = peer == nil ? relayGaps : peerGaps.map(\.ms)
        // WebRTC: the two legs, on the wall clock both ends share (rounds and replies pair up in order).
        var legs = ""
        if peer != nil, peerGaps.count == handedWall.count {
            let up = zip(peerGaps, handedWall).map { ($0.heard - $1) * 1000 }, down = zip(peerGaps, firstWrittenWall).map { ($1 - $0.sent) * 1000 }
            legs = String(format: "; by leg (wall clock): our last voiced frame handed → the peer hears it %.0f ms (our Opus framing and send, the peer's jitter buffer and decode), the peer sends its first → written to our stream %.0f ms (our jitter buffer and decode)", median(up), median(down))
        }
        let far = median(farGaps)
        let goal: Double = path == "webrtc" ? 60 : 120
        let farName = path == "webrtc" ? "the aiortc peer" : "the loopback relay"
        let share = median(edge) - far
        out.append(Figure(name: "call_\(path)_reply_at_speaker", value: median(speaker), unit: "ms", baseline: nil, ratio: nil,
                          detail: String(format: "the last voiced 20 ms frame of an 800 ms utterance handed to the call → the answer's first sound at the speaker's monitor (5 ms frames); %@'s share %.0f ms of it (its 400 ms endpoint, no scripted delay); median of %d; setup %.0f ms", farName, far, speaker.count, setupMs)))
        out.append(Figure(name: "call_\(path)_node_share" + (peer == nil ? "" : "_raw"), value: share, unit: "ms", baseline: peer == nil ? goal : nil, ratio: peer == nil ? share / goal : nil,
                          detail: String(format: "at the node's edges: last voiced frame handed to the call → first voiced received frame written to the PulseAudio stream, median %.0f ms (of %d), minus %@'s own share, median %.0f ms (of %d: its last voiced frame heard → its answer's first voiced frame sent); both legs of the loopback and the far end's receive/send stacks stay in%@%@", median(edge), edge.count, farName, far, farGaps.count, legs, peer == nil ? "; baseline: the goal" : "; the aiortc peer's receive jitter buffer is in (call_webrtc_node_share takes it out)")))
        if peer != nil {
            // aiortc's audio JitterBuffer(capacity=16, prefetch=4) hands a frame on once four later
            // frames are held: 80 ms the far end's receive stack adds to every reply, not the node.
            let own = share - 80
            out.append(Figure(name: "call_webrtc_node_share", value: own, unit: "ms", baseline: goal, ratio: own / goal,
                              detail: String(format: "call_webrtc_node_share_raw (%.0f ms) minus the aiortc peer's fixed receive hold (prefetch 4 × 20 ms = 80 ms, aiortc/rtcrtpreceiver.py): our Opus framing, send, the loopback both ways, our jitter buffer and decode, the far end's decode and Opus send; baseline: the goal", share)))
        }
        out.append(Figure(name: "call_\(path)_cpu", value: cpu, unit: "% of a core", baseline: 10, ratio: cpu / 10,
                          detail: String(format: "CPU time of this process over %.1f s of a connected call (%d replies): the node's CallService%@, the loopback gateway%@ and both its sessions, the speaker stream and its monitor tap (the aiortc peer is a process of its own, not counted); baseline: the goal", wall, rounds, path == "webrtc" ? " and its WebRTC peer (GStreamer)" : "", path == "relay" ? " with its realtime relay" : "")))

        if path == "relay" {
            // Barge-in: talk over the answer once 300 ms of it reached the stream.
            var cut: [Double] = [], flushed: [Double] = []
            for _ in 0..<rounds {
                let last = try await mic.speak(utterance)
                var waited = 0
                while rig.written.withLock({ $0.first { $0 > last } }) == nil, waited < 150 { try await mic.quiet(ms: 20); waited += 1 }
                try await mic.quiet(ms: 300)
                let over = ContinuousClock.now
                _ = try await mic.speak(Array(utterance.prefix(16 * 300)))
                try await mic.quiet(ms: 1_500)
                if let q = monitor.firstQuietRun(after: over) { cut.append(ms(q - over)) }
                if let f = rig.flushes.withLock({ $0.first { $0 > over } }) { flushed.append(ms(f - over)) }
            }
            let bargeIns = await rig.service.status.bargeIns
            let cancels = await rig.gateway.realtimeRelayRecords.first?.cancels.count ?? 0
            out.append(Figure(name: "call_relay_barge_in_to_silence", value: median(cut), unit: "ms", baseline: 300, ratio: median(cut) / 300,
                              detail: String(format: "talking over the relay's answer (after 300 ms of it) → 200 ms of silence at the speaker's monitor, median of %d; the node's flush %.0f ms after the first loud frame (median of %d; the rule wants ≥ 60 ms at RMS ≥ 0.08); %d barge-ins, %d cancelOutput at the gateway; an undisturbed answer runs 800 ms; baseline: the goal", cut.count, median(flushed), flushed.count, bargeIns, cancels)))
        }
        await rig.close()
    }
    return out
}
