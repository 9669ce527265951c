// Issue 11, item 4: a config nested tens of thousands deep crashed every command with SIGSEGV.
// Now the JSON5 parser stops at JSON5.maxDepth with one line that names line and column.

import Foundation
import Testing
import GatewayProtocol
@testable import CLI
@testable import Daemon
@testable import NodeRuntime

@Suite struct `Hardening: config nesting depth` {
    @Test func `a config nested 34,000 deep is refused at the first level too deep, with line and column`() throws {
        let text = "{\n  a: " + String(repeating: "[", count: 34_000) + String(repeating: "]", count: 34_000) + "\n}"
        do {
            _ = try JSON5.parse(text)
            Issue.record("a 34,000-deep config parsed")
        } catch {
            #expect(error.line == 2)
            // `{` is level 1 and the 63rd `[` (column 6 + 62) is level 64; the 64th `[` is one too many.
            #expect(error.column == 6 + 63, "\(error)")
            #expect(error.reason.contains("nested deeper than \(JSON5.maxDepth) levels"))
        }
        #expect(throws: ConfigError.self) { try ClawConfig.parse(text, file: "deep.json5") }
    }

    @Test func `nesting up to the limit still parses`() throws {
        let depth = JSON5.maxDepth
        let text = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
        _ = try JSON5.parse(text)
        #expect(throws: JSON5Error.self) { try JSON5.parse("[" + text + "]") }
    }

    @Test func `every command with a deeply nested config prints one line and exits, no crash`() async throws {
        let env = try CLIEnvironment()
        try FileManager.default.createDirectory(atPath: env.configHome + "/clawvoice", withIntermediateDirectories: true)
        let text = "{ gateway: " + String(repeating: "{a:", count: 34_000) + "1" + String(repeating: "}", count: 34_000) + " }"
        try text.write(toFile: env.configHome + "/clawvoice/config.json5", atomically: true, encoding: .utf8)
        for args in [["status"], ["gateways"]] {
            let o = try await env.run(args)
            #expect(o.status == 1 || o.status == 2, "\(args): \(o)")
            #expect(o.stderrLines.count == 1, "\(args): \(o)")
            let line = o.stderrLines.first ?? ""
            #expect(line.contains("line 1, column") && line.contains("nested deeper than"), "\(args): \(line)")
        }
    }
}

@Suite struct `Hardening: config fuzz regressions` {
    /// fuzz/regressions/json5/crlf-comment-line-count: a comment ended by "\r\n" after binary
    /// junk. The error must name the line the bracket is really on (3), counting "\r\n" once.
    @Test func `an error after a CRLF-terminated comment names the right line`() throws {
        let url = repositoryRoot().appendingPathComponent("fuzz/regressions/json5/crlf-comment-line-count")
        let text = String(decoding: try Data(contentsOf: url), as: UTF8.self)
        do {
            _ = try JSON5.parse(text)
            Issue.record("the regression input parsed")
        } catch {
            #expect(error.line == 3 && error.column == 1, "\(error)")
            #expect(error.reason == "expected a key or '}', found ']'")
        }
    }

    /// fuzz/regressions/json5/newline-in-key-of-error: a key holding "\n" escapes made the
    /// error message several lines long. Keys and words are now shown escaped and shortened.
    @Test func `an error that quotes a key with newlines is still one line`() throws {
        let url = repositoryRoot().appendingPathComponent("fuzz/regressions/json5/newline-in-key-of-error")
        let text = String(decoding: try Data(contentsOf: url), as: UTF8.self)
        do {
            _ = try JSON5.parse(text)
            Issue.record("the regression input parsed")
        } catch {
            #expect(!error.description.contains("\n") && !error.description.contains("\r"), "\(error)")
            #expect(error.description.contains("expected ':' after key '\\nn\\n"), "\(error)")
        }
        let unknown = try #require(configErrorLine("{ \"bad\\nkey\": 1 }"))
        #expect(!unknown.contains("\n") && unknown.contains("unknown key 'bad\\nkey'"), "\(unknown)")
        #expect(JSON5.shown(String(repeating: "x", count: 100)) == String(repeating: "x", count: 40) + "…")
    }
}

private func configErrorLine(_ text: String) -> String? {
    do { _ = try ClawConfig.parse(text, file: "t.json5"); return nil } catch { return error.description }
}
