// `clawvoice pair`: its options, checked before anything is stored; PairingFlow (Pairing.swift) does the pairing.

import ClawvoiceCore
import Discovery
import Foundation
import GatewayClient
import GatewayCrypto
import GatewayProtocol
import NodeRuntime

/// `clawvoice pair`.
enum PairCommand {
    static let command = CLI.Command(name: "pair", abstract: "Pair this device with an OpenClaw gateway (node and operator roles).",
                usage: "clawvoice pair <setup-code>\n       clawvoice pair --url ws://HOST:18789 [--token-file FILE | --token - | --password-file FILE | --password -]\n       clawvoice pair [--name NAME] [--token-file FILE | ...]   (a gateway found on the network)",
                details: """
                A setup code comes from `openclaw qr --setup-code-only` on the gateway host (with or without the
                oc-pair:// prefix). Its routes are probed in order and the first that answers is saved.
                An address where no gateway answers ends within seconds with one line saying what was tried
                and what to fix; nothing is stored until a gateway has answered. A running daemon is told
                to use the new pairing at once.
                Without a code, give the gateway URL and its shared token or password.
                With neither, pair looks for gateways as `clawvoice discover` does (local. and
                discovery.wideAreaDomain, for discovery.timeoutMs): one found is used (and said so); several are
                offered as a numbered choice on a terminal, or listed with a request for --name or --url
                elsewhere; --name NAME picks the one with that instance or display name. An advertised TLS
                fingerprint is shown, never pinned by itself: the certificate is checked as with --url.
                pair then connects both roles and waits: when the gateway asks for approval it prints the
                request id and the exact `openclaw devices approve <id>` command to run on the gateway host,
                and finishes as soon as both roles are approved.

                Options:
                  --url URL                 ws:// (loopback only, unless --allow-insecure) or wss://
                  --token-file FILE         read the gateway's shared token from FILE
                  --token -                 read it from standard input (asked for, not echoed, on a terminal)
                  --password-file FILE      read the gateway's password from FILE
                  --password -              read it from standard input (asked for, not echoed, on a terminal)
                Environment: CLAWVOICE_GATEWAY_TOKEN, CLAWVOICE_GATEWAY_PASSWORD. A secret is never given as a
                value on the command line (`--token VALUE` is refused): other local users would see it in `ps`.
                  --name NAME               what to call this gateway locally (default: its host); without a code
                                            or URL: the discovered gateway to pair with
                  --domain DOMAIN           also browse this wide-area DNS-SD domain (besides discovery.wideAreaDomain)
                  --tls-fingerprint SHA256  pin the gateway's TLS certificate (64 hex; colons allowed)
                  --allow-insecure          permit plain ws:// to a non-loopback host
                  --timeout SECONDS         give up after this long (default: wait until approved)
                """,
                flags: ["--url": true, "--token": true, "--password": true, "--token-file": true, "--password-file": true,
                        "--name": true, "--tls-fingerprint": true, "--domain": true,
                        "--allow-insecure": false, "--timeout": true], maxPositionals: 1)

    static func run(_ p: CLI.Parsed, config: ClawConfig, paths: RuntimePaths, log: LogSink, environment: [String: String]) async throws -> Int32 {
        var r = PairRequest()
        r.setupCode = p.positionals.first
        r.url = p.flags["--url"]
        var discovered: DiscoveredGateway?
        if r.setupCode == nil && r.url == nil {
            let g = try await DiscoverCommand.choose(p, config: config, environment: environment, say: { CLI.say($0) })
            if let fp = g.tlsFingerprint {
                CLI.say("It advertises TLS certificate sha256 \(fp) (a hint, not proof: the certificate is checked when pairing)")
            }
            discovered = g
            r.url = g.url
        }
        // Secrets from a file, standard input or the environment keep them out of `ps`. An
        // explicit one of either kind outranks both kinds from the environment or config.
        let tokenGiven = p.flags["--token"] != nil || p.flags["--token-file"] != nil
        let passwordGiven = p.flags["--password"] != nil || p.flags["--password-file"] != nil
        r.token = try Secrets.resolve("token", value: p.flags["--token"], file: p.flags["--token-file"],
                                      fallback: r.url != nil && !passwordGiven ? config.gateway.token : nil, command: "pair")
        r.password = try Secrets.resolve("password", value: p.flags["--password"], file: p.flags["--password-file"],
                                         fallback: r.url != nil && !tokenGiven && r.token == nil ? config.gateway.password : nil,
                                         command: "pair")
        r.secretFlag = p.flags["--token-file"].map { "--token-file \($0)" } ?? p.flags["--password-file"].map { "--password-file \($0)" }
            ?? (p.flags["--token"] != nil ? "--token -" : p.flags["--password"] != nil ? "--password -" : nil)
        r.confirmTrust = TLSTrust.terminalConfirm()
        r.name = discovered?.name ?? p.flags["--name"]
        r.allowInsecure = p.flags["--allow-insecure"] != nil || config.gateway.allowInsecure
        if let fp = p.flags["--tls-fingerprint"] {
            guard let n = TLSFingerprint.normalize(fp) else {
                throw CLI.UsageError(description: "pair: --tls-fingerprint must be a SHA-256 fingerprint (64 hex digits)")
            }
            r.tlsFingerprint = n
        }
        if let t = p.flags["--timeout"] {
            guard let s = Double(t), s > 0 else { throw CLI.UsageError(description: "pair: --timeout needs a number of seconds") }
            r.timeout = .seconds(s)
        }
        if r.setupCode != nil && r.url != nil {
            throw CLI.UsageError(description: "pair: give either a setup code or --url, not both")
        }
        if r.setupCode == nil && r.url == nil {
            throw CLI.UsageError(description: "pair: give a setup code or --url (see `clawvoice pair --help`)")
        }
        if r.token != nil && r.password != nil {
            throw CLI.UsageError(description: "pair: give --token or --password, not both")
        }
        return try await PairingFlow.run(r, paths: paths, config: config, log: log, say: { CLI.say($0) })
    }
}
