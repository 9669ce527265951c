// `clawvoice doctor`, the decisions: every check is a pure function of the facts DoctorProbe
// gathered (sound server, devices, microphone level, tone, espeak-ng, wake models, gateway,
// pairing, clock, daemon, disk), so each verdict and its fix is tested without any I/O.

import ClawvoiceCore
import Daemon
import Foundation
import GatewayCrypto
public import GatewayProtocol
import NodeRuntime

/// The microphone over a few seconds.
public struct MicLevel: Sendable, Equatable {
    public var seconds: Double
    /// dBFS of the loudest sample and of the whole recording; -infinity for digital silence.
    public var peakDbfs: Double
    public var rmsDbfs: Double
    /// Share of samples at full scale (within 0.01 dB of ±32767).
    public var clippedFraction: Double

    public init(seconds: Double, peakDbfs: Double, rmsDbfs: Double, clippedFraction: Double) {
        self.seconds = seconds
        self.peakDbfs = peakDbfs
        self.rmsDbfs = rmsDbfs
        self.clippedFraction = clippedFraction
    }

    public static func measure(_ samples: [Int16], sampleRateHz: Int) -> MicLevel {
        var peak = 0, clipped = 0
        var sum = 0.0
        for s in samples {
            let a = s == Int16.min ? 32768 : Int(abs(s))
            if a > peak { peak = a }
            if a >= 32_700 { clipped += 1 }  // within 0.01 dB of full scale: dither and rounding keep a clipped top off 32767
            sum += Double(s) * Double(s)
        }
        let n = Double(max(samples.count, 1))
        func db(_ x: Double) -> Double { x <= 0 ? -.infinity : 20 * log10(x / 32768) }
        return MicLevel(seconds: Double(samples.count) / Double(max(sampleRateHz, 1)), peakDbfs: db(Double(peak)),
                        rmsDbfs: db((sum / n).squareRoot()), clippedFraction: Double(clipped) / n)
    }

    /// Below this peak the microphone is taken as silent (muted, unplugged, volume at 0).
    public static let silentPeakDbfs = -60.0
    /// More than this share of full-scale samples is clipping.
    public static let clippingFraction = 0.001
}

/// What `doctor` found, before any verdict.
public struct DoctorFacts: Sendable, Equatable {
    public enum Probe: Sendable, Equatable {
        /// The gateway answered with connect.challenge; its clock minus ours (at the midpoint of
        /// the exchange), and how long the exchange took: the skew is known only to half of it.
        case reachable(skewMs: Int64, roundTripMs: Int64 = 0)
        case pinMismatch(expected: String, actual: String)
        case failed(String)
    }
    public struct Role: Sendable, Equatable {
        public var hasToken = false
        /// The daemon's view of the session (connected, pairing, waiting …) when it runs.
        public var state: String?
        public var detail: String?
        public var nextStep: String?
        /// The problem code behind the state (OPERATOR_ACCESS_DENIED, …).
        public var code: String?
        public var protocolVersion: Int?
        /// What the connected session cannot do on this gateway (SessionLimits).
        public var limits: [String] = []
        public init(hasToken: Bool = false, state: String? = nil, detail: String? = nil, nextStep: String? = nil,
                    code: String? = nil, protocolVersion: Int? = nil, limits: [String] = []) {
            self.hasToken = hasToken; self.state = state; self.detail = detail; self.nextStep = nextStep
            self.code = code; self.protocolVersion = protocolVersion; self.limits = limits
        }
    }

    public var soundServer: String = "default"
    /// nil: reachable.
    public var soundError: String?
    public var sources: [String] = []
    public var sinks: [String] = []
    public var defaultSource: String?
    public var defaultSink: String?
    public var configuredSource: String?
    public var configuredSink: String?
    public var mic: MicLevel?
    public var micError: String?
    /// nil: `--play` not given; "" played; else why not.
    public var tone: String?
    public var voice: String = "en-us"
    public var voiceAvailable = false
    public var espeakError: String?
    public var wakeEnabled = true
    /// The triggers to check and where they came from ("the gateway" via the daemon, or "defaults").
    public var triggers: [String] = []
    public var triggersFrom = "defaults"
    public var modelsDirectory = ""
    /// Trigger → the command that trains it, for each trigger without a model.
    public var missingModels: [String: String] = [:]
    /// Triggers with household takes (`wake enroll`).
    public var enrolled: [String] = []
    /// nil: no gateway paired.
    public var gatewayName: String?
    public var gatewayURL: String?
    public var tlsPin: String?
    public var allowInsecure = false
    public var probe: Probe?
    public var roles: [String: Role] = [:]
    public var controlSocket = ""
    public var daemonPid: Int?
    public var daemonError: String?
    /// The daemon runs with talk.calls on.
    public var callsEnabled = false
    /// Why the gateway cannot hold a Gateway-controlled call (seen by the daemon's last call).
    public var callUpgradeRequired: String?
    public var stateDir = ""
    public var freeBytes: Int64?

    public init() {}
}

public struct DoctorCheck: Sendable, Equatable {
    public var id: String
    public var ok: Bool
    /// What was found, one line.
    public var line: String
    /// The exact thing to do, for a failed check.
    public var fix: String?

    public init(_ id: String, _ ok: Bool, _ line: String, fix: String? = nil) {
        self.id = id; self.ok = ok; self.line = line; self.fix = ok ? nil : fix
    }

    public var text: String { (ok ? "✓ " : "✗ ") + line + (fix.map { " → \($0)" } ?? "") }
    public var json: JSONValue {
        ["id": .string(id), "ok": .bool(ok), "line": .string(line), "fix": fix.map { .string($0) } ?? .null]
    }
}

public enum Doctor {
    /// The clock difference the gateway allows on device signatures (DEVICE_SIGNATURE_SKEW_MS).
    public static let maxSkewMs: Int64 = 120_000
    /// Room the outbox wants: voice notes and queued turns.
    public static let minFreeBytes: Int64 = 100 << 20

    public static func checks(_ f: DoctorFacts) -> [DoctorCheck] {
        var out: [DoctorCheck] = []
        // Sound.
        if let e = f.soundError {
            out.append(DoctorCheck("sound-server", false, "sound server not reachable at \(f.soundServer): \(e)",
                                   fix: "start it: systemctl --user start pipewire-pulse (or pulseaudio --start); set PULSE_SERVER if it runs elsewhere"))
        } else {
            out.append(DoctorCheck("sound-server", true, "sound server reachable at \(f.soundServer)"))
            out.append(device("source", configured: f.configuredSource, fallback: f.defaultSource,
                              available: f.sources, key: "audio.source"))
            out.append(device("sink", configured: f.configuredSink, fallback: f.defaultSink, available: f.sinks, key: "audio.sink"))
            let src = f.configuredSource ?? "@DEFAULT_SOURCE@"
            if let e = f.micError {
                out.append(DoctorCheck("mic-level", false, "microphone could not be recorded: \(e)", fix: "check audio.source (clawvoice audio devices)"))
            } else if let m = f.mic {
                let level = "peak \(dbText(m.peakDbfs)), rms \(dbText(m.rmsDbfs)) over \(String(format: "%.0f", m.seconds)) s"
                if m.peakDbfs < MicLevel.silentPeakDbfs {
                    out.append(DoctorCheck("mic-level", false, "microphone is silent (\(level))",
                                           fix: "unmute it and raise its level: pactl set-source-mute \(src) 0; pactl set-source-volume \(src) 100%"))
                } else if m.clippedFraction > MicLevel.clippingFraction {
                    out.append(DoctorCheck("mic-level", false,
                                           "microphone is clipping (\(String(format: "%.1f", m.clippedFraction * 100))% of samples at full scale, \(level))",
                                           fix: "lower its level: pactl set-source-volume \(src) 60%"))
                } else {
                    out.append(DoctorCheck("mic-level", true, "microphone hears sound (\(level))"))
                }
            }
            if let t = f.tone {
                out.append(t.isEmpty ? DoctorCheck("speaker-tone", true, "played a 1 s tone on \(f.configuredSink ?? f.defaultSink ?? "the default sink") (did you hear it?)")
                                     : DoctorCheck("speaker-tone", false, "the tone did not play: \(t)", fix: "check audio.sink (clawvoice audio devices)"))
            }
        }
        // Speech.
        if let e = f.espeakError {
            out.append(DoctorCheck("espeak-voice", false, "espeak-ng cannot speak: \(e)", fix: "sudo apt-get install espeak-ng-data"))
        } else {
            out.append(DoctorCheck("espeak-voice", f.voiceAvailable, "espeak-ng voice \(f.voice)\(f.voiceAvailable ? "" : " is not installed")",
                                   fix: "set speech.voice to one of `espeak-ng --voices` (e.g. en-us)"))
        }
        // Wake words.
        if !f.wakeEnabled {
            out.append(DoctorCheck("wake-models", true, "wake word off (wake.enabled is false)"))
        } else if f.missingModels.isEmpty {
            out.append(DoctorCheck("wake-models", true, "a wake model for every trigger (\(f.triggers.joined(separator: ", ")); from \(f.triggersFrom)) in \(f.modelsDirectory)"))
        } else {
            for t in f.triggers where f.missingModels[t] != nil {
                out.append(DoctorCheck("wake-models", false, "no wake model for \"\(t)\" (a trigger from \(f.triggersFrom)) in \(f.modelsDirectory)",
                                       fix: f.missingModels[t]! + ", or set wake.modelsDirectory"))
            }
        }
        if f.wakeEnabled {
            out.append(DoctorCheck("wake-enrolled", true, f.enrolled.isEmpty
                ? "no trigger enrolled (optional: `clawvoice wake enroll TRIGGER` tunes one to your household's voices)"
                : "enrolled (tuned to this household's takes): \(f.enrolled.joined(separator: ", ")); `clawvoice wake status` says more"))
        }
        // Gateway.
        if let name = f.gatewayName, let url = f.gatewayURL {
            let secure = url.hasPrefix("wss://")
            switch f.probe {
            case .reachable(let skew, let roundTrip)?:
                out.append(DoctorCheck("gateway", true, "gateway \(name) answers at \(url)"))
                if secure {
                    out.append(DoctorCheck("tls", true, f.tlsPin.map { "TLS certificate matches the pin \($0.prefix(16))…" } ?? "TLS certificate verified by the system's CAs"))
                } else {
                    let loopback = isLoopback(url)
                    out.append(DoctorCheck("tls", loopback, loopback ? "plain ws:// on loopback (no TLS needed)" : "plain ws:// to a remote host: traffic and tokens are not encrypted",
                                           fix: "use the gateway's wss:// URL: clawvoice pair --url wss://… --tls-fingerprint SHA256"))
                }
                // A slow exchange (a busy Pi, a stalled process) blurs the reading by half its
                // time: within that the clocks may well agree, and only skew beyond it fails.
                let s = Double(skew) / 1000, blur = roundTrip / 2
                let line = abs(skew) <= max(1000, blur)
                    ? "clock matches the gateway's" + (blur > 1000 ? String(format: " (to ±%.1f s: the exchange took %.1f s)", Double(blur) / 1000, Double(roundTrip) / 1000) : "")
                    : String(format: "clock is %.1f s %@ the gateway's", abs(s), skew > 0 ? "behind" : "ahead of")
                out.append(DoctorCheck("clock", abs(skew) - blur <= maxSkewMs, line, fix: "sync the clock: sudo timedatectl set-ntp true"))
            case .pinMismatch(let expected, let actual)?:
                out.append(DoctorCheck("tls", false, "gateway \(name)'s TLS certificate \(actual.prefix(16))… does not match the pin \(expected.prefix(16))…",
                                       fix: "if the gateway's certificate was replaced on purpose: clawvoice pair --url \(url) --tls-fingerprint \(actual)"))
            case .failed(let e)?:
                out.append(DoctorCheck("gateway", false, "gateway \(name) at \(url) does not answer: \(e)",
                                       fix: "check that the gateway runs (openclaw gateway status on its host) and the URL (clawvoice gateways)"))
            case nil:
                break
            }
            for role in ["node", "operator"] {
                let r = f.roles[role] ?? DoctorFacts.Role()
                if r.code == "OPERATOR_ACCESS_DENIED" {
                    // D9: not a pairing or credential failure; the gateway's policy decides.
                    out.append(DoctorCheck("pairing-\(role)", false,
                                           "\(role): signed in, but the gateway's access policy grants this device nothing yet (OPERATOR_ACCESS_DENIED)",
                                           fix: "grant this device operator access in the gateway's access policy (e.g. the role bound to its accessPolicyPlugin); clawvoice keeps retrying and picks it up by itself"))
                } else if r.state == "connected" {
                    out.append(DoctorCheck("pairing-\(role)", true, "\(role): paired and connected"
                                           + (r.protocolVersion.map { " (protocol \($0))" } ?? "")))
                    if !r.limits.isEmpty {
                        let fix = r.protocolVersion == 3 ? "upgrade the gateway to one that speaks protocol 4 to lift these"
                            : "fix the gateway's Talk config (talk.agentId, session.mainKey)"
                        out.append(DoctorCheck("protocol-\(role)", false, "\(role) works with limits: " + r.limits.joined(separator: "; "), fix: fix))
                    }
                } else if let st = r.state, st == "pairing" || st == "waiting" || !(r.nextStep ?? "").isEmpty {
                    out.append(DoctorCheck("pairing-\(role)", false, "\(role): \(st)\(r.detail.map { ": \($0)" } ?? "")",
                                           fix: r.nextStep ?? "approve it on the gateway host: openclaw devices list"))
                } else if r.hasToken {
                    out.append(DoctorCheck("pairing-\(role)", true, "\(role): paired (device token stored)\(r.state.map { ", daemon says \($0)" } ?? "")"))
                } else {
                    out.append(DoctorCheck("pairing-\(role)", false, "\(role): not paired with \(name)",
                                           fix: "clawvoice pair <setup-code> (or clawvoice pair --url \(url) --token-file FILE)"))
                }
            }
        } else {
            out.append(DoctorCheck("gateway", false, "no gateway paired", fix: "clawvoice pair <setup-code> (from `openclaw qr --setup-code-only`)"))
        }
        // Daemon.
        if let pid = f.daemonPid {
            out.append(DoctorCheck("daemon", true, "daemon running (pid \(pid)), control socket \(f.controlSocket)"))
        } else {
            out.append(DoctorCheck("daemon", false, "daemon not answering on \(f.controlSocket)\(f.daemonError.map { ": \($0)" } ?? "")",
                                   fix: "clawvoice service install (or systemctl --user start clawvoice, or clawvoice run)"))
        }
        // Realtime calls: the create result must be gateway-control-v1 (D1), else the gateway needs an upgrade.
        if let why = f.callUpgradeRequired {
            out.append(DoctorCheck("calls", false, "calls: gateway upgrade required (\(why))",
                                   fix: "upgrade the OpenClaw gateway to one that answers talk.client.create with gateway-control-v1, with a realtime provider that supports gateway control (OpenAI: a Platform API key)"))
        } else if f.callsEnabled {
            out.append(DoctorCheck("calls", true, "calls: on (talk.calls); no gateway upgrade needed so far"))
        }
        // Disk.
        if let free = f.freeBytes {
            out.append(DoctorCheck("disk", free >= minFreeBytes, "\(megabytes(free)) free for the outbox in \(f.stateDir)",
                                   fix: "free at least \(megabytes(minFreeBytes)) on that file system (df -h \(f.stateDir)); clawvoice outbox list shows what waits"))
        } else {
            out.append(DoctorCheck("disk", false, "cannot tell the free space in \(f.stateDir)", fix: "check that \(f.stateDir) exists and is writable"))
        }
        return out
    }

    static func device(_ kind: String, configured: String?, fallback: String?, available: [String], key: String) -> DoctorCheck {
        let list = available.prefix(6).joined(separator: ", ")
        if let name = configured {
            return DoctorCheck(kind, available.contains(name), "\(kind) \(name) (\(key))\(available.contains(name) ? " exists" : " does not exist")",
                               fix: "set \(key) to one of: \(list) (clawvoice audio devices)")
        }
        if let d = fallback, available.contains(d) { return DoctorCheck(kind, true, "\(kind): the default, \(d)") }
        return DoctorCheck(kind, false, "no default \(kind) on the sound server", fix: "connect a device, or set \(key) (clawvoice audio devices)")
    }

    static func dbText(_ db: Double) -> String { db.isFinite ? String(format: "%.0f dBFS", db) : "-inf dBFS" }
    static func megabytes(_ b: Int64) -> String { "\(b >> 20) MB" }

    static func isLoopback(_ url: String) -> Bool {
        guard let host = URLComponents(string: url)?.host else { return false }
        return host == "localhost" || host.hasPrefix("127.") || host == "::1" || host == "[::1]"
    }

    public static func text(_ checks: [DoctorCheck]) -> String {
        let failed = checks.filter { !$0.ok }.count
        return checks.map(\.text).joined(separator: "\n") + "\n"
            + (failed == 0 ? "all \(checks.count) checks pass" : "\(failed) of \(checks.count) checks failed")
    }

    public static func json(_ checks: [DoctorCheck]) -> JSONValue {
        ["ok": .bool(checks.allSatisfy(\.ok)), "checks": .array(checks.map(\.json))]
    }
}
