// `clawvoice stop`, `mute`, `unmute` and `volume`: the controls (NodeControl) over the control socket.

import ClawvoiceCore
import Foundation
import GatewayClient
import GatewayCrypto
import GatewayProtocol
import NodeRuntime

/// `clawvoice stop|mute|unmute|volume`.
enum ControlCommand {
    static let stop = CLI.Command(name: "stop", abstract: "Stop speaking now, as talking over the assistant would.",
                usage: "clawvoice stop",
                details: """
                The reply being spoken stops within about 50 ms and its rest is dropped; the next turn tells the
                agent where it was cut ("Assistant speech interrupted at 2.4s."). A capture in progress goes on.
                Also on a key: ptt.stopKey.
                """, flags: [:], maxPositionals: 0)

    static let mute = CLI.Command(name: "mute", abstract: "Turn the microphone and the wake word off (kept across restarts).",
                usage: "clawvoice mute",
                details: """
                A capture in progress is cancelled; push-to-talk and wake words are refused (MUTED) until
                `clawvoice unmute`. The mute sound plays (sounds.mute), `status` says "muted", and a restarted
                daemon comes back muted. Also on a key: ptt.muteKey (each press toggles).
                """, flags: [:], maxPositionals: 0)

    static let unmute = CLI.Command(name: "unmute", abstract: "Turn the microphone and the wake word back on.",
                usage: "clawvoice unmute", details: "Plays the unmute sound (sounds.unmute).", flags: [:], maxPositionals: 0)

    static let volume = CLI.Command(name: "volume", abstract: "Show or set the level of clawvoice's own playback (0-150%).",
                usage: "clawvoice volume [N | +N | -N]",
                details: """
                The volume of clawvoice's playback stream on PulseAudio (as pactl and pavucontrol show it), not
                the sink's: speech, cues and the chime. The stream playing now changes at once; the level is
                kept across restarts. 100 leaves the level to the sound server. Keys: ptt.volumeUpKey and
                ptt.volumeDownKey (5 a press).
                """, flags: [:], maxPositionals: 1)

    static func run(_ p: CLI.Parsed, config: ClawConfig, paths: RuntimePaths, log: LogSink, environment: [String: String]) async throws -> Int32 {
        let control: NodeControl
        switch p.command.name {
        case "stop": control = .stop
        case "mute": control = .mute(true)
        case "unmute": control = .mute(false)
        default:
            guard let c = NodeControl.volumeArgument(p.positionals.first) else {
                throw CLI.UsageError(description: "volume: give a level from 0 to 150, or +N / -N (got \(p.positionals.first ?? ""))")
            }
            control = c
        }
        let r = try ControlSocketClient.send(control.request, path: paths.controlSocket)
        guard r["ok"]?.boolValue == true else { throw CLI.Failure(description: "\(p.command.name): \(r["error"]?.stringValue ?? "failed")") }
        switch p.command.name {
        case "stop": CLI.say(r["stopped"]?.boolValue == true ? "stopped speaking" : "nothing was playing")
        case "mute", "unmute": CLI.say(r["muted"]?.boolValue == true ? "muted: microphone and wake word off (clawvoice unmute)" : "unmuted")
        default: CLI.say("volume \(r["volume"]?.intValue ?? 0)%")
        }
        return 0
    }
}
