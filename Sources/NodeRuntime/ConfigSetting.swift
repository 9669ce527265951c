// What one row of the settings table is: a key, the kind of value it takes (type and range),
// one line of help and where its value lands in `ClawConfig`. The default is not written here:
// it is read from `ClawConfig()` through the row's key path, so it is declared once, on the field.
// `ConfigSettings.swift` holds the rows; `Config.swift` parses with them; `ConfigFiles.swift`
// renders the example file and the docs from them.

import ClawvoiceCore
import Foundation
import GatewayCrypto
import GatewayProtocol
import Talk

struct ConfigSetting {
    /// What a value must be before it is applied.
    enum Kind: Equatable {
        case bool, optionalBool
        case int(ClosedRange<Int>)
        case number(ClosedRange<Double>)
        case string, optionalString
        /// A string from a fixed list.
        case choice([String])
        /// true (generated), false (off) or a sound file's path.
        case sound

        var nullable: Bool { self == .optionalBool || self == .optionalString }

        /// The schema string `ClawConfig.schema` has always shown ("int:1:1000", "string?"…).
        var schema: String {
            switch self {
            case .bool: "bool"
            case .optionalBool: "bool?"
            case .int(let r): "int:\(r.lowerBound):\(r.upperBound)"
            case .number(let r): "number:\(r.lowerBound):\(r.upperBound)"
            case .string, .choice: "string"
            case .optionalString: "string?"
            case .sound: "bool|string"
            }
        }

        /// For the docs: what may be written.
        var shown: String {
            switch self {
            case .bool: "`true`, `false`"
            case .optionalBool: "`true`, `false`, `null`"
            case .int(let r): "whole number \(r.lowerBound)–\(r.upperBound)"
            case .number(let r): "number \(ConfigSetting.number(r.lowerBound))–\(ConfigSetting.number(r.upperBound))"
            case .string: "string"
            case .optionalString: "string or `null`"
            case .choice(let options): options.map { "`\"\($0)\"`" }.joined(separator: ", ")
            case .sound: "`true`, `false` or a file path"
            }
        }
    }

    /// "" for a key at the top of the file (stateDir).
    var section: String
    package var key: String
    var kind: Kind
    /// One line (wrapped in the example file); says what the key does and what its values mean.
    var help: String
    /// Writes a value that passed `check` into the config; `file` is the config file's path.
    package var apply: (inout ClawConfig, JSONValue, _ file: String) throws(ConfigError) -> Void
    /// The default as the example file writes it.
    var defaultValue: (ClawConfig) -> JSONValue
    /// Shown instead of the default where it depends on the machine (displayName's host name).
    var shownDefault: String? = nil

    package var path: String { section.isEmpty ? key : "\(section).\(key)" }

    /// Refuses a value of the wrong type or out of range, with the message the config has always given.
    package func check(_ v: JSONValue, file: String) throws(ConfigError) {
        if v == .null {
            guard kind.nullable else { throw ConfigError("\(file): '\(path)' cannot be null") }
            return
        }
        switch kind {
        case .bool, .optionalBool:
            guard v.boolValue != nil else { throw ConfigError("\(file): '\(path)' must be true or false") }
        case .sound:
            guard v.boolValue != nil || v.stringValue != nil else {
                throw ConfigError("\(file): '\(path)' must be true, false or a file path")
            }
        case .number(let r):
            guard let n = v.doubleValue, r.contains(n) else {
                throw ConfigError("\(file): '\(path)' must be a number from \(r.lowerBound) to \(r.upperBound)")
            }
        case .int(let r):
            guard let n = v.intValue, n >= r.lowerBound, n <= r.upperBound else {
                throw ConfigError("\(file): '\(path)' must be a whole number from \(r.lowerBound) to \(r.upperBound)")
            }
        case .string, .optionalString, .choice:
            guard v.stringValue != nil else { throw ConfigError("\(file): '\(path)' must be a string") }
        }
    }

    package static func number(_ d: Double) -> String { d.rounded() == d ? String(Int(d)) : String(d) }

    package static func split(_ path: String) -> (String, String) {
        guard let dot = path.firstIndex(of: ".") else { return ("", path) }
        return (String(path[..<dot]), String(path[path.index(after: dot)...]))
    }

    init(_ path: String, _ kind: Kind, _ help: String, shownDefault: String? = nil,
         defaultValue: @escaping (ClawConfig) -> JSONValue,
         apply: @escaping (inout ClawConfig, JSONValue, String) throws(ConfigError) -> Void) {
        (section, key) = Self.split(path)
        self.kind = kind
        self.help = help
        self.shownDefault = shownDefault
        self.defaultValue = defaultValue
        self.apply = apply
    }
}

// The row builders, one per kind of field.
extension ConfigSetting {
    package static func bool(_ path: String, _ kp: WritableKeyPath<ClawConfig, Bool>, _ help: String) -> ConfigSetting {
        ConfigSetting(path, .bool, help, defaultValue: { .bool($0[keyPath: kp]) }) { c, v, _ in
            if let b = v.boolValue { c[keyPath: kp] = b }
        }
    }

    static func optionalBool(_ path: String, _ kp: WritableKeyPath<ClawConfig, Bool?>, _ help: String) -> ConfigSetting {
        ConfigSetting(path, .optionalBool, help, defaultValue: { $0[keyPath: kp].map(JSONValue.bool) ?? .null }) { c, v, _ in
            c[keyPath: kp] = v.boolValue
        }
    }

    static func int(_ path: String, _ kp: WritableKeyPath<ClawConfig, Int>, _ range: ClosedRange<Int>, _ help: String) -> ConfigSetting {
        ConfigSetting(path, .int(range), help, defaultValue: { .number(Double($0[keyPath: kp])) }) { c, v, _ in
            if let n = v.intValue { c[keyPath: kp] = Int(n) }
        }
    }

    package static func number(_ path: String, _ kp: WritableKeyPath<ClawConfig, Double>, _ range: ClosedRange<Double>, _ help: String) -> ConfigSetting {
        ConfigSetting(path, .number(range), help, defaultValue: { .number($0[keyPath: kp]) }) { c, v, _ in
            if let n = v.doubleValue { c[keyPath: kp] = n }
        }
    }

    /// `accept` returns the value to keep (e.g. normalised), or nil to refuse it with `refusal`.
    package static func string(_ path: String, _ kp: WritableKeyPath<ClawConfig, String>, _ help: String, shownDefault: String? = nil,
                       accept: @escaping (String) -> String? = { $0 }, refusal: String = "") -> ConfigSetting {
        ConfigSetting(path, .string, help, shownDefault: shownDefault, defaultValue: { .string($0[keyPath: kp]) }) { c, v, file throws(ConfigError) in
            guard let s = v.stringValue else { return }
            guard let kept = accept(s) else { throw ConfigError("\(file): '\(path)' \(refusal)") }
            c[keyPath: kp] = kept
        }
    }

    /// null (or the key left out) is nil.
    static func optionalString(_ path: String, _ kp: WritableKeyPath<ClawConfig, String?>, _ help: String,
                               accept: @escaping (String) -> String? = { $0 }, refusal: String = "") -> ConfigSetting {
        ConfigSetting(path, .optionalString, help, defaultValue: { $0[keyPath: kp].map(JSONValue.string) ?? .null }) { c, v, file throws(ConfigError) in
            guard let s = v.stringValue else { c[keyPath: kp] = nil; return }
            guard let kept = accept(s) else { throw ConfigError("\(file): '\(path)' \(refusal)") }
            c[keyPath: kp] = kept
        }
    }

    /// Two options read `must be "a" or "b"`; more read `must be one of a, b, c`.
    package static func refusal(_ options: [String]) -> String {
        options.count == 2 ? "must be \"\(options[0])\" or \"\(options[1])\"" : "must be one of \(options.joined(separator: ", "))"
    }

    static func choice(_ path: String, _ kp: WritableKeyPath<ClawConfig, String>, _ options: [String], _ help: String) -> ConfigSetting {
        ConfigSetting(path, .choice(options), help, defaultValue: { .string($0[keyPath: kp]) }) { c, v, file throws(ConfigError) in
            guard let s = v.stringValue else { return }
            guard options.contains(s) else { throw ConfigError("\(file): '\(path)' \(refusal(options))") }
            c[keyPath: kp] = s
        }
    }

    static func choice<T: RawRepresentable>(_ path: String, _ kp: WritableKeyPath<ClawConfig, T>, _ options: [T],
                                            _ help: String) -> ConfigSetting where T.RawValue == String {
        let names = options.map(\.rawValue)
        return ConfigSetting(path, .choice(names), help, defaultValue: { .string($0[keyPath: kp].rawValue) }) { c, v, file throws(ConfigError) in
            guard let s = v.stringValue else { return }
            guard let t = T(rawValue: s), names.contains(s) else { throw ConfigError("\(file): '\(path)' \(refusal(names))") }
            c[keyPath: kp] = t
        }
    }

    /// A sound file is read beside the config file, and refused now if it cannot be played.
    static func sound(_ path: String, _ kp: WritableKeyPath<ClawConfig, WakeChime>, _ help: String) -> ConfigSetting {
        ConfigSetting(path, .sound, help, defaultValue: { c in
            switch c[keyPath: kp] {
            case .off: .bool(false)
            case .generated: .bool(true)
            case .file(let f): .string(f)
            }
        }) { c, v, file throws(ConfigError) in
            if let b = v.boolValue { c[keyPath: kp] = b ? .generated : .off }
            if let p = v.stringValue {
                let full = ClawConfig.resolvePath(p, relativeTo: file)
                do { _ = try WakeChime.decode(full) } catch { throw ConfigError("\(file): '\(path)': \(error)") }
                c[keyPath: kp] = .file(full)
            }
        }
    }
}

extension ClawConfig.Sounds {
    /// One cue's sound, for the settings table's key path (a cue left out of `cues` is off).
    subscript(cue cue: TalkCue) -> WakeChime {
        get { cues[cue] ?? .off }
        set { cues[cue] = newValue }
    }
}
