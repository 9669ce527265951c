// Issue 11, item 6: `pair --url wss://…` to a self-signed gateway without a pin retried until
// the timeout saying "self-signed certificate", never showed the fingerprint and never said how
// to pin it. Now it ends at once with the fingerprint and the exact command, and on a terminal
// offers to trust the certificate (trust on first use) and pins it.

import ClawvoiceTesting
import Foundation
import Testing
import LoopbackGateway
import WebSocketTransport
@testable import CLI
@testable import Daemon
@testable import NodeRuntime

private func tlsGateway(_ scratch: Scratch, token: String) async throws -> (LoopbackGateway, String) {
    let cert = scratch.sub("cert.pem"), key = scratch.sub("key.pem")
    try SelfSignedCertificate.generate(commonName: "127.0.0.1", certPath: cert, keyPath: key)
    var c = LoopbackGateway.Configuration()
    c.auth = .token(token)
    c.autoApprove = true
    c.tlsCertificatePath = cert
    c.tlsKeyPath = key
    let g = LoopbackGateway(configuration: c)
    try await g.start()
    return (g, try TLSCertificateFingerprint.sha256Hex(pemFile: cert))
}

@Suite struct `TLS trust on pairing` {
    @Test func `the refusal names the fingerprint and the exact pin command`() {
        let fp = String(repeating: "ab", count: 31) + "0f"
        #expect(TLSTrust.colonForm("ab0f") == "AB:0F")
        let line = TLSTrust.refusal(host: "gw:443", reason: "self-signed certificate", fingerprint: fp,
                                    url: "wss://gw:443", secretFlag: "--token-file /t")
        #expect(line.contains("AB:AB:"))
        #expect(line.hasSuffix("clawvoice pair --url wss://gw:443 --tls-fingerprint \(fp) --token-file /t"))
        #expect(!line.contains("\n"))
        #expect(TLSTrust.isYes(" Y ") && TLSTrust.isYes("yes") && !TLSTrust.isYes("") && !TLSTrust.isYes(nil) && !TLSTrust.isYes("no"))
    }

    @Test func `pair to a self-signed gateway without a pin ends at once with its fingerprint, and the suggested command pairs`() async throws {
        let env = try CLIEnvironment()
        let (g, fp) = try await tlsGateway(env.scratch, token: "tls-t")
        defer { Task { await g.stop() } }
        let url = await g.url
        let tokenFile = try env.scratch.write("token", "tls-t\n")
        let started = ContinuousClock.now
        let o = try await env.run(["pair", "--url", url, "--token-file", tokenFile, "--timeout", "30"], timeout: .seconds(40))
        #expect(ContinuousClock.now - started < .seconds(15), "pair retried instead of explaining: \(o)")
        #expect(o.status == 1 && o.stderrLines.count == 1, "\(o)")
        let line = o.stderrLines.first ?? ""
        #expect(line.contains("self-signed certificate") && line.contains(TLSTrust.colonForm(fp)), "\(line)")
        let command = "clawvoice pair --url \(url) --tls-fingerprint \(fp) --token-file \(tokenFile)"
        #expect(line.hasSuffix(command), "\(line)")

        // The command it suggests works as printed.
        let again = try await env.run(Array(command.split(separator: " ").dropFirst().map(String.init)) + ["--timeout", "20"], timeout: .seconds(25))
        #expect(again.status == 0 && again.stdout.contains("operator: paired and connected"), "\(again)")
    }

    @Test func `on a terminal pair offers to trust the certificate and pins it`() async throws {
        let env = try CLIEnvironment()
        let (g, fp) = try await tlsGateway(env.scratch, token: "tofu-t")
        defer { Task { await g.stop() } }
        let url = await g.url
        let tokenFile = try env.scratch.write("token", "tofu-t")
        let exe = try ExecutableLookup.require().path
        // script(1) gives pair a pseudo-terminal; "y" answers the question.
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/script")
        p.arguments = ["-qec", "\(exe) pair --url \(url) --token-file \(tokenFile) --timeout 20", "/dev/null"]
        p.environment = env.variables
        let input = Pipe(), output = Pipe()
        p.standardInput = input
        p.standardOutput = output
        p.standardError = output
        try p.run()
        let reader = Task { await onOwnThread { output.fileHandleForReading.readDataToEndOfFile() } }
        try await Task.sleep(for: .seconds(2))
        input.fileHandleForWriting.write(Data("y\n".utf8))
        let ended = await eventually(.seconds(25)) { !p.isRunning }
        if !ended { p.terminate() }
        try? input.fileHandleForWriting.close()
        let text = String(decoding: await reader.value, as: UTF8.self)
        #expect(ended && p.terminationStatus == 0, "\(text)")
        #expect(text.contains("Trust this certificate and pin it? [y/N]") && text.contains(TLSTrust.colonForm(fp)), "\(text)")
        #expect(text.contains("Pinned the certificate") && text.contains("operator: paired and connected"), "\(text)")
        let list = try await env.run(["gateways"])
        #expect(list.stdout.contains("pinned \(fp.prefix(16))"), "\(list)")
    }

    @Test func `a setup code without a pin for a self-signed gateway ends with the fingerprint, never the code`() async throws {
        let env = try CLIEnvironment()
        let (g, fp) = try await tlsGateway(env.scratch, token: "code-t")
        defer { Task { await g.stop() } }
        let code = await g.makeSetupCode()
        let o = try await env.run(["pair", code, "--timeout", "20"], timeout: .seconds(30))
        #expect(o.status == 1 && o.stderrLines.count == 1, "\(o)")
        let line = o.stderrLines.first ?? ""
        #expect(line.hasSuffix("clawvoice pair <setup-code> --tls-fingerprint \(fp)"), "\(line)")
        #expect(!line.contains(code), "the setup code (a bootstrap token) was printed")
        let again = try await env.run(["pair", code, "--tls-fingerprint", fp, "--timeout", "20"], timeout: .seconds(30))
        #expect(again.status == 0 && again.stdout.contains("operator: paired and connected"), "\(again)")
    }
}
