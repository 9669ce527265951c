// Issue 27, item 6: the settings table is the one place a key is declared. These tests regenerate
// the example config and the docs' key reference from it and compare them with the files in the
// repository, and drive every row through the parser, so a row that parses nothing, a file
// edited by hand or a key the docs forgot fails here.

import Foundation
import Testing
import GatewayProtocol
import Talk
@testable import CLI
@testable import Daemon
@testable import NodeRuntime

private func read(_ path: String) throws -> String {
    try String(contentsOf: repositoryRoot().appendingPathComponent(path), encoding: .utf8)
}

@Suite struct `Config table agrees with the files` {
    @Test func `config/clawvoice.json5 is what the table writes`() throws {
        let written = try read("config/clawvoice.json5")
        #expect(written == ConfigFiles.example(), "config/clawvoice.json5 differs from the settings table: run `make config-files`")
    }

    @Test func `docs/configuration.md's key reference is what the table writes`() throws {
        let written = try read("docs/configuration.md")
        #expect(written == (try ConfigFiles.splice(docsInto: written)),
                "docs/configuration.md's generated part differs from the settings table: run `make config-files`")
        // Every key is in it, with its default.
        for row in ClawConfig.settings {
            #expect(written.contains("| `\(row.key)` | \(row.kind.shown) | `\(ConfigFiles.literal(row, ClawConfig()))` |"), "\(row.path)")
        }
    }

    @Test func `docs without the markers are refused with a line saying what to add`() {
        #expect(throws: ConfigError.self) { try ConfigFiles.splice(docsInto: "# Configuration\n") }
    }

    @Test func `the example parses to the defaults and every line fits`() throws {
        let example = ConfigFiles.example()
        var parsed = try ClawConfig.parse(example, file: "example.json5")
        parsed.node.displayName = ClawConfig().node.displayName
        #expect(parsed == ClawConfig())
        let wide = example.split(separator: "\n").filter { $0.count > ConfigFiles.width && $0.contains("//") }
        #expect(wide.isEmpty, "\(wide)")
    }

    @Test func `every key is declared once, with help`() {
        let paths = ClawConfig.settings.map(\.path)
        #expect(Set(paths).count == paths.count)
        for row in ClawConfig.settings {
            #expect(!row.help.isEmpty, "\(row.path) has no help")
            #expect(row.section.isEmpty || ClawConfig.sections.contains { $0.name == row.section }, "\(row.path): no such section")
        }
        for section in ClawConfig.sections {
            #expect(ClawConfig.settings.contains { $0.section == section.name }, "section \(section.name) has no keys")
        }
    }
}

@Suite struct `Config table rows parse` {
    /// A valid value that is not the default, for each kind of row.
    static func other(_ row: ConfigSetting, than d: JSONValue) -> JSONValue {
        switch row.kind {
        case .bool: return .bool(d != .bool(true))
        case .optionalBool: return d == .null ? .bool(true) : .null
        case .int(let r): return .number(Double(d == .number(Double(r.upperBound)) ? r.lowerBound : r.upperBound))
        case .number(let r): return .number(d == .number(r.upperBound) ? r.lowerBound : r.upperBound)
        case .string: return .string("x-other")
        case .optionalString:
            // Values the checked keys accept.
            if row.path == "gateway.tlsFingerprint" { return .string(String(repeating: "ab", count: 32)) }
            if row.path == "talk.callsHttpOrigin" { return .string("http://gateway.example:18789") }
            return .string("other.example.")
        case .choice(let options): return .string(options.first { .string($0) != d } ?? "")
        case .sound: return .bool(d != .bool(true))
        }
    }

    @Test func `each row writes the value it is given into the config`() throws {
        let defaults = ClawConfig()
        for row in ClawConfig.settings {
            let d = row.defaultValue(defaults)
            let v = Self.other(row, than: d)
            #expect(v != d, "\(row.path): no other value to try")
            let text = row.section.isEmpty ? "{ \(row.key): \(v) }" : "{ \(row.section): { \(row.key): \(v) } }"
            let parsed = try ClawConfig.parse(text, file: "t.json5")
            #expect(row.defaultValue(parsed) == v, "\(row.path): \(text) read as \(row.defaultValue(parsed))")
            #expect(parsed != defaults, "\(row.path): \(text) changed nothing")
        }
    }

    @Test func `each row refuses a value of the wrong type, naming the key`() {
        for row in ClawConfig.settings {
            let wrong: JSONValue = row.kind == .bool || row.kind == .optionalBool || row.kind == .sound ? .array([]) : .bool(true)
            let text = row.section.isEmpty ? "{ \(row.key): \(wrong) }" : "{ \(row.section): { \(row.key): \(wrong) } }"
            do {
                _ = try ClawConfig.parse(text, file: "t.json5")
                Issue.record("\(row.path): \(text) was accepted")
            } catch {
                #expect(error.description.contains(row.path), "\(row.path): \(error.description)")
            }
        }
    }

    @Test func `the talk loop's own defaults are the config's`() {
        // TalkConfig repeats some defaults (the Talk module cannot see the config); they must agree.
        var fromConfig = NodeDaemon.talkConfig(ClawConfig(), stateDir: "/s")
        // Not repeated defaults: a path found at run time, and the cues the config hands over whole.
        fromConfig.stopWordModelsDirectory = TalkConfig().stopWordModelsDirectory
        fromConfig.cues = TalkConfig().cues
        #expect(fromConfig == TalkConfig())
    }

    @Test func `talk.endOfTurn reaches the talk loop`() throws {
        #expect(NodeDaemon.talkConfig(ClawConfig(), stateDir: "/s").endOfTurn == TalkConfig.endOfTurnDefault)
        let on = try ClawConfig.parse("{ talk: { endOfTurn: true } }", file: "t.json5")
        #expect(NodeDaemon.talkConfig(on, stateDir: "/s").endOfTurn)
        let off = try ClawConfig.parse("{ talk: { endOfTurn: false } }", file: "t.json5")
        #expect(!NodeDaemon.talkConfig(off, stateDir: "/s").endOfTurn)
    }
}
