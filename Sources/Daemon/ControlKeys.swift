// The keys bound to stop, mute, call and volume (ptt.*Key): one PTTButtonService per key.

import Buttons
import ClawvoiceCore
import GatewayCrypto
import NodeRuntime

/// The keys bound to controls: each a reader in hold mode whose press (`.start`) is one control;
/// releases and a device going away do nothing.
enum ControlKeys {
    static let volumeStep = 5

    static func bindings(_ p: ClawConfig.PTT) -> [(key: String, control: NodeControl)] {
        var b: [(String, NodeControl)] = []
        if let k = p.stopKey { b.append((k, .stop)) }
        if let k = p.muteKey { b.append((k, .toggleMute)) }
        if let k = p.callKey { b.append((k, .toggleCall)) }
        if let k = p.volumeUpKey { b.append((k, .volume(set: nil, change: volumeStep))) }
        if let k = p.volumeDownKey { b.append((k, .volume(set: nil, change: -volumeStep))) }
        return b
    }

    static func services(_ p: ClawConfig.PTT, onPress: @escaping @Sendable (NodeControl) -> Void) throws(ButtonsError) -> [PTTButtonService] {
        try bindings(p).map { (b) throws(ButtonsError) -> PTTButtonService in
            try PTTButtonService(device: p.device ?? "auto", key: b.key, mode: .hold, onAction: press(b.control, onPress))
        }
    }

    /// A key in hold mode says `.start` on each press; the release (and a lost device) say `.stop`.
    static func press(_ control: NodeControl, _ onPress: @escaping @Sendable (NodeControl) -> Void) -> @Sendable (PTTKeyAction) -> Void {
        { action in if action == .start { onPress(control) } }
    }
}
