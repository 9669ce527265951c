// Issue 11, item 5: `pair --token TOKEN` showed the gateway token to every local user through
// `ps` for as long as pairing waited, and `--password` had no other way in. Secrets now come
// from the environment, a file or standard input; these tests pair against the loopback
// gateway each way and read the waiting process's command line from /proc.

import ClawvoiceTesting
import Foundation
import Testing
import GatewayProtocol
import LoopbackGateway
@testable import CLI
@testable import Daemon
@testable import NodeRuntime

private func io(file: [String: String] = [:], stdin: String? = nil, prompts: Locked<[String]> = Locked([])) -> SecretIO {
    SecretIO(readFile: { path in
                 guard let text = file[path] else { throw CocoaError(.fileReadNoSuchFile) }
                 return text
             },
             readLine: { prompt in prompts.withLock { $0.append(prompt) }; return stdin })
}

private func gateway(_ auth: LoopbackGateway.AuthMode, autoApprove: Bool) async throws -> LoopbackGateway {
    var c = LoopbackGateway.Configuration()
    c.auth = auth
    c.autoApprove = autoApprove
    let g = LoopbackGateway(configuration: c)
    try await g.start()
    return g
}

@Suite struct `Secret input` {
    @Test func `a secret comes from a file, standard input or the fallback, trimmed`() throws {
        let f = io(file: ["/t": "file-token\n"], stdin: "  typed-token \r")
        #expect(try Secrets.resolve("token", value: nil, file: "/t", fallback: "env", command: "pair", io: f) == "file-token")
        let prompts = Locked<[String]>([])
        #expect(try Secrets.resolve("token", value: "-", file: nil, fallback: "env", command: "pair",
                                    io: io(stdin: "typed-token\n", prompts: prompts)) == "typed-token")
        #expect(prompts.value == ["Gateway token: "])
        #expect(try Secrets.resolve("password", value: nil, file: nil, fallback: "from-env", command: "pair", io: f) == "from-env")
    }

    @Test func `a secret given as a value on the command line is refused, naming the three ways`() async throws {
        do {
            _ = try Secrets.resolve("password", value: "p", file: nil, fallback: "from-env", command: "pair", io: io())
            Issue.record("--password VALUE was accepted")
        } catch {
            #expect(error.description.contains("--password -") && error.description.contains("--password-file FILE")
                    && error.description.contains("CLAWVOICE_GATEWAY_PASSWORD"), "\(error)")
        }
        // Issue 24: `pair --token VALUE` put the token where `ps` shows it; now it ends at once.
        let env = try CLIEnvironment()
        let o = try await env.run(["pair", "--url", "ws://127.0.0.1:1", "--token", "s3cret", "--timeout", "5"])
        #expect(o.status == 2 && o.stderrLines.count == 1, "\(o)")
        let line = o.stderrLines.first ?? ""
        for way in ["--token -", "--token-file FILE", "CLAWVOICE_GATEWAY_TOKEN", "`ps`"] {
            #expect(line.contains(way), "expected \(way) in: \(line)")
        }
        #expect(!line.contains("s3cret") && o.stdout.isEmpty, "\(o)")
        #expect(!FileManager.default.fileExists(atPath: env.stateDir), "nothing may be stored")
    }

    @Test func `conflicting, missing, unreadable or empty secrets are one-line usage errors`() {
        let f = io(file: ["/empty": "\n\n"], stdin: nil)
        let cases: [(String?, String?, String)] = [
            ("x", "/t", "pair: give --token or --token-file, not both"),
            (nil, "/missing", "pair: cannot read --token-file /missing"),
            (nil, "/empty", "pair: the token from --token-file /empty is empty"),
            ("-", nil, "pair: --token - reads the token from standard input, and it was empty"),
        ]
        for (value, file, message) in cases {
            do {
                _ = try Secrets.resolve("token", value: value, file: file, fallback: nil, command: "pair", io: f)
                Issue.record("no error for \(String(describing: value)) \(String(describing: file))")
            } catch {
                #expect(error.description.hasPrefix(message), "\(error)")
                #expect(!error.description.contains("\n"))
            }
        }
    }

    @Test func `pair --token-file keeps the token out of the process's command line while it waits`() async throws {
        let secret = "tok-\(UUID().uuidString)"
        let g = try await gateway(.token(secret), autoApprove: false)
        defer { Task { await g.stop() } }
        let env = try CLIEnvironment()
        let file = try env.scratch.write("token", secret + "\n")
        let pair = try env.spawn(["pair", "--url", await g.url, "--token-file", file, "--timeout", "30"])
        defer { pair.signal(SIGKILL) }
        // Asked for approval: the token was read and accepted by the gateway.
        let waiting = await eventually(.seconds(15)) { pair.stdout.contains("openclaw devices approve") || !pair.isRunning }
        #expect(waiting && pair.isRunning, "\(pair.stdout)\n\(pair.stderr)")
        let cmdline = try String(decoding: Data(contentsOf: URL(fileURLWithPath: "/proc/\(pair.pid)/cmdline")), as: UTF8.self)
        #expect(cmdline.contains("--token-file"))
        #expect(!cmdline.contains(secret), "the token is visible in ps: \(cmdline)")
    }

    @Test func `pair --token - reads the token from standard input`() async throws {
        let secret = "stdin-\(UUID().uuidString.prefix(8))"
        let g = try await gateway(.token(secret), autoApprove: true)
        defer { Task { await g.stop() } }
        let env = try CLIEnvironment()
        let p = Process()
        p.executableURL = try ExecutableLookup.require()
        p.arguments = ["pair", "--url", await g.url, "--token", "-", "--timeout", "20"]
        p.environment = env.variables
        let stdin = Pipe(), out = Pipe(), err = Pipe()
        p.standardInput = stdin
        p.standardOutput = out
        p.standardError = err
        try p.run()
        stdin.fileHandleForWriting.write(Data((secret + "\n").utf8))
        try stdin.fileHandleForWriting.close()
        let ended = await eventually(.seconds(25)) { !p.isRunning }
        if !ended { p.terminate() }
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let errors = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(ended && p.terminationStatus == 0, "\(text)\n\(errors)")
        #expect(text.contains("operator: paired and connected"), "\(text)")
        // Not a terminal: no prompt is printed.
        #expect(!errors.contains("Gateway token:"))
    }

    @Test(arguments: ["env", "file"])
    func `pair takes the password from CLAWVOICE_GATEWAY_PASSWORD or --password-file`(source: String) async throws {
        let secret = "pw-\(UUID().uuidString.prefix(8))"
        let g = try await gateway(.password(secret), autoApprove: true)
        defer { Task { await g.stop() } }
        var env = try CLIEnvironment()
        var args = ["pair", "--url", await g.url, "--timeout", "20"]
        if source == "env" { env.extra["CLAWVOICE_GATEWAY_PASSWORD"] = secret } else {
            args += ["--password-file", try env.scratch.write("pw", secret)]
        }
        let o = try await env.run(args, timeout: .seconds(25))
        #expect(o.status == 0 && o.stdout.contains("operator: paired and connected"), "\(o)")
    }
}
