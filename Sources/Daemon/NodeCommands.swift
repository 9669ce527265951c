// The node commands this build declares (talk.ptt.*, system.notify, and talk.start/stop with
// calls on), each registered on the talk loop, the notification speaker or the call service.

import Audio
import ClawvoiceCore
import Foundation
public import GatewayClient
import GatewayCrypto
import GatewayProtocol
import NodeRuntime
public import Realtime
import Store
public import Talk

/// The node commands this build declares. Talk and notification land in later parts; until then
/// they are declared (so pairing approves them once) and answer UNAVAILABLE with the reason.
public enum NodeCommands {
    public static let ptt = ["talk.ptt.start", "talk.ptt.stop", "talk.ptt.cancel", "talk.ptt.once"]
    public static let all = ptt + ["system.notify"]

    public static func registry(talk: TalkController? = nil, notifications: NotificationSpeaker? = nil,
                                calls: CallService? = nil) -> NodeCommandRegistry {
        let r = NodeCommandRegistry()
        // talk.start/talk.stop (D7) only with talk.calls on: new declared commands need the gateway's approval.
        if let calls {
            CallCommands.register(on: r, start: { await calls.start(origin: .invoke) }, stop: { await calls.stop(cause: .talkStop) })
        }
        if let talk {
            // The turn (and its reply) goes to the session the gateway stamped on the invoke
            // (TurnSession: top-level sessionKey), else the current one.
            r.register("talk.ptt.start") { req, _ in
                let session = TurnSession.resolve(invoke: req.session, current: nil, main: nil)
                do { return ["captureId": .string(try await talk.start(session: session))] } catch { throw pttFailure(error) }
            }
            r.register("talk.ptt.stop") { _, _ in try JSONValue(encoding: await talk.stop()) }
            r.register("talk.ptt.cancel") { _, _ in try JSONValue(encoding: await talk.cancel()) }
            r.register("talk.ptt.once") { req, _ in
                let session = TurnSession.resolve(invoke: req.session, current: nil, main: nil)
                do { return try JSONValue(encoding: try await talk.once(session: session)) } catch { throw pttFailure(error) }
            }
        } else {
            for c in ptt { r.registerUnavailable(c, reason: "AUDIO_UNAVAILABLE: this node runs without audio") }
        }
        if let notifications {
            r.register("system.notify", notifications.handler)
        } else {
            r.registerUnavailable("system.notify", reason: "AUDIO_UNAVAILABLE: spoken notifications need the daemon's speaker")
        }
        return r
    }

    static func pttFailure(_ error: any Error) -> NodeInvokeError {
        NodeInvokeError(code: .unavailable, message: (error as? PTTError)?.description ?? "\(error)")
    }
}
