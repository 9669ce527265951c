// What `pair` says and does when a wss:// gateway's certificate does not verify and no pin was
// given (self-signed gateways are the common case): show the SHA-256 fingerprint and the exact
// command that pins it, or, on a terminal, offer to trust it now (trust on first use).

import ClawvoiceCore
import Foundation
import GatewayCrypto
import WebSocketTransport
import NodeRuntime
import Daemon
#if canImport(Glibc)
import Glibc
#endif

enum TLSTrust {
    /// `aa11…` as `AA:11:…`, the form `openssl x509 -fingerprint -sha256` prints on the gateway host.
    static func colonForm(_ hex: String) -> String {
        var pairs: [String] = []
        var i = hex.startIndex
        while i < hex.endIndex {
            let j = hex.index(i, offsetBy: 2, limitedBy: hex.endIndex) ?? hex.endIndex
            pairs.append(hex[i..<j].uppercased())
            i = j
        }
        return pairs.joined(separator: ":")
    }

    /// The command that pairs again with the certificate pinned. Secrets are never repeated in it.
    /// With a setup code the code is not repeated (it holds a bootstrap token): `<setup-code>`.
    static func pinCommand(url: String, fingerprint: String, secretFlag: String?, setupCode: Bool = false) -> String {
        (setupCode ? "clawvoice pair <setup-code>" : "clawvoice pair --url \(url)") + " --tls-fingerprint \(fingerprint)"
            + (secretFlag.map { " \($0)" } ?? "")
    }

    /// The one line `pair` ends with when it may not trust the certificate.
    static func refusal(host: String, reason: String, fingerprint: String?, setupCode: Bool = false, url: String,
                        secretFlag: String?) -> String {
        guard let fingerprint else {
            return "the TLS certificate of \(host) is not trusted (\(reason)) and it sent none to pin"
        }
        return "the TLS certificate of \(host) is not trusted (\(reason)); its SHA-256 fingerprint is \(colonForm(fingerprint)). "
            + "Check it on the gateway host (openssl x509 -in CERT -noout -fingerprint -sha256) and, if it matches, pin it: "
            + pinCommand(url: url, fingerprint: fingerprint, secretFlag: secretFlag, setupCode: setupCode)
    }

    /// The question asked on a terminal.
    static func question(host: String, reason: String, fingerprint: String) -> String {
        "The TLS certificate of \(host) is not trusted (\(reason)).\n"
            + "SHA-256 fingerprint: \(colonForm(fingerprint))\n"
            + "Compare it with `openssl x509 -in CERT -noout -fingerprint -sha256` on the gateway host.\n"
            + "Trust this certificate and pin it? [y/N] "
    }

    /// Whether the answer typed is a yes.
    static func isYes(_ answer: String?) -> Bool {
        guard let a = answer?.trimmingCharacters(in: .whitespaces).lowercased() else { return false }
        return a == "y" || a == "yes"
    }

    /// Asks on the terminal (stdin and stderr both terminals); nil when there is no terminal to ask on.
    static func terminalConfirm() -> (@Sendable (String) -> Bool)? {
        guard isatty(0) == 1 && isatty(2) == 1 else { return nil }
        return { question in
            FileHandle.standardError.write(Data(question.utf8))
            return isYes(Swift.readLine(strippingNewline: true))
        }
    }

    /// Connects once without a pin and returns the transport's first failure, if any (nil when
    /// the TLS handshake and upgrade went through, or nothing was decided within `timeout`).
    static func firstFailure(_ url: String, allowInsecure: Bool, timeout: Duration = .seconds(4)) async -> WebSocketError? {
        guard let parsed = try? WebSocketURL(parsing: url) else { return nil }
        var o = WebSocketClientOptions()
        o.allowInsecureRemote = allowInsecure
        guard let client = try? WebSocketClient(url: parsed, options: o) else { return nil }
        client.connect()
        // The first event decides: a failure is the answer, anything else means none.
        let result = await ConnectProbe.first(client, within: timeout, ended: nil) { e -> WebSocketError?? in
            if case .failed(let err) = e { return .some(err) }
            return .some(nil)
        } ?? nil
        client.close(code: 1000, reason: "probe")
        return result
    }
}
