// The daemon's realtime calls (issue 23, config talk.calls): the CallService wired to the
// operator session (requests, its status as CallMachine's operator input, talk.event), the
// gateway's HTTP origin and TLS pin, the microphone (through the talk loop's call hook, in order), the
// speaker (one PulseAudio stream for the call), the talk loop's call state, and the event bus.
// `clawvoice call` / `hangup` and `status` reach it through the control socket.

import ClawvoiceCore
import Synchronization
import Audio
import Foundation
import GatewayClient
import GatewayProtocol
import Realtime
import Talk

final class DaemonCalls: Sendable {
    let service: CallService
    private let player: CallPlayer
    private let frames: AsyncStream<[Int16]>
    private let frameSink: AsyncStream<[Int16]>.Continuation
    private let connectedState = Mutex<(up: Bool, incarnation: Int)>((false, 0))
    private let log: LogSink

    static let disabledMessage = "calls are off: set talk.calls to true in the config and restart (the gateway must allow talk.start and talk.stop: gateway.nodes.commands.allow)"

    init(config: ClawConfig, operatorSession: Locked<GatewaySession?>, gatewayURL: Locked<String>, gatewayPin: Locked<String?>, playback: PulsePlayback,
         reference: EchoReference?, talk: TalkController, bus: EventBus, log: LogSink) {
        self.log = log
        // The start sound plays at the head of the call's own stream (a cue of its own would take the speaker from it).
        let player = CallPlayer(playback: playback, reference: reference, startCue: FeedbackSounds(config.sounds.cues).sounds[.callStart], log: log)
        self.player = player
        (frames, frameSink) = AsyncStream.makeStream(of: [Int16].self, bufferingPolicy: .bufferingNewest(50))
        let explicitKey = config.talk.sessionKey
        let origin = config.talk.callsHttpOrigin
        var settings = CallService.defaultSettings
        settings.idleTimeoutMs = Int64(config.talk.callIdleSeconds) * 1000
        service = CallService(sampleRate: 16_000, settings: settings, localAddress: config.talk.callsIceAddress, edges: CallService.Edges(
            request: { method, params in
                guard let s = operatorSession.withLock({ $0 }) else { throw GatewayRequestError.notConnected("starting") }
                return try await s.request(method, params: params)
            },
            resolveTarget: {
                // D2: an explicit talk.sessionKey wins; else the operator connection's resolved target.
                if let explicitKey { return .success(CallMachine.Target(sessionKey: explicitKey)) }
                switch await operatorSession.withLock({ $0 })?.talkTarget() {
                case .resolved(let t)?: return .success(CallMachine.Target(sessionKey: t.sessionKey, agentId: t.gatewayTakesAgentId ? t.agentId : nil))
                case .invalid(let why)?: return .failure(CallMachine.Failure(code: "TALK_TARGET_INVALID", message: why))
                case nil: return .failure(CallMachine.Failure(code: "TALK_TARGET_PENDING", message: "the operator session has not resolved the talk target yet"))
                }
            },
            httpOrigin: { origin ?? OfferExchange.origin(gatewayURL: gatewayURL.withLock { $0 }) },
            play: { player.write($0) },
            event: { e in
                switch e {
                case .dialing(let id):
                    // PTT and wake are refused from the first step of the call, not only once it connects.
                    Task { await talk.callStarted(id: id) }
                case .started(let id, let path, let origin, let key):
                    // The talk loop first (a no-op when dialing told it): its interrupt stops the
                    // speaker's stream, the call's then opens.
                    Task { await talk.callStarted(id: id); player.start() }
                    let from: String
                    switch origin { case .invoke: from = "talk.start"; case .local(let what): from = what }
                    log.log(.info, "call", "call \(id) connected over \(path.rawValue) (session \(key), started by \(from))")
                    bus.publish("callStarted", ["callId": id, "path": path.rawValue, "origin": from, "sessionKey": key])
                case .ended(let id, let path, let cause):
                    player.stop()
                    Task { await talk.callEnded(id: id) }
                    log.log(.info, "call", "call \(id) ended (\(cause.name)) on \(path.rawValue)\(CallStatus.detail(cause).map { ": \($0)" } ?? "")")
                    bus.publish("callEnded", ["callId": id, "path": path.rawValue, "reason": cause.name])
                case .upgradeRequired(let why):
                    log.log(.warning, "call", "gateway upgrade required for calls: \(why)")
                }
            },
            log: { log.log(.info, "call", $0) },
            flushPlayback: { player.stop(); player.start() },
            offerTLSPin: {
                // The WebSocket's pin, when the offer goes to the gateway's own host (an override to another host: CA trust).
                let url = gatewayURL.withLock { $0 }
                guard let o = origin ?? OfferExchange.origin(gatewayURL: url) else { return nil }
                return OfferExchange.tlsPin(origin: o, gatewayURL: url, gatewayPin: gatewayPin.withLock { $0 })
            }))
    }

    /// The call's timers and the microphone pump; until cancelled.
    func run(talk: TalkController) async {
        let service = self.service
        let sink = frameSink
        await talk.onCallFrames { frame in sink.yield(frame.samples) }
        await talk.onCallStart { phrase in
            Task { _ = await service.start(origin: .local("wake: \(phrase)")) }
        }
        await talk.onCallEnd { reason in
            Task { _ = await service.stop(cause: reason == "gateway switched" ? .gatewaySwitched : .sessionSwitched) }
        }
        await withDiscardingTaskGroup { group in
            group.addTask { await service.run() }
            group.addTask { for await f in self.frames { await service.capture(f) } }
            group.addTask {
                await untilCancelled()
                self.frameSink.finish()
            }
        }
        player.stop()
    }

    /// The operator session's status: each new connection is a new incarnation (D5); on connect,
    /// what the gateway offers for calls (its methods, talk.catalog) goes in first.
    func operatorStatus(_ s: SessionStatus, session: GatewaySession) {
        let up = s.state == .connected
        guard let (changed, incarnation) = connectedState.withLock({ st -> (Bool, Int)? in
            if st.up == up { return nil }
            st.up = up
            if up { st.incarnation += 1 }
            return (true, st.incarnation)
        }), changed else { return }
        let service = self.service
        Task {
            if up {
                let methods = await session.currentHello()?.methods ?? []
                let catalog = methods.contains("talk.catalog") ? try? await session.request("talk.catalog", params: [:]) : nil
                await service.offer(CallOffer(webrtc: methods.contains("talk.client.create"), relay: CallOffer.relayOffered(catalog: catalog)))
            }
            await service.operatorState(connected: up, incarnation: incarnation)
        }
    }

    /// The control socket's `call` and `hangup` (and ptt.callKey's, `origin` "key").
    func control(_ cmd: String, origin: String = "clawvoice call") async -> JSONValue {
        if cmd == "call" {
            switch await service.start(origin: .local(origin)) {
            case .started: return ["ok": true, "started": true]
            case .alreadyActive: return ["ok": true, "started": false, "alreadyActive": true]
            case .unavailable(let why): return ["ok": false, "error": .string(why)]
            case .stopped: return ["ok": false, "error": "unexpected answer"]
            }
        }
        if case .stopped(let b) = await service.stop(cause: .hangup) { return ["ok": true, "stopped": .bool(b)] }
        return ["ok": false, "error": "unexpected answer"]
    }

    func statusJSON() async -> JSONValue { (try? JSONValue(encoding: await service.status)) ?? .null }
}

/// The call's audio at the speaker: one 16 kHz PulseAudio stream from the call's start to its end,
/// streamed into the echo canceller's reference (aligned by PulseAudio's timing info, as speech
/// clips are) so that the provider does not hear its own voice from a loudspeaker.
final class CallPlayer: Sendable {
    private let playback: PulsePlayback
    private let reference: EchoReference?
    private let startCue: PCMBuffer?
    private let log: LogSink
    private let aligner = Mutex<Task<Void, Never>?>(nil)
    /// The stream is open for this generation (writes before it opens are dropped).
    private let state = Locked<(generation: Int, open: Bool)>((0, false))

    init(playback: PulsePlayback, reference: EchoReference?, startCue: PCMBuffer?, log: LogSink) {
        self.playback = playback
        self.reference = reference
        self.startCue = startCue
        self.log = log
    }

    func start() {
        let gen = state.withLock { s -> Int in s.generation += 1; s.open = false; return s.generation }
        let (playback, state, log) = (self.playback, self.state, self.log)
        Task {
            do {
                try await playback.open(format: .voice)
                let current = state.withLock { s -> Bool in if s.generation == gen { s.open = true }; return s.open }
                guard current else { return }
                reference?.begin(PCMBuffer(format: .voice))
                if let cue = startCue, cue.format == .voice { write(cue.samples) }
                guard let reference = self.reference else { return }
                let task = Task {
                    while !Task.isCancelled {
                        try? await Task.sleep(for: .milliseconds(100))
                        if let t = playback.timing(), t.positionMicroseconds > 0 { reference.align(startedAt: t.startedAt) }
                    }
                }
                self.aligner.withLock { $0?.cancel(); $0 = task }
            } catch {
                log.log(.warning, "call", "the call's audio cannot play: \(error)")
            }
        }
    }

    func write(_ samples: [Int16]) {
        guard state.withLock({ $0.open }) else { return }
        do {
            try playback.write(PCMBuffer(format: .voice, samples: samples))
            reference?.append(samples)
        } catch {}
    }

    /// Nothing plays after the end.
    func stop() {
        let wasOpen = state.withLock { s -> Bool in defer { s.generation += 1; s.open = false }; return s.open }
        aligner.withLock { $0?.cancel(); $0 = nil }
        if wasOpen {
            playback.stop()
            reference?.end()
        }
    }
}
