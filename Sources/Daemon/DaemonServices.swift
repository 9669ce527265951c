// The daemon's services: each runs as a child of the ServiceGroup `NodeDaemon.run` starts, and
// ends when it is cancelled (or, for a probe, when it is done).

import Audio
import Buttons
import ClawvoiceCore
import Foundation
import GatewayClient
import GatewayCrypto
import GatewayProtocol
import NodeRuntime
import Realtime
import Store
import Synchronization
import Talk

extension NodeDaemon {
    /// Gateway events in order to the talk loop (chat deltas, transcripts); voicewake.* arrive on
    /// both sessions (the node session gets them first on connect).
    func pumpEvents() async {
        for await (role, e) in events where role == .operator || e.event.hasPrefix("voicewake.") {
            // D5: a talk.event session.closed for this call ends it.
            if role == .operator, e.event == "talk.event", let calls { await calls.service.talkEvent(e.payload) }
            talk.handle(e)
        }
    }

    /// The active gateway's scope, rebuilt in place on every switch request until cancelled.
    /// Each scope's outbox sender runs as a child of a group that lives as long as the scope.
    func gatewayService() async {
        var requests = switches.makeAsyncIterator()
        var current: GatewayScope? = scope.withLock { $0 }
        while !Task.isCancelled {
            let request: String? = await withDiscardingTaskGroup { group in
            if let s = current {
                activeName.withLock { $0 = s.record.name }
                activeURL.withLock { $0 = s.record.url }
                activeTLSPin.withLock { $0 = s.record.tlsFingerprint }
                operatorSession.withLock { $0 = s.link.operator }
                talk.use(outbox: s.outbox)
                // Replies of an outbox turn arrive under the run id its chat.send returned.
                let talk = self.talk
                let bus = self.bus
                await s.outbox.observe { event in
                    if case .sent(let item, let runId) = event {
                        talk.turnSent(idempotencyKey: item.idempotencyKey, runId: runId)
                        bus.publish("turnSent", ["idempotencyKey": item.idempotencyKey, "runId": runId, "sessionKey": item.sessionKey])
                    }
                }
                group.addTask { await s.outbox.run() }
                group.addTask { await s.link.run() }
                group.addTask { await s.refreshService() }
            }
            let request = await requests.next()
            if let reason = request {
                // The talk loop and a call hear of the switch before the old link goes down.
                log.log(.info, "daemon", "\(reason): rebuilding the gateway link")
                await calls?.service.gatewaySwitched()
                await talk.interrupt(reason: reason)
            }
            // Ends the sender's loop and both sessions (the group waits for them); a chat.send on
            // the wire stops being waited for (its turn stays queued and goes again, with the
            // same key, from the next scope).
            group.cancelAll()
            return request
            }
            guard request != nil else { break }
            do {
                if let record = try resolveActiveGateway(config: latestConfig.withLock({ $0 }), store: store, remember: true) {
                    let next = makeScope(record)
                    scope.withLock { $0 = next }
                    current = next
                    active.withLock { $0 = true }
                    await talk.restoreSession((try? store.currentSession(gateway: record.name)) ?? config.talk.sessionKey)
                    log.log(.info, "daemon", "gateway \(record.name) (\(record.url))")
                } else {
                    current = nil
                    active.withLock { $0 = false }
                    operatorSession.withLock { $0 = nil }
                    log.log(.warning, "daemon", "no active gateway: pair one with `clawvoice pair` or pick one with `clawvoice gateways use NAME`")
                }
            } catch {
                log.log(.error, "daemon", "the gateway list cannot be read: \(error)")
            }
        }
    }

    /// Barge-in needs to know whether the speaker is a headset: ask PulseAudio about the sink.
    func probeHeadset() async {
        guard (try? await audio.connection.waitUntilReady(timeout: .seconds(10))) != nil,
              let sinks = try? await audio.connection.sinks(),
              let sink = sinks.first(where: { config.audio.sink == nil ? $0.isDefault : $0.name == config.audio.sink }) else { return }
        talk.setHeadset(sink.isHeadset)
        log.log(.info, "audio", "speaker \(sink.name) is \(sink.isHeadset ? "a headset: barge-in on" : (config.audio.echoCancel ?? true) ? "a loudspeaker: its echo is cancelled, so barge-in and wake words work while it speaks" : "a loudspeaker: the microphone mutes while it speaks")")
    }

    /// The headset or keyboard key's presses (the key itself is a service of its own): each a
    /// PTT command, in order.
    func followPresses() async {
        for await action in presses {
            switch action {
            case .start:
                do { _ = try await talk.start() } catch { log.log(.warning, "ptt", "button: \(error)") }
            case .stop:
                let r = await talk.stop()
                log.log(.info, "ptt", "button: capture \(r.captureId) \(r.status.rawValue)")
            }
        }
    }

    /// Type=notify: READY=1, STATUS= and the watchdog, every half watchdog interval (2 s without
    /// one). The watchdog is kicked only while the talk loop answers within 2 s.
    func systemdService(_ notifier: SystemdNotifier) async {
        let watchdog = notifier.watchdogMicroseconds
        let periodMs = Int64(watchdog.map { max($0 / 2_000, 100) } ?? 2_000)
        var state = SystemdState()
        var probe = talk.probe()
        while !Task.isCancelled {
            // A new probe only once the last was taken: a wedged loop holds one, not one a period.
            if probe.isAnswered { probe = talk.probe() }
            let node = await link.node.currentStatus()
            let op = await link.operator.currentStatus()
            let facts = SystemdState.Facts(node: node.state.rawValue, nodeDetail: node.detail, operatorState: op.state.rawValue,
                                           microphone: audio.captureStatus, muted: talk.muted,
                                           loopResponsive: await answered(probe, within: .seconds(2)))
            notifier.send(state.step(facts, watchdog: watchdog != nil))
            try? await Task.sleep(for: .milliseconds(periodMs))
        }
        notifier.send(["STOPPING=1"])
    }

    /// Whether the talk loop took `probe` within `limit`. Structured: both children end when
    /// the first does (a wedged or ended loop stops being waited for), nothing piles up.
    private func answered(_ probe: TalkController.Probe, within limit: Duration) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask { await probe.answered() }
            group.addTask { try? await Task.sleep(for: limit); return false }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }

    /// The presses of the keys bound to stop, mute and volume (each key a service of its own):
    /// each press one control, in order.
    func followControlPresses() async {
        for await c in controlPresses {
            let r = await control(c)
            log.log(.info, "ptt", "key: \(c) → \(r.description)")
        }
    }

    /// The operator session's status changes, in order: losing it, or the gateway naming another
    /// main session, is a session switch; on (re)connect queued turns go out at once and the
    /// gateway's Talk settings, wake triggers and the current history are read anew.
    func followOperator() async {
        for await (s, owner) in statuses {
            guard let owner, owner === scope.withLock({ $0 }) else { continue }  // a replaced scope's last words
            await talk.operatorChanged(connected: s.state == .connected, mainSessionKey: s.mainSessionKey)
            guard s.state == .connected else { continue }
            await owner.outbox.nudge()
            await talk.syncGatewayConfig()
            await talk.syncWake()
            let key = await historySessionKey(nil)
            _ = try? await owner.transcripts.refresh(sessionKey: key)
        }
    }

    /// SIGHUP: read the config again and apply what can change while running.
    func reloadConfig() async {
        guard let reload else { log.log(.info, "daemon", "SIGHUP: no config file to reload"); return }
        do {
            let c = try reload()
            talk.update(config: NodeDaemon.talkConfig(c, stateDir: paths.stateDir))
            bus.setCommands(c.events.commands)
            await speech.update(config: NodeDaemon.speechConfig(c))
            latestConfig.withLock { $0 = c }
            log.log(.info, "daemon", "SIGHUP: config reloaded")
        } catch {
            log.log(.error, "daemon", "SIGHUP: config not reloaded: \(error)")
            return
        }
        // A new pairing, another gateway.url or a paused session: rebuild the gateway link.
        do {
            let wanted = try resolveActiveGateway(config: latestConfig.withLock({ $0 }), store: store)
            let current = active.withLock({ $0 }) ? scope.withLock({ $0?.record }) : nil
            let roles = [await link.node.currentStatus(), await link.operator.currentStatus()]
            func address(_ r: GatewayRecord?) -> [String?] { [r?.name, r?.url, r?.tlsFingerprint, r.map { "\($0.allowInsecure)" }] }
            if address(wanted) != address(current) || roles.contains(where: { $0.state != .connected }) {
                switchSink.yield("SIGHUP")
            }
        } catch {
            log.log(.error, "daemon", "SIGHUP: the gateway stays as it was: \(error)")
        }
    }
}

/// A service the daemon can do without (a key whose reader cannot start): its failure is one
/// warning line and ends only itself, not the group.
struct LoggedService: Service {
    package let service: any Service
    let topic: String
    package let log: LogSink

    init(_ service: any Service, topic: String, log: LogSink) {
        self.service = service
        self.topic = topic
        self.log = log
    }

    package func run() async {
        do { try await service.run() } catch is CancellationError {} catch {
            log.log(.warning, topic, "\(error)")
        }
    }
}
