import Foundation
import Testing
@testable import WebSocketTransport

struct TLSTests {
    /// A self-signed identity in a scratch directory and its fingerprint.
    struct Identity {
        let directory: TemporaryDirectory
        let cert: String
        let key: String
        let fingerprint: String

        init() throws {
            directory = try TemporaryDirectory()
            cert = directory.file("cert.pem")
            key = directory.file("key.pem")
            try SelfSignedCertificate.generate(commonName: "clawvoice-test", certPath: cert, keyPath: key)
            fingerprint = try TLSCertificateFingerprint.sha256Hex(pemFile: cert)
        }

        var serverOptions: WebSocketServerOptions {
            WebSocketServerOptions(tlsCertificatePEMPath: cert, tlsPrivateKeyPEMPath: key)
        }
    }

    @Test func `a generated certificate is PEM with a private key readable only by its owner`() throws {
        let identity = try Identity()
        let certText = try String(contentsOfFile: identity.cert, encoding: .utf8)
        let keyText = try String(contentsOfFile: identity.key, encoding: .utf8)
        #expect(certText.hasPrefix("-----BEGIN CERTIFICATE-----"))
        #expect(keyText.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let mode = try FileManager.default.attributesOfItem(atPath: identity.key)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        #expect(identity.fingerprint.count == 64)
        #expect(identity.fingerprint.allSatisfy { $0.isHexDigit && !$0.isUppercase })
        #expect(try TLSCertificateFingerprint.sha256Hex(pemFile: identity.cert) == identity.fingerprint)
        let other = try Identity()
        #expect(other.fingerprint != identity.fingerprint)
    }

    @Test func `reading a missing or non-PEM file names the failing call`() throws {
        let directory = try TemporaryDirectory()
        #expect {
            try TLSCertificateFingerprint.sha256Hex(pemFile: directory.file("absent.pem"))
        } throws: { error in
            (error as? TLSCertificateError)?.description.contains("BIO_new_file") == true
        }
        let junk = directory.file("junk.pem")
        try "not a certificate".write(toFile: junk, atomically: true, encoding: .utf8)
        #expect {
            try TLSCertificateFingerprint.sha256Hex(pemFile: junk)
        } throws: { error in
            (error as? TLSCertificateError)?.description.contains("PEM_read_bio_X509") == true
        }
    }

    @Test func `a client pinned to the server's leaf connects over TLS and exchanges messages`() async throws {
        let identity = try Identity()
        let pair = try await LoopbackPair.open(
            path: "/secure",
            serverOptions: identity.serverOptions,
            clientOptions: WebSocketClientOptions(tlsPinSHA256: "sha256:" + identity.fingerprint.uppercased())
        )
        defer { pair.server.shutdown(grace: .zero) }
        #expect(pair.client.url.secure)

        pair.client.send(.text("over tls"))
        let atServer = await pair.serverEvents.wait(for: "TLS message at the server") { events in
            events.lazy.compactMap { $0.message(from: pair.id) }.first
        }
        #expect(atServer == .text("over tls"))
        let big = patternBytes(count: 1 << 20)
        pair.server.send(.binary(big), to: pair.id)
        let atClient = await pair.clientEvents.wait(for: "1 MiB over TLS at the client", timeout: .seconds(10)) { events in
            events.lazy.compactMap(\.message).first
        }
        #expect(atClient == .binary(big))

        pair.server.close(pair.id, code: 1012, reason: "service restart")
        await pair.clientEvents.waitForEnd()
        #expect(pair.clientEvents.events.last == .closed(code: 1012, reason: "service restart"))
    }

    @Test func `a wrong pin fails with both fingerprints before anything is exchanged`() async throws {
        let identity = try Identity()
        let server = try WebSocketServer(options: identity.serverOptions)
        defer { server.shutdown(grace: .zero) }
        let serverEvents = EventRecorder(server.events)
        let wrongPin = String(repeating: "0f", count: 32)
        let client = try WebSocketClient(
            url: WebSocketURL(parsing: "wss://127.0.0.1:\(server.port)/"),
            options: WebSocketClientOptions(tlsPinSHA256: wrongPin)
        )
        let events = EventRecorder(client.events)
        client.send(.text("must never be sent"))
        client.connect()
        #expect(await events.waitForEnd())
        #expect(events.events == [.failed(.tlsPinMismatch(expected: wrongPin, actual: identity.fingerprint))])
        let description = WebSocketError.tlsPinMismatch(expected: wrongPin, actual: identity.fingerprint).description
        #expect(description.contains(wrongPin) && description.contains(identity.fingerprint))
        #expect(client.waitUntilStopped(timeout: .seconds(5)))
        // The upgrade request was never sent, so the server never saw a WebSocket connection.
        #expect(!serverEvents.events.contains { $0.connectedID != nil })
    }

    @Test func `without a pin a self-signed server fails system verification`() async throws {
        let identity = try Identity()
        let server = try WebSocketServer(options: identity.serverOptions)
        defer { server.shutdown(grace: .zero) }
        let client = try WebSocketClient(url: WebSocketURL(parsing: "wss://127.0.0.1:\(server.port)/"))
        let events = EventRecorder(client.events)
        client.connect()
        #expect(await events.waitForEnd())
        // It names the certificate it refused (issue 11, item 6), so the user can pin it.
        guard case .failed(.untrustedCertificate(_, let why, let sha256))? = events.events.last, events.events.count == 1 else {
            Issue.record("expected a single untrustedCertificate, got \(events.events)")
            return
        }
        #expect(why.contains("self-signed certificate"))
        #expect(sha256 == identity.fingerprint)
    }

    @Test func `a plain client talking to a TLS server fails instead of hanging`() async throws {
        let identity = try Identity()
        let server = try WebSocketServer(options: identity.serverOptions)
        defer { server.shutdown(grace: .zero) }
        var options = WebSocketClientOptions()
        options.connectTimeout = .seconds(2)
        let client = try WebSocketClient(url: WebSocketURL(parsing: "ws://127.0.0.1:\(server.port)/"), options: options)
        let events = EventRecorder(client.events)
        client.connect()
        #expect(await events.waitForEnd(timeout: .seconds(5)))
        guard case .failed(.connectFailed)? = events.events.last else {
            Issue.record("expected connectFailed, got \(events.events)")
            return
        }
    }

    @Test func `a server with an unreadable certificate fails to listen and names the file`() throws {
        let directory = try TemporaryDirectory()
        #expect {
            try WebSocketServer(options: WebSocketServerOptions(
                tlsCertificatePEMPath: directory.file("missing-cert.pem"), tlsPrivateKeyPEMPath: directory.file("missing-key.pem")))
        } throws: { error in
            guard case .listenFailed(let why) = error as? WebSocketError else { return false }
            return why.contains("missing-cert.pem")
        }
        #expect(throws: WebSocketError.listenFailed("TLS needs both a certificate and a private key path")) {
            try WebSocketServer(options: WebSocketServerOptions(tlsCertificatePEMPath: directory.file("c.pem")))
        }
    }
}
