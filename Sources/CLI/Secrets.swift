// Secrets the CLI is given without putting them on its command line, where every local user
// sees them in `ps` for as long as `pair` waits: from the environment, from a file
// (`--token-file`, `--password-file`) or from standard input (`--token -`, `--password -`),
// with a prompt that does not echo when standard input is a terminal.

import ClawvoiceCore
import Foundation
import GatewayCrypto
import NodeRuntime
import Daemon
#if canImport(Glibc)
import Glibc
#endif

/// Where the CLI reads secrets from; the real one reads files and standard input.
struct SecretIO: Sendable {
    var readFile: @Sendable (String) throws -> String
    /// One line from standard input; `prompt` is shown (on stderr, echo off) only on a terminal.
    var readLine: @Sendable (_ prompt: String) -> String?

    static let system = SecretIO(
        readFile: { try String(contentsOfFile: $0, encoding: .utf8) },
        readLine: { prompt in
            guard isatty(0) == 1 else { return Swift.readLine(strippingNewline: true) }
            FileHandle.standardError.write(Data(prompt.utf8))
            var saved = termios()
            let haveTerm = tcgetattr(0, &saved) == 0
            if haveTerm {
                var quiet = saved
                quiet.c_lflag &= ~tcflag_t(ECHO)
                tcsetattr(0, TCSAFLUSH, &quiet)
            }
            defer {
                if haveTerm { tcsetattr(0, TCSAFLUSH, &saved) }
                FileHandle.standardError.write(Data("\n".utf8))
            }
            return Swift.readLine(strippingNewline: true)
        })
}

enum Secrets {
    /// The secret for `--NAME`, from (in order) `--NAME -` (standard input), `--NAME-file FILE`,
    /// or `fallback` (the environment or config); `--NAME VALUE` is refused, naming those three. Trailing newlines and
    /// surrounding spaces are dropped; an empty secret is an error, not "no secret".
    static func resolve(_ name: String, value: String?, file: String?, fallback: String?, command: String,
                        io: SecretIO = .system) throws(CLI.UsageError) -> String? {
        if value != nil && file != nil {
            throw CLI.UsageError(description: "\(command): give --\(name) or --\(name)-file, not both")
        }
        if let value, value != "-" {
            // A value here would sit in `ps` for every local user as long as the command runs.
            throw CLI.UsageError(description: "\(command): --\(name) takes no value on the command line (other users see it in `ps`); "
                                 + "give the \(name) on standard input (--\(name) -), in a file (--\(name)-file FILE) "
                                 + "or in CLAWVOICE_GATEWAY_\(name.uppercased())")
        }
        let raw: String
        if let file {
            do { raw = try io.readFile(file) } catch {
                let reason = (error as NSError).localizedFailureReason ?? "not readable"
                throw CLI.UsageError(description: "\(command): cannot read --\(name)-file \(file): \(reason)")
            }
        } else if value == "-" {
            let prompt = "Gateway \(name): "
            guard let line = io.readLine(prompt) else {
                throw CLI.UsageError(description: "\(command): --\(name) - reads the \(name) from standard input, and it was empty")
            }
            raw = line
        } else {
            return fallback
        }
        let secret = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !secret.isEmpty else {
            let source = file.map { "--\(name)-file \($0)" } ?? "standard input"
            throw CLI.UsageError(description: "\(command): the \(name) from \(source) is empty")
        }
        return secret
    }
}
