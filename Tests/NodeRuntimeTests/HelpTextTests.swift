// Issue 24, item 4: every command's --help against the options its parser really takes. The
// parser reads each command's `flags` table (CLI.Command); the options a help text names are
// read out of its usage and details. Both directions must hold, so help and parser cannot drift.

import Foundation
import Testing
@testable import CLI
@testable import Daemon
@testable import NodeRuntime

@Suite struct `Help texts match the parser` {
    /// Every `--option` a text names (not inside a longer word such as `make wake-model`).
    static func options(in text: String) -> Set<String> {
        let regex = try! NSRegularExpression(pattern: #"(?<![\w-])--[a-z][a-z0-9-]*"#)
        let range = NSRange(text.startIndex..., in: text)
        return Set(regex.matches(in: text, range: range).compactMap { Range($0.range, in: text).map { String(text[$0]) } })
    }

    static let global: Set<String> = ["--config", "--log-level", "--help"]

    /// The options a help text names, by the command they belong to: a `clawvoice OTHER …` span in
    /// backticks names OTHER's options; another program's command in backticks (`systemctl
    /// --user …`, `openclaw qr --setup-code-only`) names none of ours; the rest are `name`'s.
    static func namedOptions(_ text: String, of name: String) -> [String: Set<String>] {
        var byCommand: [String: Set<String>] = [:]
        for (i, part) in text.components(separatedBy: "`").enumerated() {
            guard i % 2 == 1 else { byCommand[name, default: []].formUnion(options(in: part)); continue }
            let words = part.split(separator: " ").map(String.init)
            guard words.first == "clawvoice" else { continue }
            let target = words.count > 1 && CLI.commands.contains { $0.name == words[1] } ? words[1] : name
            byCommand[target, default: []].formUnion(options(in: part))
        }
        return byCommand
    }

    @Test func `the global options are in the help and parse before and after a command`() throws {
        #expect(Self.options(in: CLI.global) == Self.global)
        for args in [["--config", "/x", "status"], ["status", "--log-level", "debug"], ["status", "--help"], ["status", "-h"]] {
            let p = try CLI.parse(args)
            #expect(p?.command.name == "status", "\(args)")
        }
    }

    @Test(arguments: CLI.commands.map(\.name))
    func `each option a command parses is in its help, and each option in its help parses`(name: String) throws {
        let command = try #require(CLI.commands.first { $0.name == name })
        let help = CLI.help(command)
        let named = Self.namedOptions(command.usage + "\n" + command.details, of: name)
        let parsed = Set(command.flags.keys)
        for option in parsed.sorted() {
            #expect(named[name, default: []].contains(option), "`clawvoice \(name)` parses \(option) but its --help does not mention it")
        }
        for (target, options) in named {
            let takesValue = try #require(CLI.commands.first { $0.name == target }).flags
            for option in options.subtracting(Self.global).sorted() {
                // Parsed the way a user would write it: with a value when it takes one.
                let args = [target, option] + (takesValue[option] == true ? ["1"] : [])
                #expect(throws: Never.self, "`clawvoice \(name) --help` names \(args.joined(separator: " ")), which does not parse") {
                    try CLI.parse(args)
                }
            }
        }
        #expect(help.contains(command.usage) && help.contains(CLI.global))
    }
}
