// NodeRuntime owns what runs the node on a machine: the config file and its environment
// overrides, the state and socket paths, the daemon that keeps both gateway sessions up,
// the control socket the CLI talks to, pairing from the command line, and the demo.
// It wires the other modules together; protocol, transport and storage details stay in them.

import Foundation
import GatewayClient
import GatewayProtocol

/// The settings file, decoded. Every key has a default; `config/clawvoice.json5` documents them all.
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
    }
    public struct Log: Sendable, Equatable {
        public var level: LogLevel = .info
    }
    public struct Control: Sendable, Equatable {
        /// Path of the control socket; default `$XDG_RUNTIME_DIR/clawvoice/control.sock`.
        public var socket: String? = nil
    }

    public var node = Node()
    public var gateway = Gateway()
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
    /// The keys each section accepts and what they must be, for clear errors on typos.
    static let schema: [String: [String: String]] = [
        "node": ["displayName": "string", "modelIdentifier": "string?"],
        "gateway": ["url": "string?", "token": "string?", "password": "string?", "tlsFingerprint": "string?",
                    "allowInsecure": "bool", "operatorClient": "string"],
        "log": ["level": "string"],
        "control": ["socket": "string?"],
        // Later parts of clawvoice read these sections; they are accepted here so one file serves all versions.
        "audio": ["*": "any"], "talk": ["*": "any"], "ptt": ["*": "any"], "wake": ["*": "any"], "outbox": ["*": "any"],
    ]

    /// Parses a config file's text. `file` is only used in messages.
    public static func parse(_ text: String, file: String) throws(ConfigError) -> ClawConfig {
        let root: JSONValue
        do { root = try JSON5.parse(text) } catch {
            throw ConfigError("\(file): \(error)")
        }
        guard let top = root.objectValue else { throw ConfigError("\(file): the config must be an object { … }") }
        var c = ClawConfig()
        for (key, value) in top.sorted(by: { $0.key < $1.key }) {
            if key == "stateDir" {
                if value == .null { continue }
                guard let s = value.stringValue else { throw ConfigError("\(file): stateDir must be a string") }
                c.stateDir = s
                continue
            }
            guard let section = schema[key] else {
                throw ConfigError("\(file): unknown key '\(key)'\(suggest(key, Array(schema.keys) + ["stateDir"]))")
            }
            guard let fields = value.objectValue else { throw ConfigError("\(file): '\(key)' must be an object") }
            if section["*"] != nil { continue }
            for (field, v) in fields.sorted(by: { $0.key < $1.key }) {
                guard let type = section[field] else {
                    throw ConfigError("\(file): unknown key '\(key).\(field)'\(suggest(field, Array(section.keys)))")
                }
                let path = "\(key).\(field)"
                if v == .null {
                    guard type.hasSuffix("?") else { throw ConfigError("\(file): '\(path)' cannot be null") }
                    continue
                }
                switch type {
                case "bool":
                    guard v.boolValue != nil else { throw ConfigError("\(file): '\(path)' must be true or false") }
                default:
                    guard v.stringValue != nil else { throw ConfigError("\(file): '\(path)' must be a string") }
                }
            }
            func s(_ f: String) -> String? { fields[f]?.stringValue }
            switch key {
            case "node":
                if let v = s("displayName") {
                    guard !v.trimmingCharacters(in: .whitespaces).isEmpty else { throw ConfigError("\(file): 'node.displayName' cannot be empty") }
                    c.node.displayName = v
                }
                c.node.modelIdentifier = s("modelIdentifier")
            case "gateway":
                c.gateway.url = s("url")
                c.gateway.token = s("token")
                c.gateway.password = s("password")
                if let fp = s("tlsFingerprint") {
                    guard let n = TLSFingerprint.normalize(fp) else {
                        throw ConfigError("\(file): 'gateway.tlsFingerprint' must be a SHA-256 fingerprint (64 hex digits)")
                    }
                    c.gateway.tlsFingerprint = n
                }
                c.gateway.allowInsecure = fields["allowInsecure"]?.boolValue ?? false
                if let oc = s("operatorClient") {
                    guard ["cli", "openclaw-linux"].contains(oc) else {
                        throw ConfigError("\(file): 'gateway.operatorClient' must be \"cli\" or \"openclaw-linux\"")
                    }
                    c.gateway.operatorClient = oc
                }
            case "log":
                if let l = s("level") {
                    guard let level = LogLevel(rawValue: l) else {
                        throw ConfigError("\(file): 'log.level' must be one of debug, info, warning, error")
                    }
                    c.log.level = level
                }
            case "control":
                c.control.socket = s("socket")
            default:
                break
            }
        }
        return c
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
        if let token = env["CLAWVOICE_GATEWAY_TOKEN"], !token.isEmpty { config.gateway.token = token }
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
