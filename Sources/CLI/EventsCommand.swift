// `clawvoice events`: the daemon's events as JSON lines until it goes away.

import ClawvoiceCore
import Foundation
import GatewayClient
import GatewayCrypto
import GatewayProtocol
import NodeRuntime

/// `clawvoice events`.
enum EventsCommand {
    static let command = CLI.Command(name: "events", abstract: "Stream the daemon's events as JSON lines (for LEDs and scripts).",
                usage: "clawvoice events [--filter NAME,NAME]",
                details: """
                One line per event until Ctrl-C: {"event":"listeningStarted","ts":1764590000000,"captureId":"…","sessionKey":"…","trigger":"ptt"}.
                Events and their fields:
                  wake (phrase, score)   listeningStarted (captureId, sessionKey, trigger: ptt|wake)
                  listeningStopped (captureId, reason: ended|cancelled)   turnSent (idempotencyKey, runId, sessionKey)
                  replyStarted / replyFinished (runId, sessionKey, state)   speaking (state: started|stopped)
                  error (message)   muted   unmuted   connected / disconnected (role, gateway, detail)
                The config can run a command on each: events: { wake: "led on", listeningStopped: "led off" },
                with CLAWVOICE_EVENT, CLAWVOICE_TS and each field as CLAWVOICE_<FIELD> (captureId →
                CLAWVOICE_CAPTURE_ID) in its environment, as wyoming-satellite's --*-command flags do.
                When the daemon stops or restarts, events says so on stderr and exits 1: a script can start it again.

                Options:
                  --filter NAMES   only these events (comma-separated)
                """, flags: ["--filter": true], maxPositionals: 0)

    static func run(_ p: CLI.Parsed, config: ClawConfig, paths: RuntimePaths, log: LogSink, environment: [String: String]) async throws -> Int32 {
        let wanted = p.flags["--filter"].map { Set($0.split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) }) }
        if let w = wanted, let bad = w.first(where: { !NodeEvents.names.contains($0) }) {
            throw CLI.UsageError(description: "events: unknown event '\(bad)' (one of \(NodeEvents.names.joined(separator: ", ")))")
        }
        let daemonEnded = try ControlSocketClient.stream(["cmd": "events"], path: paths.controlSocket) { line in
            if let w = wanted, let name = (try? JSONCoding.decode(JSONValue.self, from: Data(line.utf8)))?["event"]?.stringValue,
               !w.contains(name) { return true }
            CLI.say(line)
            return true
        }
        // A script waiting on events must learn that none will come, not see a clean end.
        if daemonEnded {
            throw CLI.Failure(description: "events: the daemon went away (it stopped or restarted); "
                          + "run `clawvoice events` again once `clawvoice status` answers")
        }
        return 0
    }
}
