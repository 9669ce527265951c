// What the daemon answers on its control socket (`clawvoice status`, `ptt`, `say`, `stop`, …)
// and what a control key does: one request in, one JSON answer out.

import Audio
import Buttons
import ClawvoiceCore
import Foundation
import GatewayClient
package import GatewayProtocol
package import NodeRuntime
import Realtime
import Store
import Talk

extension NodeDaemon {
    /// Carries out one control (from the socket or a key).
    package func control(_ c: NodeControl) async -> JSONValue {
        switch c {
        case .stop:
            let speaking = await talk.stopSpeaking()
            return ["ok": true, "stopped": .bool(speaking)]
        case .mute(let on):
            await talk.setMuted(on)
            return ["ok": true, "muted": .bool(talk.muted)]
        case .toggleMute:
            await talk.setMuted(!talk.muted)
            return ["ok": true, "muted": .bool(talk.muted)]
        case .toggleCall:
            guard let calls else { return ["ok": false, "error": .string(DaemonCalls.disabledMessage)] }
            return await calls.control(await calls.service.isActive ? "hangup" : "call", origin: "key")
        case .volume(let set, let change):
            if set != nil || change != nil {
                let level = NodeControl.level(current: audio.playback.volumePercent, set: set, change: change)
                audio.playback.setVolume(percent: level)
                do { try store.setSetting("volume", level == 100 ? nil : String(level)) } catch {
                    log.log(.warning, "audio", "could not remember volume \(level): \(error)")
                }
                log.log(.info, "audio", "volume \(level)%")
            }
            return ["ok": true, "volume": .number(Double(audio.playback.volumePercent))]
        }
    }

    func handle(_ request: JSONValue) async -> JSONValue {
        switch request["cmd"]?.stringValue {
        case "ping":
            return ["ok": true]
        case "status":
            return await statusJSON()
        case "session":
            if let key = request["use"]?.stringValue, !key.isEmpty {
                await talk.switchSession(to: key)
                return ["ok": true, "sessionKey": .string(key)]
            }
            return ["ok": true, "sessionKey": .string(await historySessionKey(nil))]
        case "restart":
            // The active gateway changed (`gateways use|forget`): rebuild its scope in place.
            switchSink.yield(request["reason"]?.stringValue ?? "gateway switched")
            return ["ok": true]
        case "ptt":
            return await ptt(request["action"]?.stringValue ?? "")
        case "stop", "mute", "unmute", "volume":
            guard let c = NodeControl.parse(request) else { return ["ok": false, "error": "bad control request"] }
            return await control(c)
        case "say":
            return await say(request)
        case "audio-devices":
            return await devicesJSON(connection: audio.connection)
        case "history-refresh":
            return await historyRefresh(request)
        case "listen":
            return await listenJSON(request)
        case "call", "hangup":
            guard let calls else { return ["ok": false, "error": .string(DaemonCalls.disabledMessage)] }
            let cmd = request["cmd"]?.stringValue ?? ""
            if request["toggle"]?.boolValue == true, await calls.service.isActive { return await calls.control("hangup") }
            return await calls.control(cmd)
        default:
            return ["ok": false, "error": .string("unknown command \(request["cmd"]?.stringValue ?? "(none)")")]
        }
    }

    func statusJSON() async -> JSONValue {
        var sessions: [String: JSONValue] = [:]
        for role in SessionRole.allCases {
            let s = role == .node ? await link.node.currentStatus() : await link.operator.currentStatus()
            sessions[role.rawValue] = (try? JSONValue(encoding: s)) ?? .null
        }
        let key: String? = await historySessionKey(nil)
        var out: JSONValue = ["ok": true, "version": .string(ClawvoiceVersion.current), "pid": .number(Double(getpid())),
                "uptimeMs": .number(Double(nowMs() - startedAtMs)),
                "gateway": ["name": .string(link.record.name), "url": .string(link.record.url)],
                "sessions": .object(sessions), "sessionKey": key.map { .string($0) } ?? .null,
                "capture": .string(audio.captureStatus), "ptt": .string(talk.activeCaptureId.map { "capturing \($0)" } ?? "idle"),
                "playback": .string(audio.playback.isPlaying ? "playing" : "idle"),
                "button": button.map { .string($0.status.description) } ?? "off",
                "muted": .bool(talk.muted), "volume": .number(Double(audio.playback.volumePercent)), "wake": await talk.wakeStatus?.json ?? "off",
                "outbox": .number(Double((try? store.outboxCount(gateway: link.record.name)) ?? 0))]
        if let calls, case .object(var o) = out { o["call"] = await calls.statusJSON(); out = .object(o) }
        return out
    }

    package func ptt(_ action: String) async -> JSONValue {
        do {
            switch action {
            case "start": return ["ok": true, "result": ["captureId": .string(try await talk.start())]]
            case "stop": return ["ok": true, "result": try JSONValue(encoding: await talk.stop())]
            case "cancel": return ["ok": true, "result": try JSONValue(encoding: await talk.cancel())]
            case "once": return ["ok": true, "result": try JSONValue(encoding: try await talk.once())]
            default: return ["ok": false, "error": .string("unknown ptt action '\(action)' (start, stop, cancel, once)")]
            }
        } catch {
            return ["ok": false, "error": .string("\(error)")]
        }
    }

    func say(_ request: JSONValue) async -> JSONValue {
        guard let text = request["text"]?.stringValue, !text.isEmpty else { return ["ok": false, "error": "say needs text"] }
        let route: SpeechRoute = request["local"]?.boolValue == true ? .local : .talkSpeak
        let report = await speech.speak(text, route: route)
        return ["ok": .bool(report.outcome != .failed), "engine": .string(report.engine),
                "fallbackReason": report.fallbackReason.map { .string($0) } ?? .null,
                "outcome": .string(report.outcome.rawValue), "durationMs": .number(report.durationMs.rounded()),
                "error": report.error.map { .string($0) } ?? .null]
    }
}
