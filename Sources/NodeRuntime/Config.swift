// NodeRuntime owns what the daemon (module Daemon) and the command line (module CLI) share: the
// config file and its environment overrides, the settings table, the state and socket paths, the
// control protocol and its client, the events' names, and which gateway and session a run uses.
// (OutboxBench and LoopbackOperator, bench rigs, wait here for the testing module.)

public import ClawvoiceCore
import Foundation
import GatewayClient
import GatewayCrypto
import GatewayProtocol
public import Store
public import Talk

/// The settings file, decoded. Each field's initial value is its key's default; the settings table
/// (ConfigSettings.swift) says what each key accepts, and the example file and docs are written from both.
public struct ClawConfig: Sendable, Equatable {
    public struct Node: Sendable, Equatable {
        /// The name shown in `openclaw devices list` and `node.list`.
        public var displayName: String = ClawConfig.defaultDisplayName()
        public var modelIdentifier: String? = nil
    }
    public struct Gateway: Sendable, Equatable {
        /// A gateway to use instead of the paired ones (`ws://host:18789` or `wss://…`).
        public var url: String? = nil
        public var token: String? = nil
        public var password: String? = nil
        /// SHA-256 of the gateway's TLS leaf certificate (64 hex, colons and `sha256:` allowed).
        public var tlsFingerprint: String? = nil
        /// Allow plain ws:// to a host that is not loopback (traffic and tokens unencrypted).
        public var allowInsecure: Bool = false
        /// Operator client id: `cli` (every gateway) or `openclaw-linux` (newest gateways only).
        public var operatorClient: String = "cli"
        /// Keep the shared token/password in the state database after both roles have signed in
        /// with their device tokens (default: they are removed, so revoking the device locks it out).
        public var keepSharedSecret: Bool = false
    }
    public struct Log: Sendable, Equatable {
        public var level: LogLevel = .info
    }
    public struct Control: Sendable, Equatable {
        /// Path of the control socket; default `$XDG_RUNTIME_DIR/clawvoice/control.sock`.
        public var socket: String? = nil
    }

    public struct Audio: Sendable, Equatable {
        /// PulseAudio source to capture from (`clawvoice audio devices`); nil: the default source.
        public var source: String? = nil
        /// PulseAudio sink to play to; nil: the default sink.
        public var sink: String? = nil
        /// Audio from just before a capture starts that it keeps (0–2000 ms).
        public var preRollMs: Int = 300
        /// Treat the output as a headset (nil: ask PulseAudio about the sink's port).
        public var headset: Bool? = nil
        /// Echo cancellation against our own playback (nil: on for loudspeakers, off for headsets).
        public var echoCancel: Bool? = nil
        /// How late the speaker's sound reaches the microphone, for the echo canceller (0–500 ms).
        public var echoDelayMs: Int = 60
        /// What ends an utterance: "model" (the voice detector, models/voice.json) or "level".
        public var voiceDetector: VoiceDetectorChoice = .model
    }
    public struct Talk: Sendable, Equatable {
        /// Silence after speech that ends `talk.ptt.once` (the gateway's talk.config wins when it names one).
        public var silenceTimeoutMs: Int = 900
        /// End push-to-talk and wake turns when the end-of-turn detector (models/turn.json) hears
        /// the turn end, the silence window staying the ceiling.
        public var endOfTurn: Bool = TalkConfig.endOfTurnDefault
        /// `once` captures end here at the latest.
        public var onceMaxMs: Int = 12_000
        /// Hard cap for any capture.
        public var captureMaxMs: Int = 60_000
        /// Chat session for turns; nil: the gateway's main session.
        public var sessionKey: String? = nil
        public var opusBitrate: Int = 20_000
        public var opusComplexity: Int = 5
        /// Format asked of talk.speak (`pcm_24000`, `pcm_16000`, `mp3_44100_128`, `opus`…).
        public var outputFormat: String? = "pcm_24000"
        /// Speak the assistant's replies.
        public var speakReplies: Bool = true
        /// Keep recordings (Ogg Opus voice notes) of recent captures in <stateDir>/voice-notes:
        /// off by default; when on, at most `voiceNotesKeep` of them, none older than
        /// `voiceNotesMaxAgeDays` (docs/privacy.md).
        public var voiceNotes: Bool = false
        public var voiceNotesKeep: Int = 20
        public var voiceNotesMaxAgeDays: Int = 7
        /// Stop speaking when the user talks over the assistant (headsets only; the gateway's talk.config may say otherwise).
        public var interruptOnSpeech: Bool = true
        /// After a reply, listen this long for a next turn without the wake word (0: off).
        public var followUpMs: Int = 0
        /// "stop" said while the node speaks stops it (models/stop.json; headsets and
        /// echo-cancelled loudspeakers); false turns the stop word off.
        public var stopWord: Bool = true
        /// 0…1; 0.5 uses the stop head's trained threshold, higher stops more easily.
        public var stopWordSensitivity: Double = 0.7
        /// Speak `system.notify` notifications; false answers them NOTIFICATIONS_DISABLED.
        public var speakNotifications: Bool = true
        /// Realtime calls (issue 23): declare talk.start/talk.stop and take `clawvoice call`.
        /// Off by default: new declared commands ask the gateway for approval again.
        public var calls: Bool = false
        /// The gateway's HTTP origin for the call's SDP offer (nil: the gateway URL's, ws→http);
        /// the loopback gateway serves its offer route on a port of its own.
        public var callsHttpOrigin: String? = nil
        /// Gather the call's ICE candidates on this one local address (nil: every host address);
        /// the loopback tests use 127.0.0.1, where their WebRTC peer listens.
        public var callsIceAddress: String? = nil
        /// A call with no speech either way for this long ends (the room node's call idle timer).
        public var callIdleSeconds: Int = 120
        /// A wake phrase (one of the node's triggers) that starts a call instead of a turn
        /// (the talk.realtime.startOn); nil: every trigger starts a turn.
        public var callWakeWord: String? = nil
    }
    public struct PTT: Sendable, Equatable {
        /// Input device for the push-to-talk key: a /dev/input/by-id/… path, "auto", or nil (off).
        public var device: String? = nil
        /// Key name, e.g. KEY_PLAYPAUSE, KEY_PHONE, KEY_F13.
        public var key: String = "KEY_PLAYPAUSE"
        /// "hold" (press starts, release stops) or "toggle".
        public var mode: String = "hold"
        /// Keys for the other controls, on the same device (`auto` when ptt.device is unset):
        /// stop speaking, mute/unmute (each press toggles), volume up and down (5 points a press).
        public var stopKey: String? = nil
        public var muteKey: String? = nil
        public var volumeUpKey: String? = nil
        public var volumeDownKey: String? = nil
        /// Starts a realtime call, or hangs up the one that is on (talk.calls must be on).
        public var callKey: String? = nil
    }
    /// A shell command per event (`clawvoice events` names them), run with its fields in the environment.
    public struct Events: Sendable, Equatable {
        public var commands: [String: String] = [:]
    }
    /// Feedback sounds: each true (generated), false (off) or a sound file (WAV, FLAC, MP3, Ogg Opus…) of at most 3 s.
    public struct Sounds: Sendable, Equatable {
        public var cues: [TalkCue: WakeChime] = [.endOfListening: .generated, .error: .generated, .mute: .generated, .unmute: .generated,
                                                 .callStart: .generated, .callEnd: .generated]
    }
    public struct Speech: Sendable, Equatable {
        /// espeak-ng voice for on-device speech (`espeak-ng --voices` lists them).
        public var voice: String = "en-us"
        public var rateWpm: Int = 175
        public var pitch: Int = 50
    }

    public struct Discovery: Sendable, Equatable {
        /// A wide-area (unicast DNS-SD) domain browsed besides local., e.g. "openclaw.internal.".
        /// Env: CLAWVOICE_WIDE_AREA_DOMAIN.
        public var wideAreaDomain: String? = nil
        /// How long `discover` and `pair` without a URL wait for answers.
        public var timeoutMs: Int = 3000
    }
    public struct Wake: Sendable, Equatable {
        /// Listen for the gateway's wake words (models under `models/`).
        public var enabled: Bool = true
        /// 0…1; 0.5 uses each model's trained threshold, higher wakes more easily.
        public var sensitivity: Double = 0.5
        /// What plays when a wake word is heard: true (a generated two-tone chime), false, or a
        /// sound file (WAV, FLAC, MP3, Ogg Opus…) of at most 3 s.
        public var chime: WakeChime = .generated
        /// Where trained models live; nil: CLAWVOICE_MODELS_DIR, then models/ beside the build.
        public var modelsDirectory: String? = nil
    }

    public var node = Node()
    public var gateway = Gateway()
    public var wake = Wake()
    public var discovery = Discovery()
    public var audio = Audio()
    public var talk = Talk()
    public var ptt = PTT()
    public var sounds = Sounds()
    public var events = Events()
    public var speech = Speech()
    public var log = Log()
    public var control = Control()
    /// Where identity, tokens and queues live; default `$XDG_STATE_HOME/clawvoice`.
    public var stateDir: String? = nil

    public init() {}

    static func defaultDisplayName() -> String {
        let host = ProcessInfo.processInfo.hostName
        return host.isEmpty ? "clawvoice" : "clawvoice on \(host)"
    }
}

/// A config that cannot be used, as one line naming the file and the place.
public struct ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    /// Newlines (a key can contain an escaped one) are shown as `\n` so the error stays one line.
    public init(_ message: String) {
        self.message = message.replacingOccurrences(of: "\r", with: "\\r").replacingOccurrences(of: "\n", with: "\\n")
    }
    public var description: String { message }
}

extension ClawConfig {
    /// Parses a config file's text. `file` is only used in messages. What each key accepts and
    /// where it lands is the settings table's (ConfigSettings.swift).
    public static func parse(_ text: String, file: String) throws(ConfigError) -> ClawConfig {
        let root: JSONValue
        do { root = try JSON5.parse(text) } catch {
            throw ConfigError("\(file): \(error)")
        }
        guard let top = root.objectValue else { throw ConfigError("\(file): the config must be an object { … }") }
        let table = settings
        let topLevel = Dictionary(uniqueKeysWithValues: table.filter { $0.section.isEmpty }.map { ($0.key, $0) })
        var bySection: [String: [String: ConfigSetting]] = [:]
        for s in table where !s.section.isEmpty { bySection[s.section, default: [:]][s.key] = s }
        var c = ClawConfig()
        for (key, value) in top.sorted(by: { $0.key < $1.key }) {
            if let setting = topLevel[key] {
                if value == .null { continue }
                guard value.stringValue != nil else { throw ConfigError("\(file): \(key) must be a string") }
                try setting.apply(&c, value, file)
                continue
            }
            let reserved = reservedSections.contains(key)
            guard let section = bySection[key] ?? (reserved ? [:] : nil) else {
                let known = Array(bySection.keys) + reservedSections + Array(topLevel.keys)
                throw ConfigError("\(file): unknown key '\(JSON5.shown(key))'\(suggest(key, known))")
            }
            guard let fields = value.objectValue else { throw ConfigError("\(file): '\(key)' must be an object") }
            if reserved { continue }
            // Every value is checked before any is applied, as a whole section is one decision.
            let sorted = fields.sorted(by: { $0.key < $1.key })
            for (field, v) in sorted {
                guard let setting = section[field] else {
                    throw ConfigError("\(file): unknown key '\(JSON5.shown(key)).\(JSON5.shown(field))'\(suggest(field, Array(section.keys)))")
                }
                try setting.check(v, file: file)
            }
            for (field, v) in sorted { try section[field]?.apply(&c, v, file) }
        }
        return c
    }

    /// `~` expanded; relative to the config file, like a user would write it next to it.
    static func resolvePath(_ path: String, relativeTo file: String) -> String {
        let expanded = (path as NSString).expandingTildeInPath
        return expanded.hasPrefix("/") ? expanded : ((file as NSString).deletingLastPathComponent as NSString).appendingPathComponent(expanded)
    }

    static func suggest(_ key: String, _ known: [String]) -> String {
        let lower = key.lowercased()
        let best = known.filter { $0 != "*" }.min { distance($0.lowercased(), lower) < distance($1.lowercased(), lower) }
        guard let best, distance(best.lowercased(), lower) <= 3 else { return "" }
        return " (did you mean '\(best)'?)"
    }

    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        var row = Array(0...b.count)
        for i in 1...max(a.count, 1) where !a.isEmpty {
            var prev = row[0]
            row[0] = i
            for j in 1...max(b.count, 1) where !b.isEmpty {
                let cur = row[j]
                row[j] = min(row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] == b[j - 1] ? 0 : 1))
                prev = cur
            }
        }
        return row[b.count]
    }
}

/// Where things live, from flags, the environment and the config, in that order.
public struct RuntimePaths: Sendable, Equatable {
    public var configFile: String
    public var configExplicit: Bool
    public var stateDir: String
    public var controlSocket: String

    public init(configFile: String, configExplicit: Bool, stateDir: String, controlSocket: String) {
        self.configFile = configFile
        self.configExplicit = configExplicit
        self.stateDir = stateDir
        self.controlSocket = controlSocket
    }

    public static func resolve(configFlag: String?, environment env: [String: String]) -> (config: String, explicit: Bool) {
        if let f = configFlag { return (f, true) }
        if let f = env["CLAWVOICE_CONFIG"], !f.isEmpty { return (f, true) }
        let base = env["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? (home(env) + "/.config")
        return (base + "/clawvoice/config.json5", false)
    }

    static func home(_ env: [String: String]) -> String {
        env["HOME"] ?? NSHomeDirectory()
    }

    /// Loads the config (defaults when the default file is absent) and applies environment overrides.
    public static func load(configFlag: String?, environment env: [String: String]) throws(ConfigError) -> (ClawConfig, RuntimePaths) {
        let (file, explicit) = resolve(configFlag: configFlag, environment: env)
        var config = ClawConfig()
        if FileManager.default.fileExists(atPath: file) {
            guard let data = FileManager.default.contents(atPath: file) else {
                throw ConfigError("\(file): cannot be read (check its permissions)")
            }
            guard let text = String(data: data, encoding: .utf8) else { throw ConfigError("\(file): is not UTF-8 text") }
            config = try ClawConfig.parse(text, file: file)
        } else if explicit {
            throw ConfigError("\(file): no such file")
        }
        if let url = env["CLAWVOICE_GATEWAY_URL"], !url.isEmpty { config.gateway.url = url }
        if let d = env["CLAWVOICE_WIDE_AREA_DOMAIN"], !d.isEmpty { config.discovery.wideAreaDomain = d }
        if let token = env["CLAWVOICE_GATEWAY_TOKEN"], !token.isEmpty { config.gateway.token = token }
        if let password = env["CLAWVOICE_GATEWAY_PASSWORD"], !password.isEmpty { config.gateway.password = password }
        let stateFromEnv = env["CLAWVOICE_STATE_DIR"].flatMap { $0.isEmpty ? nil : $0 }
        let state = stateFromEnv ?? config.stateDir
            ?? ((env["XDG_STATE_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? (home(env) + "/.local/state")) + "/clawvoice")
        let socket: String
        if let s = config.control.socket { socket = s }
        else if stateFromEnv == nil, let run = env["XDG_RUNTIME_DIR"], !run.isEmpty { socket = run + "/clawvoice/control.sock" }
        else { socket = state + "/control.sock" }
        return (config, RuntimePaths(configFile: file, configExplicit: explicit, stateDir: state, controlSocket: socket))
    }
}


/// Opens the store, making sure the state directory exists with the right modes.
/// Where recordings of captures go when talk.voiceNotes is on (`clawvoice forget` empties it).
public func voiceNotesDirectory(stateDir: String) -> String { stateDir + "/voice-notes" }

public func openStore(_ paths: RuntimePaths) throws -> ClawStore {
    try ClawStore(directory: paths.stateDir)
}
