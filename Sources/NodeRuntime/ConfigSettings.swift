// The settings table: every key of the config file, in the order the example file and the docs
// show them, with its kind (type, range, choices) and one line of help. Defaults are the fields'
// initial values in `ClawConfig`. Adding a setting: a field with its default in `ClawConfig`
// (Config.swift), a row here; then `make config-files` rewrites config/clawvoice.json5 and the
// key reference in docs/configuration.md (a test fails until it has).

import ClawvoiceCore
import Foundation
import GatewayClient
import GatewayCrypto
import GatewayProtocol
import Talk

/// A section of the file: its name, what it is for (the docs' map) and a note above its keys.
struct ConfigSection {
    package var name: String
    var purpose: String
    var note: String? = nil
    /// Help as a comment after each value (short lists such as the event commands).
    var compact = false
}

extension ClawConfig {
    static let sections: [ConfigSection] = [
        ConfigSection(name: "node", purpose: "how the gateway lists this node"),
        ConfigSection(name: "gateway", purpose: "which gateway and how to sign in; normally set by `clawvoice pair`"),
        ConfigSection(name: "audio", purpose: "the PulseAudio (or PipeWire) devices, echo cancellation, what ends an utterance"),
        ConfigSection(name: "talk", purpose: "a turn: capture, uplink, reply, recordings, barge-in, follow-up, the stop word, notifications"),
        ConfigSection(name: "ptt", purpose: "push-to-talk and control keys (evdev; the `input` group)"),
        ConfigSection(name: "events", purpose: "a shell command to run on each event ([usage.md](usage.md#events))",
                      note: "A shell command to run on each event (`clawvoice events` streams them all as JSON lines), with CLAWVOICE_EVENT, CLAWVOICE_TS and each field as CLAWVOICE_<FIELD> in its environment (captureId → CLAWVOICE_CAPTURE_ID). null: nothing runs. Not waited for; output is dropped. The comment after each names its fields.",
                      compact: true),
        ConfigSection(name: "sounds", purpose: "feedback sounds: a generated tone, off, or a file of at most 3 s",
                      note: "Feedback sounds besides the wake chime (wake.chime): true plays a generated tone pattern, false is off, a string is a sound file of at most 3 s (WAV of any depth, FLAC, MP3, Ogg Opus…; relative to this file). They never cut speech that is playing.",
                      compact: true),
        ConfigSection(name: "speech", purpose: "the espeak-ng voice for on-device speech"),
        ConfigSection(name: "wake", purpose: "wake words"),
        ConfigSection(name: "discovery", purpose: "finding gateways with avahi-daemon"),
        ConfigSection(name: "log", purpose: "debug, info, warning or error, on stderr (journald under systemd)"),
        ConfigSection(name: "control", purpose: "the daemon's control socket"),
    ]

    /// Sections later parts of clawvoice read: accepted with anything in them, so one file serves all versions.
    static let reservedSections = ["outbox"]

    /// Every key. Built on use (rows hold key paths and closures, which are not Sendable).
    static var settings: [ConfigSetting] {
        var rows: [ConfigSetting] = [
            .string("node.displayName", \.node.displayName,
                    "The name the gateway shows in `openclaw devices list` and `node.list`. Default: \"clawvoice on <hostname>\".",
                    shownDefault: "\"clawvoice on myhost\"",
                    accept: { $0.trimmingCharacters(in: .whitespaces).isEmpty ? nil : $0 }, refusal: "cannot be empty"),
            .optionalString("node.modelIdentifier", \.node.modelIdentifier,
                            "Optional hardware model shown to the gateway, e.g. \"RaspberryPi5\"."),

            .optionalString("gateway.url", \.gateway.url,
                            "Use this gateway instead of the one last paired with `clawvoice pair`, for every run that reads this config; the paired gateways are left as they are (one paired at this URL is used with its device tokens). ws://HOST:18789 for loopback, wss://HOST:PORT elsewhere. Env: CLAWVOICE_GATEWAY_URL."),
            .optionalString("gateway.token", \.gateway.token,
                            "The gateway's shared token (`gateway.auth.token`). Env: CLAWVOICE_GATEWAY_TOKEN. Only needed until the device is paired: the device tokens it receives are stored."),
            .optionalString("gateway.password", \.gateway.password,
                            "The gateway's password, for gateways in password mode. Env: CLAWVOICE_GATEWAY_PASSWORD."),
            .optionalString("gateway.tlsFingerprint", \.gateway.tlsFingerprint,
                            "SHA-256 of the gateway's TLS leaf certificate (64 hex digits; colons and a \"sha256:\" prefix are accepted). When set, only that certificate is accepted.",
                            accept: TLSFingerprint.normalize, refusal: "must be a SHA-256 fingerprint (64 hex digits)"),
            .bool("gateway.allowInsecure", \.gateway.allowInsecure,
                  "Allow plain ws:// to a host that is not loopback. Tokens then cross the network unencrypted: prefer wss:// with tlsFingerprint."),
            .choice("gateway.operatorClient", \.gateway.operatorClient, ["cli", "openclaw-linux"],
                    "Client id of the operator session: \"cli\" (accepted by every gateway version) or \"openclaw-linux\" (newest gateways only). Keep it stable once paired."),
            .bool("gateway.keepSharedSecret", \.gateway.keepSharedSecret,
                  "Once both sessions have signed in with the device tokens the gateway issued at pairing, the shared token and password above are removed from the state database: from then on revoking the device (`openclaw devices revoke`) really stops this node. true keeps them stored, so the node can sign in again with the shared secret after a revoke. A token given here or in CLAWVOICE_GATEWAY_TOKEN is always used when no device token works."),

            .optionalString("audio.source", \.audio.source,
                            "PulseAudio source to capture from; `clawvoice audio devices` lists them. null: the default source. Works with PipeWire's pulse server too."),
            .optionalString("audio.sink", \.audio.sink, "PulseAudio sink to play replies on; null: the default sink."),
            .int("audio.preRollMs", \.audio.preRollMs, 0...2000, "Audio from just before a capture starts that it keeps, in ms."),
            .optionalBool("audio.headset", \.audio.headset,
                          "Treat the output as a headset (true) or a loudspeaker (false); null: ask PulseAudio about the sink's active port and form factor."),
            .optionalBool("audio.echoCancel", \.audio.echoCancel,
                          "Cancel the speaker's own sound in the microphone (WebRTC's echo canceller, with our playback as the reference): then a loudspeaker does not mute the microphone while it speaks, and talking over it (or a wake word) interrupts it as on a headset. null: on for loudspeakers, off for headsets."),
            .int("audio.echoDelayMs", \.audio.echoDelayMs, 0...500,
                 "How late the speaker's sound reaches the microphone, in ms (the canceller also estimates it by itself)."),
            .choice("audio.voiceDetector", \.audio.voiceDetector, [VoiceDetectorChoice.model, .level],
                    "What ends an utterance: \"model\", the voice detector (models/voice.json), which hears voice and not loudness, so a fan, music or clatter does not hold the microphone open; \"level\", the frame's loudness against the room's noise floor (anything loud is speech)."),

            .int("talk.silenceTimeoutMs", \.talk.silenceTimeoutMs, 200...10_000,
                 "Silence after speech that ends `talk.ptt.once`, in ms; 900 is the shortest of 400/700/900 that cut ≤ 2 % of sentences early in `clawvoice-bench --endpoint` (the gateway's talk.silenceTimeoutMs wins when it sends one)."),
            .bool("talk.endOfTurn", \.talk.endOfTurn,
                  "End push-to-talk (`once`) and wake turns when the end-of-turn detector (models/turn.json) hears from how the speech ended that the turn is over, before talk.silenceTimeoutMs runs out (which stays the ceiling); false: the silence window alone. `clawvoice-bench --endpoint` and models/README.md give its figures."),
            .int("talk.onceMaxMs", \.talk.onceMaxMs, 1000...60_000, "A `once` capture ends here at the latest, in ms."),
            .int("talk.captureMaxMs", \.talk.captureMaxMs, 1000...600_000, "Hard cap for any capture (held button, `ptt start`), in ms."),
            .optionalString("talk.sessionKey", \.talk.sessionKey, "Chat session that turns go to; null: the gateway's main session."),
            .int("talk.opusBitrate", \.talk.opusBitrate, 6000...128_000, "Opus encoding of the uplink and voice notes: bits per second."),
            .int("talk.opusComplexity", \.talk.opusComplexity, 0...10, "Opus encoding of the uplink and voice notes: complexity."),
            .optionalString("talk.outputFormat", \.talk.outputFormat,
                            "Audio format asked of talk.speak: pcm_16000, pcm_24000, pcm_44100, mp3_44100_128, opus… The gateway's answer says what it really sent."),
            .bool("talk.speakReplies", \.talk.speakReplies, "Speak the assistant's replies."),
            .bool("talk.voiceNotes", \.talk.voiceNotes,
                  "Keep recordings (Ogg Opus voice notes) of captures under <stateDir>/voice-notes, for debugging and re-sending. Off by default: what you say is not kept on this device. When on: at most voiceNotesKeep of them, none older than voiceNotesMaxAgeDays. `clawvoice forget` removes them; docs/privacy.md says what else is stored."),
            .int("talk.voiceNotesKeep", \.talk.voiceNotesKeep, 1...1000, "With voiceNotes on: how many recordings are kept, the newest."),
            .int("talk.voiceNotesMaxAgeDays", \.talk.voiceNotesMaxAgeDays, 1...3650, "With voiceNotes on: recordings older than this many days are removed."),
            .bool("talk.interruptOnSpeech", \.talk.interruptOnSpeech,
                  "Talking over the assistant stops it (barge-in) on a headset, and on a loudspeaker whose echo is cancelled (audio.echoCancel); the next prompt then starts with \"Assistant speech interrupted at X.Xs.\". A loudspeaker without echo cancellation mutes the microphone while the assistant speaks, plus 300 ms."),
            .int("talk.followUpMs", \.talk.followUpMs, 0...15_000,
                 "After a reply has been spoken, keep listening this long (ms) for a next turn without the wake word, as iOS Talk mode continues a conversation; 0 turns it off."),
            .bool("talk.stopWord", \.talk.stopWord,
                  "\"stop\" said while the node speaks stops it, as a barge-in does (a head for \"stop\" in the wake models directory, models/stop.json). It listens only while the node speaks, on a headset or an echo-cancelled loudspeaker; false turns it off."),
            .number("talk.stopWordSensitivity", \.talk.stopWordSensitivity, 0...1,
                    "0.5 is the stop head's trained threshold, higher stops more easily (and falsely). 0.7 by default: it listens only while the node speaks, where a missed \"stop\" costs more than a reply cut short."),
            .bool("talk.speakNotifications", \.talk.speakNotifications,
                  "Speak system.notify notifications (title, then body). false: the node answers every system.notify with NOTIFICATIONS_DISABLED, as the Linux node does when notifications are off."),
            .bool("talk.calls", \.talk.calls,
                  "Realtime calls with the agent (`clawvoice call`, ptt.callKey, and talk.start from the agent once the gateway allows it in gateway.nodes.commands.allow). Off by default: turning it on declares talk.start/talk.stop, which the gateway approves again."),
            .optionalString("talk.callsHttpOrigin", \.talk.callsHttpOrigin,
                            "The gateway's HTTP origin for the call's SDP offer, e.g. \"http://gateway.lan:18789\"; null: the gateway URL's (ws→http, wss→https). An https origin is trusted as the gateway's WebSocket is: on the gateway's host by its pin (gateway.tlsFingerprint) when it has one; otherwise by the system CAs and the host name.",
                            accept: { $0.hasPrefix("http://") || $0.hasPrefix("https://") ? $0 : nil }, refusal: "must be an http:// or https:// origin"),
            .optionalString("talk.callsIceAddress", \.talk.callsIceAddress,
                            "Gather the call's ICE candidates on this one local address only; null: every host address."),
            .int("talk.callIdleSeconds", \.talk.callIdleSeconds, 10...3600,
                 "A call with no speech either way for this long ends, in seconds (the room node's call idle timer)."),
            .optionalString("talk.callWakeWord", \.talk.callWakeWord,
                            "A wake phrase, one of the node's triggers (e.g. \"computer\"), that starts a realtime call instead of a turn (talk.calls must be on); null: every trigger starts a turn."),

            .optionalString("ptt.device", \.ptt.device,
                            "Push-to-talk key device: a /dev/input/by-id/… path, \"auto\" (any device with media or phone keys, as headsets have), or null (no key). Reading input devices needs the `input` group."),
            .string("ptt.key", \.ptt.key, "Key name: KEY_PLAYPAUSE, KEY_PHONE, KEY_MEDIA, KEY_F13, …"),
            .choice("ptt.mode", \.ptt.mode, ["hold", "toggle"], "\"hold\": press starts, release stops. \"toggle\": press starts, press again stops."),
            .optionalString("ptt.stopKey", \.ptt.stopKey,
                            "Key that stops speaking, as a barge-in, e.g. \"KEY_STOPCD\". This and the keys below are read on the same device (\"auto\" when device is null); null leaves the control without a key."),
            .optionalString("ptt.muteKey", \.ptt.muteKey, "Key that mutes and unmutes (each press toggles), e.g. \"KEY_MICMUTE\"."),
            .optionalString("ptt.volumeUpKey", \.ptt.volumeUpKey, "Key that turns the volume up by 5, e.g. \"KEY_VOLUMEUP\"."),
            .optionalString("ptt.volumeDownKey", \.ptt.volumeDownKey, "Key that turns the volume down by 5, e.g. \"KEY_VOLUMEDOWN\"."),
            .optionalString("ptt.callKey", \.ptt.callKey, "Key that starts a realtime call, or hangs up the one in progress (talk.calls), e.g. \"KEY_PHONE\"."),
        ]
        rows += NodeEvents.catalog.map { event in
            ConfigSetting("events.\(event.name)", .optionalString, event.fields, defaultValue: { c in c.events.commands[event.name].map(JSONValue.string) ?? .null }) { c, v, _ in
                if let cmd = v.stringValue, !cmd.isEmpty { c.events.commands[event.name] = cmd }
            }
        }
        rows += [
            .sound("sounds.endOfListening", \.sounds[cue: .endOfListening], "a capture ended and is being sent"),
            .sound("sounds.error", \.sounds[cue: .error], "a turn could not start or be queued"),
            .sound("sounds.mute", \.sounds[cue: .mute], "clawvoice mute"),
            .sound("sounds.unmute", \.sounds[cue: .unmute], "clawvoice unmute"),
            .sound("sounds.callStart", \.sounds[cue: .callStart], "a realtime call connected"),
            .sound("sounds.callEnd", \.sounds[cue: .callEnd], "a realtime call ended"),

            .string("speech.voice", \.speech.voice, "espeak-ng voice for on-device speech (`espeak-ng --voices` lists them)."),
            .int("speech.rateWpm", \.speech.rateWpm, 80...450, "Words per minute."),
            .int("speech.pitch", \.speech.pitch, 0...99, "Pitch of the voice."),

            .bool("wake.enabled", \.wake.enabled,
                  "Listen for the gateway's wake words (its list: voicewake.get, default openclaw, claude, computer). A word without a trained model is named in `clawvoice status` with the command that trains it: make wake-model TRIGGER=\"…\"."),
            .number("wake.sensitivity", \.wake.sensitivity, 0...1, "0.5 uses each model's trained threshold; higher wakes more easily."),
            .sound("wake.chime", \.wake.chime,
                   "What plays when a wake word is heard: true (a short generated two-tone chime), false (nothing), or a sound file of at most 3 s (WAV of any depth, FLAC, MP3, Ogg Opus…: \"~/chime.wav\"; a relative path is read beside this file). The microphone never wakes on it."),
            .optionalString("wake.modelsDirectory", \.wake.modelsDirectory,
                            "Where models live; null: CLAWVOICE_MODELS_DIR, then models/ beside the build, then /usr/local/share/clawvoice/models."),

            .optionalString("discovery.wideAreaDomain", \.discovery.wideAreaDomain,
                            "`clawvoice discover` and `clawvoice pair` without a URL browse _openclaw-gw._tcp through avahi-daemon on local. (mDNS) and, when set, on this wide-area (unicast DNS-SD) domain, e.g. \"openclaw.internal.\" served by the gateway's `openclaw dns setup`. null: local. only. Env: CLAWVOICE_WIDE_AREA_DOMAIN.",
                            accept: { d in
                                // "local" is browsed anyway; anything else must look like a DNS name.
                                d.split(separator: ".").allSatisfy { !$0.isEmpty && $0.count <= 63 && !$0.contains(" ") } && !d.isEmpty ? d : nil
                            }, refusal: "must be a DNS domain such as \"openclaw.internal.\""),
            .int("discovery.timeoutMs", \.discovery.timeoutMs, 200...60_000,
                 "How long a listing waits for answers, in ms; it ends sooner once every domain answered."),

            .choice("log.level", \.log.level, [LogLevel.debug, .info, .warning, .error],
                    "debug, info, warning or error. Lines go to stderr (journald under systemd)."),

            .optionalString("control.socket", \.control.socket,
                            "The daemon's control socket, used by `clawvoice status`. Default: $XDG_RUNTIME_DIR/clawvoice/control.sock, or <stateDir>/control.sock when XDG_RUNTIME_DIR is unset or CLAWVOICE_STATE_DIR is set."),

            .optionalString("stateDir", \.stateDir,
                            "Identity, gateways and tokens (SQLite, mode 0600 in a 0700 directory). Default: $XDG_STATE_HOME/clawvoice (~/.local/state/clawvoice). Env: CLAWVOICE_STATE_DIR."),
        ]
        return rows
    }

    /// The keys each section accepts and what they must be (derived from `settings`).
    static var schema: [String: [String: String]] {
        var out: [String: [String: String]] = [:]
        for s in settings where !s.section.isEmpty { out[s.section, default: [:]][s.key] = s.kind.schema }
        for r in reservedSections { out[r] = ["*": "any"] }
        return out
    }
}
