// `clawvoice config --example | --docs FILE`: the files ConfigFiles writes from the settings table.

import ClawvoiceCore
import Daemon
import Foundation
import GatewayCrypto
import NodeRuntime

enum ConfigCommand {
    static let command = CLI.Command(
        name: "config", abstract: "Print the annotated example config, or the docs' key reference.",
        usage: "clawvoice config --example\n       clawvoice config --docs FILE",
        details: """
        Both come from the settings table the config is parsed with, so they say exactly what it accepts.
          --example     the example config with every key, its default and what it does (config/clawvoice.json5)
          --docs FILE   FILE (docs/configuration.md) with its generated key reference brought up to date
        """, flags: ["--example": false, "--docs": true], maxPositionals: 0)

    static func run(_ p: CLI.Parsed) -> Int32 {
        if p.flags["--example"] != nil {
            FileHandle.standardOutput.write(Data(ConfigFiles.example().utf8))
            return 0
        }
        guard let file = p.flags["--docs"] else {
            CLI.fail("config: say --example or --docs FILE (see `clawvoice config --help`)")
            return 2
        }
        guard let data = FileManager.default.contents(atPath: file), let text = String(data: data, encoding: .utf8) else {
            CLI.fail("config: cannot read \(file)")
            return 1
        }
        do {
            FileHandle.standardOutput.write(Data(try ConfigFiles.splice(docsInto: text).utf8))
            return 0
        } catch {
            CLI.fail("config: \(file): \(error.description)")
            return 1
        }
    }
}
