// The OpenSSL edge of this module, part 2: one client TLS connection driven through memory
// BIOs. The service thread feeds it ciphertext from the socket and writes out whatever
// ciphertext it produces; lws only moves bytes. (lws 4.1.6 cannot do TLS on a raw client
// connection, and its ws client rewrites close codes, see WebSocketClientConnection.)
internal import CSSL
internal import CWebsockets

/// A TLS 1.2+ client session over memory BIOs. Owned by one thread; not Sendable.
///
/// Verification: without a pin, the chain must verify against the system CAs and the leaf
/// must name the host (DNS name or IP address); the handshake completes either way and the
/// caller checks ``verificationFailure`` before writing anything. With a pin, the
/// caller compares ``peerLeafSHA256`` with the pin once the handshake completes, before any
/// application byte is written; a self-signed, expired or differently named leaf is fine then.
final class TLSClientSession {
    enum HandshakeStatus: Equatable {
        case inProgress
        case complete
        case failed(String)
    }

    private let context: OpaquePointer   // SSL_CTX *
    private let ssl: OpaquePointer       // SSL *, owns both BIOs
    private let readBIO: OpaquePointer   // ciphertext from the socket goes in here
    private let writeBIO: OpaquePointer  // ciphertext for the socket comes out of here
    private(set) var isEstablished = false

    private let verifies: Bool

    init(host: String, verifyWithSystemTrust: Bool) throws(TLSCertificateError) {
        verifies = verifyWithSystemTrust
        guard let context = SSL_CTX_new(TLS_client_method()) else { throw .openSSL("SSL_CTX_new") }
        if verifyWithSystemTrust && SSL_CTX_set_default_verify_paths(context) != 1 {
            SSL_CTX_free(context)
            throw .openSSL("SSL_CTX_set_default_verify_paths")
        }
        guard let ssl = SSL_new(context) else {
            SSL_CTX_free(context)
            throw .openSSL("SSL_new")
        }
        guard let readBIO = BIO_new(BIO_s_mem()), let writeBIO = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            SSL_CTX_free(context)
            throw .openSSL("BIO_new(BIO_s_mem)")
        }
        SSL_set_bio(ssl, readBIO, writeBIO)
        self.context = context
        self.ssl = ssl
        self.readBIO = readBIO
        self.writeBIO = writeBIO
        SSL_set_connect_state(ssl)

        let isIPLiteral = IPAddress.isIPv6(host) || IPAddress.isIPv4(host)
        // OpenSSL verifies the chain (and the host) either way, but SSL_VERIFY_NONE lets the
        // handshake finish so the leaf's fingerprint can be shown when it does not verify. The
        // caller refuses the connection on `verificationFailure` before any application byte,
        // exactly as it does for a pin mismatch.
        SSL_set_verify(ssl, SSL_VERIFY_NONE, nil)
        if verifyWithSystemTrust {
            let bound = isIPLiteral ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) : SSL_set1_host(ssl, host)
            guard bound == 1 else { throw .openSSL(isIPLiteral ? "X509_VERIFY_PARAM_set1_ip_asc(\(host))" : "SSL_set1_host(\(host))") }
        }
        // SNI carries DNS names only (RFC 6066 §3).
        if !isIPLiteral && cv_ssl_set_tlsext_host_name(ssl, host) != 1 {
            throw .openSSL("SSL_set_tlsext_host_name(\(host))")
        }
        // HTTP/1.1 only: a proxy that picked h2 would expect WebSocket over HTTP/2.
        let alpn: [UInt8] = [8] + Array("http/1.1".utf8)
        guard SSL_set_alpn_protos(ssl, alpn, UInt32(alpn.count)) == 0 else { throw .openSSL("SSL_set_alpn_protos") }
    }

    deinit {
        SSL_free(ssl)
        SSL_CTX_free(context)
    }

    /// Hands ciphertext that arrived from the socket to OpenSSL.
    func receive(ciphertext: UnsafeRawBufferPointer) {
        guard let base = ciphertext.baseAddress, ciphertext.count > 0 else { return }
        var offset = 0
        while offset < ciphertext.count {
            let n = BIO_write(readBIO, base + offset, Int32(clamping: ciphertext.count - offset))
            if n <= 0 { break }  // a memory BIO only refuses when out of memory
            offset += Int(n)
        }
    }

    /// Advances the handshake with what has arrived so far.
    func continueHandshake() -> HandshakeStatus {
        guard !isEstablished else { return .complete }
        let result = SSL_do_handshake(ssl)
        if result == 1 {
            isEstablished = true
            return .complete
        }
        let error = SSL_get_error(ssl, result)
        if error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE { return .inProgress }
        return .failed(failureDescription(call: "SSL_do_handshake", error: error))
    }

    /// The `.ended` reason of a clean end: the peer's close_notify.
    static let closeNotify = "server closed the TLS session"

    enum ReadResult {
        /// Decrypted bytes (possibly none: a partial record or a post-handshake message).
        case data([UInt8])
        /// The peer sent close_notify, or the TLS stream broke; plus any bytes before that.
        case ended([UInt8], String)
    }

    /// Decrypts everything that can be decrypted now.
    func readPlaintext() -> ReadResult {
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            let n = chunk.withUnsafeMutableBytes { SSL_read(ssl, $0.baseAddress, Int32($0.count)) }
            if n > 0 {
                output.append(contentsOf: chunk[..<Int(n)])
                continue
            }
            let error = SSL_get_error(ssl, n)
            if error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE { return .data(output) }
            if error == SSL_ERROR_ZERO_RETURN { return .ended(output, Self.closeNotify) }
            return .ended(output, failureDescription(call: "SSL_read", error: error))
        }
    }

    /// Encrypts application bytes into the write BIO; nil on success, else the reason.
    func write(plaintext: [UInt8]) -> String? {
        var offset = 0
        while offset < plaintext.count {
            let n = plaintext.withUnsafeBytes { buffer in
                SSL_write(ssl, buffer.baseAddress! + offset, Int32(clamping: plaintext.count - offset))
            }
            if n <= 0 { return failureDescription(call: "SSL_write", error: SSL_get_error(ssl, n)) }
            offset += Int(n)
        }
        return nil
    }

    /// Queues a close_notify alert (best effort, before the socket closes).
    func shutdown() {
        if isEstablished { _ = SSL_shutdown(ssl) }
        ERR_clear_error()
    }

    /// Removes and returns all ciphertext waiting to go to the socket.
    func takeCiphertext() -> [UInt8] {
        let pending = Int(BIO_ctrl_pending(writeBIO))
        guard pending > 0 else { return [] }
        var bytes = [UInt8](repeating: 0, count: pending)
        let n = bytes.withUnsafeMutableBytes { BIO_read(writeBIO, $0.baseAddress, Int32(clamping: pending)) }
        return n > 0 ? Array(bytes[..<Int(n)]) : []
    }

    /// Why the chain or host did not verify (OpenSSL's words, e.g. "self-signed certificate"),
    /// once the handshake is done; nil when verification passed or was not asked for (a pin).
    var verificationFailure: String? {
        guard verifies else { return nil }
        let verify = SSL_get_verify_result(ssl)
        return verify == Int(X509_V_OK) ? nil : String(cString: X509_verify_cert_error_string(verify))
    }

    /// SHA-256 of the server's leaf certificate, 64 lowercase hex digits.
    var peerLeafSHA256: String? { TLSCertificateFingerprint.sha256Hex(peerOf: ssl) }

    private func failureDescription(call: String, error: Int32) -> String {
        let verify = SSL_get_verify_result(ssl)
        if verify != Int(X509_V_OK) {
            return "TLS certificate verification failed: \(String(cString: X509_verify_cert_error_string(verify)))"
        }
        let code = ERR_get_error()
        ERR_clear_error()
        if code != 0 {
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            return "\(call): \(String(nulTerminated: buffer))"
        }
        return error == SSL_ERROR_SYSCALL ? "\(call): connection ended during TLS" : "\(call) failed (SSL_get_error \(error))"
    }
}
