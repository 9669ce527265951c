// The node's controls besides push-to-talk: stop speaking, mute/unmute, volume. One value per
// control, parsed from the control socket or a key press; NodeDaemon.control carries it out.
// Also the keys bound to them (ptt.stopKey, muteKey, callKey, volumeUpKey, volumeDownKey): one evdev
// reader per key, each press one control.

import ClawvoiceCore
import Foundation
import GatewayCrypto
public import GatewayProtocol

public enum NodeControl: Sendable, Equatable {
    case stop
    case mute(Bool)
    case toggleMute
    /// A realtime call: start one, or hang up the one that is on (ptt.callKey).
    case toggleCall
    /// Set the level (percent), or change it by a delta.
    case volume(set: Int?, change: Int?)

    /// The control-socket request for it (and back, in `parse`).
    public var request: JSONValue {
        switch self {
        case .stop: return ["cmd": "stop"]
        case .mute(let on): return ["cmd": on ? "mute" : "unmute"]
        case .toggleMute: return ["cmd": "mute", "toggle": true]
        case .toggleCall: return ["cmd": "call", "toggle": true]
        case .volume(let set, let change):
            var o: [String: JSONValue] = ["cmd": "volume"]
            if let set { o["set"] = .number(Double(set)) }
            if let change { o["change"] = .number(Double(change)) }
            return .object(o)
        }
    }

    public static func parse(_ r: JSONValue) -> NodeControl? {
        switch r["cmd"]?.stringValue {
        case "stop": return .stop
        case "mute": return r["toggle"]?.boolValue == true ? .toggleMute : .mute(true)
        case "unmute": return .mute(false)
        case "volume": return .volume(set: r["set"]?.intValue.map(Int.init), change: r["change"]?.intValue.map(Int.init))
        default: return nil
        }
    }

    /// `clawvoice volume` argument: `N` (0–150), `+N` or `-N`; nil (no argument) only reads.
    public static func volumeArgument(_ arg: String?) -> NodeControl? {
        guard let arg else { return .volume(set: nil, change: nil) }
        let t = arg.hasSuffix("%") ? String(arg.dropLast()) : arg
        if t.hasPrefix("+") || t.hasPrefix("-") {
            guard let n = Int(t.dropFirst()), n >= 0, n <= 150 else { return nil }
            return .volume(set: nil, change: t.hasPrefix("-") ? -n : n)
        }
        guard let n = Int(t), (0...150).contains(n) else { return nil }
        return .volume(set: n, change: nil)
    }

    /// The new level for `.volume` from the current one: set wins, else current + change, in 0…150.
    public static func level(current: Int, set: Int?, change: Int?) -> Int {
        min(max(set ?? current + (change ?? 0), 0), 150)
    }
}
