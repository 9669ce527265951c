// systemd Type=notify: READY=1 once the node session is up (or waiting for approval) and the
// microphone runs, STATUS= lines that say what the node is doing, and WATCHDOG=1 only while the
// supervisor's services answer. The decisions are SystemdState (pure, tested); SystemdNotifier
// is the thin libsystemd edge (sd_notify, sd_watchdog_enabled).

import ClawvoiceCore
import CSystemd
import Foundation
import GatewayCrypto
import NodeRuntime

/// What the supervisor tells systemd, from what it saw this round.
public struct SystemdState: Sendable, Equatable {
    public struct Facts: Sendable, Equatable {
        /// SessionStatus states: connected, pairing, connecting, waiting, paused, stopped.
        public var node: String
        public var nodeDetail: String = ""
        public var operatorState: String
        /// LiveAudio's capture status: "running", "waiting for the sound server", …
        public var microphone: String
        public var muted = false
        /// The talk loop answered a barrier within its limit: the supervisor's services are not wedged.
        public var loopResponsive = true
        public init(node: String, nodeDetail: String = "", operatorState: String, microphone: String,
                    muted: Bool = false, loopResponsive: Bool = true) {
            self.node = node; self.nodeDetail = nodeDetail; self.operatorState = operatorState
            self.microphone = microphone; self.muted = muted; self.loopResponsive = loopResponsive
        }
    }

    public private(set) var readySent = false
    public private(set) var lastStatus: String?

    public init() {}

    public static func isReady(_ f: Facts) -> Bool {
        (f.node == "connected" || f.node == "pairing") && f.microphone == "running"
    }

    public static func status(_ f: Facts) -> String {
        var s: String
        switch f.node {
        case "connected": s = "node connected, operator \(f.operatorState)"
        case "pairing": s = "waiting for approval on the gateway" + (f.nodeDetail.isEmpty ? "" : " (\(f.nodeDetail))")
        default: s = "node \(f.node)" + (f.nodeDetail.isEmpty ? "" : ": \(f.nodeDetail)")
        }
        s += "; microphone \(f.muted ? "muted" : f.microphone)"
        if !f.loopResponsive { s += "; talk loop not answering" }
        return s
    }

    /// The notify lines for this round: READY=1 the first time the node is ready, STATUS= when
    /// it changed, WATCHDOG=1 when the watchdog is on and the services answer.
    public mutating func step(_ f: Facts, watchdog: Bool) -> [String] {
        var out: [String] = []
        if !readySent && Self.isReady(f) {
            readySent = true
            out.append("READY=1")
        }
        let status = Self.status(f)
        if status != lastStatus {
            lastStatus = status
            out.append("STATUS=" + status)
        }
        if watchdog && f.loopResponsive { out.append("WATCHDOG=1") }
        return out
    }
}

/// libsystemd's notify socket; nil when not run by systemd (NOTIFY_SOCKET unset).
struct SystemdNotifier: Sendable {
    init?(environment: [String: String]) {
        guard let s = environment["NOTIFY_SOCKET"], !s.isEmpty else { return nil }
    }

    /// The watchdog interval systemd asks for (WatchdogSec=), in microseconds; nil when off.
    var watchdogMicroseconds: UInt64? {
        var usec: UInt64 = 0
        return sd_watchdog_enabled(0, &usec) > 0 && usec > 0 ? usec : nil
    }

    package func send(_ lines: [String]) {
        guard !lines.isEmpty else { return }
        _ = sd_notify(0, lines.joined(separator: "\n"))
    }
}
