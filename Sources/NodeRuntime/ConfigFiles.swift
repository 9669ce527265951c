// The files written from the settings table: the annotated example config
// (config/clawvoice.json5, `clawvoice config --example`) and the key reference between the markers
// in docs/configuration.md (`clawvoice config --docs FILE`). `make config-files` rewrites both;
// a test regenerates them and compares, so neither drifts from what the parser accepts.

import ClawvoiceCore
import Foundation
import GatewayCrypto
import GatewayProtocol

public enum ConfigFiles {
    static let width = 96
    static let docsBegin = "<!-- generated from Sources/NodeRuntime/ConfigSettings.swift by `make config-files`: edit the table there, not this part -->"
    static let docsEnd = "<!-- end of the generated part -->"

    /// The example config: every key with its default and its help as a comment.
    public static func example() -> String {
        let table = ClawConfig.settings
        let defaults = ClawConfig()
        var out = """
        // clawvoice configuration, JSON5 (comments and trailing commas allowed).
        // Copy to $XDG_CONFIG_HOME/clawvoice/config.json5 (usually ~/.config/clawvoice/config.json5)
        // or pass --config FILE. Every key is optional; the values below are the defaults.
        // Unknown keys are an error, so a typo is caught at start-up with the file and the key.
        // Written by `make config-files` from Sources/NodeRuntime/ConfigSettings.swift.
        {

        """
        for (n, section) in ClawConfig.sections.enumerated() {
            if n > 0 { out += "\n" }
            out += "  \(section.name): {\n"
            if let note = section.note { out += comment(note, indent: 4) }
            let rows = table.filter { $0.section == section.name }
            let lines = rows.map { "    \($0.key): \(literal($0, defaults)),"  }
            let column = (lines.map(\.count).max() ?? 0) + 2
            for (row, line) in zip(rows, lines) {
                if section.compact {
                    out += line.padding(toLength: column, withPad: " ", startingAt: 0) + "// \(row.help)\n"
                } else {
                    out += comment(helpWithRange(row), indent: 4) + line + "\n"
                }
            }
            out += "  },\n"
        }
        for row in table where row.section.isEmpty {
            out += "\n" + comment(helpWithRange(row), indent: 2) + "  \(row.key): \(literal(row, defaults)),\n"
        }
        return out + "}\n"
    }

    /// The generated part of docs/configuration.md, markers included.
    public static func docs() -> String {
        let table = ClawConfig.settings
        let defaults = ClawConfig()
        var out = docsBegin + "\n\n## The sections\n\n"
        out += "Every key, what it takes and its default are below; [`config/clawvoice.json5`](../config/clawvoice.json5)\n"
        out += "is the same as an annotated file to copy from.\n\n"
        out += "| section | keys | what for |\n|---|---|---|\n"
        for section in ClawConfig.sections {
            let keys = table.filter { $0.section == section.name }.map { "`\($0.key)`" }.joined(separator: ", ")
            out += "| `\(section.name)` | \(keys) | \(cell(section.purpose)) |\n"
        }
        for row in table where row.section.isEmpty {
            out += "| `\(row.key)` | | where identity, gateways and tokens are kept |\n"
        }
        out += "\n## Every key\n"
        let groups = ClawConfig.sections.map { ($0.name, "`\($0.name)`") } + [("", "At the top of the file")]
        for (name, title) in groups {
            out += "\n### \(title)\n\n| key | takes | default | what it does |\n|---|---|---|---|\n"
            for row in table where row.section == name {
                out += "| `\(row.key)` | \(row.kind.shown) | `\(literal(row, defaults))` | \(cell(row.help)) |\n"
            }
        }
        return out + docsEnd + "\n"
    }

    /// `text` (docs/configuration.md) with its generated part replaced by `docs()`.
    public static func splice(docsInto text: String) throws(ConfigError) -> String {
        guard let begin = text.range(of: docsBegin), let end = text.range(of: docsEnd + "\n", range: begin.upperBound..<text.endIndex) else {
            throw ConfigError("the docs file has no generated part: put the two marker lines from `clawvoice config --docs` where it goes")
        }
        return String(text[..<begin.lowerBound]) + docs() + String(text[end.upperBound...])
    }

    static func helpWithRange(_ row: ConfigSetting) -> String {
        switch row.kind {
        case .int(let r): "\(row.help) Range: \(r.lowerBound)–\(r.upperBound)."
        case .number(let r): "\(row.help) Range: \(ConfigSetting.number(r.lowerBound))–\(ConfigSetting.number(r.upperBound))."
        default: row.help
        }
    }

    /// The default as JSON5 text.
    static func literal(_ row: ConfigSetting, _ defaults: ClawConfig) -> String {
        if let shown = row.shownDefault { return shown }
        switch row.defaultValue(defaults) {
        case .null: return "null"
        case .bool(let b): return b ? "true" : "false"
        case .number(let n): return ConfigSetting.number(n)
        case .string(let s): return "\"" + s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
        case let v: return v.description
        }
    }

    /// `text` as `//` comment lines no wider than `width`.
    static func comment(_ text: String, indent: Int) -> String {
        let prefix = String(repeating: " ", count: indent) + "// "
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ") {
            if !line.isEmpty && prefix.count + line.count + 1 + word.count > width {
                lines.append(line)
                line = ""
            }
            line += (line.isEmpty ? "" : " ") + word
        }
        if !line.isEmpty { lines.append(line) }
        return lines.map { prefix + $0 + "\n" }.joined()
    }

    /// Text safe inside a Markdown table cell.
    static func cell(_ text: String) -> String {
        text.replacingOccurrences(of: "|", with: "\\|").replacingOccurrences(of: "<", with: "&lt;")
    }
}
