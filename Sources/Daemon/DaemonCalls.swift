// The daemon's realtime calls (issue 23, config talk.calls): the CallService wired to the
// operator session (requests, its status as CallMachine's operator input, talk.event), the
// gateway's HTTP origin and TLS pin, the microphone (through the talk loop's call hook, in order), the
// speaker (one PulseAudio stream for the call), the talk loop's call state, and the event bus.
// `clawvoice call` / `hangup` and `status` reach it through the control socket. The callbacks
// (CallService's edges, the talk loop's hooks, the link's status) are synchronous: they post to
// inboxes that `run()` carries out as its children, so nothing outlives the daemon's group.

import ClawvoiceCore
import GatewayCrypto
import Synchronization
import Audio
import Foundation
import GatewayClient
package import GatewayProtocol
import NodeRuntime
package import Realtime
package import Talk

package final class DaemonCalls: Sendable {
    package let service: CallService
    private let player: CallPlayer
    private let frames: AsyncStream<[Int16]>
    private let frameSink: AsyncStream<[Int16]>.Continuation
    private let connectedState = Mutex<(up: Bool, incarnation: Int)>((false, 0))
    private let log: LogSink
    /// What the talk loop hears of the call, in order (and, once it took a connected call, the
    /// call's stream opens).
    private let talkNotes: AsyncStream<TalkNote>
    private let talkNoteSink: AsyncStream<TalkNote>.Continuation
    /// Starts and stops asked for by the talk loop (a call wake word, a session switch): each a child.
    private let requests: AsyncStream<Request>
    private let requestSink: AsyncStream<Request>.Continuation
    /// The operator session's connections and losses, in order.
    private let operatorChanges: AsyncStream<OperatorChange>
    private let operatorSink: AsyncStream<OperatorChange>.Continuation

    private enum TalkNote: Sendable {
        case started(String, openStream: Bool)
        case ended(String)
    }
    private enum Request: Sendable {
        case start(CallMachine.Origin)
        case stop(CallMachine.EndCause)
    }
    private struct OperatorChange: Sendable {
        let up: Bool
        let incarnation: Int
        let session: GatewaySession
    }

    static let disabledMessage = "calls are off: set talk.calls to true in the config and restart (the gateway must allow talk.start and talk.stop: gateway.nodes.commands.allow)"

    init(config: ClawConfig, operatorSession: Locked<GatewaySession?>, gatewayURL: Locked<String>, gatewayPin: Locked<String?>, playback: PulsePlayback,
         reference: EchoReference?, talk: TalkController, bus: EventBus, log: LogSink) {
        self.log = log
        // The start sound plays at the head of the call's own stream (a cue of its own would take the speaker from it).
        let player = CallPlayer(playback: playback, reference: reference, startCue: FeedbackSounds(config.sounds.cues).sounds[.callStart], log: log)
        self.player = player
        (frames, frameSink) = AsyncStream.makeStream(of: [Int16].self, bufferingPolicy: .bufferingNewest(50))
        let (talkNotes, talkNoteSink) = AsyncStream.makeStream(of: TalkNote.self)
        (self.talkNotes, self.talkNoteSink) = (talkNotes, talkNoteSink)
        (requests, requestSink) = AsyncStream.makeStream(of: Request.self)
        (operatorChanges, operatorSink) = AsyncStream.makeStream(of: OperatorChange.self)
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
                    talkNoteSink.yield(.started(id, openStream: false))
                case .started(let id, let path, let origin, let key):
                    // The talk loop first (a no-op when dialing told it): its interrupt stops the
                    // speaker's stream, the call's then opens.
                    talkNoteSink.yield(.started(id, openStream: true))
                    let from: String
                    switch origin { case .invoke: from = "talk.start"; case .local(let what): from = what }
                    log.log(.info, "call", "call \(id) connected over \(path.rawValue) (session \(key), started by \(from))")
                    bus.publish("callStarted", ["callId": id, "path": path.rawValue, "origin": from, "sessionKey": key])
                case .ended(let id, let path, let cause):
                    player.stop()
                    talkNoteSink.yield(.ended(id))
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

    /// The call's timers, the microphone pump, the call's stream and the inboxes; until cancelled.
    package func run(talk: TalkController) async {
        let service = self.service
        let (sink, requestSink) = (frameSink, self.requestSink)
        await talk.onCallFrames { frame in sink.yield(frame.samples) }
        await talk.onCallStart { phrase in requestSink.yield(.start(.local("wake: \(phrase)"))) }
        await talk.onCallEnd { reason in requestSink.yield(.stop(reason == "gateway switched" ? .gatewaySwitched : .sessionSwitched)) }
        await withDiscardingTaskGroup { group in
            group.addTask { await service.run() }
            group.addTask { await self.player.run() }
            group.addTask { for await f in self.frames { await service.capture(f) } }
            group.addTask {
                // In order: a call that ends right after it started is not left standing in the loop.
                for await note in self.talkNotes {
                    switch note {
                    case .started(let id, let openStream):
                        // The talk loop first (a no-op when dialing told it): its interrupt stops
                        // the speaker's stream, the call's then opens.
                        await talk.callStarted(id: id)
                        if openStream { self.player.start() }
                    case .ended(let id):
                        await talk.callEnded(id: id)
                    }
                }
            }
            group.addTask {
                await withDiscardingTaskGroup { requests in
                    // Each its own child: a stop must not wait behind a start that is still dialing.
                    for await r in self.requests {
                        requests.addTask {
                            switch r {
                            case .start(let origin): _ = await service.start(origin: origin)
                            case .stop(let cause): _ = await service.stop(cause: cause)
                            }
                        }
                    }
                }
            }
            group.addTask { for await change in self.operatorChanges { await self.apply(change) } }
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
        operatorSink.yield(OperatorChange(up: up, incarnation: incarnation, session: session))
    }

    private func apply(_ change: OperatorChange) async {
        if change.up {
            let methods = await change.session.currentHello()?.methods ?? []
            let catalog = methods.contains("talk.catalog") ? try? await change.session.request("talk.catalog", params: [:]) : nil
            await service.offer(CallOffer(webrtc: methods.contains("talk.client.create"), relay: CallOffer.relayOffered(catalog: catalog)))
        }
        await service.operatorState(connected: change.up, incarnation: change.incarnation)
    }

    /// The control socket's `call` and `hangup` (and ptt.callKey's, `origin` "key").
    package func control(_ cmd: String, origin: String = "clawvoice call") async -> JSONValue {
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
    /// The stream is open for this generation (writes before it opens are dropped); a start or a
    /// stop begins the next one.
    private let state = Locked<(generation: Int, open: Bool)>((0, false))
    /// Generations to open, from `start()`; `run()` opens each.
    private let opens: AsyncStream<Int>
    private let openSink: AsyncStream<Int>.Continuation

    init(playback: PulsePlayback, reference: EchoReference?, startCue: PCMBuffer?, log: LogSink) {
        self.playback = playback
        self.reference = reference
        self.startCue = startCue
        self.log = log
        (opens, openSink) = AsyncStream.makeStream(of: Int.self)
    }

    /// Opens the stream (in `run()`); returns at once.
    package func start() {
        let gen = state.withLock { s -> Int in s.generation += 1; s.open = false; return s.generation }
        openSink.yield(gen)
    }

    /// Opens the stream for each start, and keeps the echo reference aligned with it while that
    /// generation plays; until cancelled.
    package func run() async {
        await withDiscardingTaskGroup { group in
            for await gen in opens { group.addTask { await self.play(gen) } }
        }
    }

    private func play(_ gen: Int) async {
        do {
            try await playback.open(format: .voice)
            let current = state.withLock { s -> Bool in if s.generation == gen { s.open = true }; return s.open }
            guard current else { return }
            reference?.begin(PCMBuffer(format: .voice))
            if let cue = startCue, cue.format == .voice { write(cue.samples) }
            guard let reference else { return }
            // Every 100 ms until a stop or the next start moves the generation on.
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(100))
                guard state.withLock({ $0.generation == gen }) else { return }
                if let t = playback.timing(), t.positionMicroseconds > 0 { reference.align(startedAt: t.startedAt) }
            }
        } catch {
            log.log(.warning, "call", "the call's audio cannot play: \(error)")
        }
    }

    package func write(_ samples: [Int16]) {
        guard state.withLock({ $0.open }) else { return }
        do {
            try playback.write(PCMBuffer(format: .voice, samples: samples))
            reference?.append(samples)
        } catch {}
    }

    /// Nothing plays after the end.
    package func stop() {
        let wasOpen = state.withLock { s -> Bool in defer { s.generation += 1; s.open = false }; return s.open }
        if wasOpen {
            playback.stop()
            reference?.end()
        }
    }
}
