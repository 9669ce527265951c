// system.notify as the official Linux node defines it (openclaw/openclaw
// extensions/linux-node/src/commands.ts): the pure part, params in, a parsed request or the
// node error out, with no speaker involved. Title and body are trimmed and at least one must
// be non-empty ("INVALID_REQUEST: empty notification"); notifications switched off in the
// config answer "NOTIFICATIONS_DISABLED: …"; the result is {"ok": true}.

import Foundation
public import GatewayProtocol

/// How urgent a notification is (`priority`: passive | active | timeSensitive upstream; the
/// Linux node maps them to notify-send urgency low | normal | critical).
public enum NotifyPriority: String, Sendable, Equatable {
    /// Not spoken over the user (the talk core holds it while the user is talking).
    case passive
    case active
    /// Interrupts whatever is speaking.
    case timeSensitive

    /// Anything unknown or absent is `active` ("anything else → normal" on Linux).
    /// `critical` is accepted as timeSensitive: it is notify-send's name for the same urgency.
    public init(param: String?) {
        switch (param ?? "").trimmingCharacters(in: .whitespacesAndNewlines).lowercased() {
        case "passive", "low": self = .passive
        case "timesensitive", "time-sensitive", "time_sensitive", "critical": self = .timeSensitive
        default: self = .active
        }
    }
}

/// A parsed `system.notify`.
public struct SystemNotifyRequest: Sendable, Equatable {
    /// Trimmed; nil when blank.
    public var title: String?
    public var body: String?
    public var priority: NotifyPriority
    /// Kept from the older clawvoice contract: `delivery: "interrupt"` or `interrupt: true`
    /// interrupt like timeSensitive.
    public var interrupts: Bool
    /// What is spoken: title, then body, blanks left out; never empty.
    public var parts: [String] { [title, body].compactMap { $0 } }

    /// The `system.notify` result every Linux node returns.
    public static let result: JSONValue = ["ok": true]

    /// Parses params. `enabled` is the config's `talk.speakNotifications`.
    /// - Throws: `NOTIFICATIONS_DISABLED` when off (checked first, as the Linux node does before
    ///   it reads the params), `INVALID_REQUEST: empty notification` when title and body are blank.
    public static func parse(_ params: JSONValue, enabled: Bool) throws(NodeInvokeError) -> SystemNotifyRequest {
        guard enabled else {
            throw NodeInvokeError(code: .notificationsDisabled, message: "spoken notifications are off on this node (talk.speakNotifications)")
        }
        func field(_ key: String) -> String? {
            let s = (params[key]?.stringValue ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
            return s.isEmpty ? nil : s
        }
        let title = field("title"), body = field("body")
        guard title != nil || body != nil else {
            throw NodeInvokeError(code: .invalidRequest, message: "empty notification")
        }
        let priority = NotifyPriority(param: params["priority"]?.stringValue)
        let interrupts = priority == .timeSensitive || field("delivery")?.lowercased() == "interrupt"
            || params["interrupt"]?.boolValue == true
        return SystemNotifyRequest(title: title, body: body, priority: priority, interrupts: interrupts)
    }
}
