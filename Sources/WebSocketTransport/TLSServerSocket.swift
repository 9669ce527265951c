// The OpenSSL edge of this module, part 3: TLS on an accepted, blocking socket, for the loopback
// gateway's plain-socket HTTP route (the realtime call's offer broker) when it runs with TLS.
// The WebSocket server's TLS is libwebsockets'; this is for the threads that serve one request.
internal import CSSL

/// A server certificate and key, checked once at init; `accept` wraps one connected socket.
/// No SSL_CTX is kept between calls (each accept loads its own, which its SSL holds and frees):
/// so nothing C is shared between the threads that serve, and the type is plainly Sendable.
/// The route it serves takes one or two requests per call, so loading the files again is free.
public final class TLSServerContext: Sendable {
    private let certificatePEMPath: String
    private let privateKeyPEMPath: String

    public init(certificatePEMPath: String, privateKeyPEMPath: String) throws(TLSCertificateError) {
        self.certificatePEMPath = certificatePEMPath
        self.privateKeyPEMPath = privateKeyPEMPath
        SSL_CTX_free(try Self.makeContext(certificatePEMPath, privateKeyPEMPath))
    }

    private static func makeContext(_ certificatePEMPath: String, _ privateKeyPEMPath: String) throws(TLSCertificateError) -> OpaquePointer {
        guard let context = SSL_CTX_new(TLS_server_method()) else { throw .openSSL("SSL_CTX_new") }
        guard SSL_CTX_use_certificate_chain_file(context, certificatePEMPath) == 1 else {
            SSL_CTX_free(context)
            throw .openSSL("SSL_CTX_use_certificate_chain_file(\(certificatePEMPath))")
        }
        guard SSL_CTX_use_PrivateKey_file(context, privateKeyPEMPath, SSL_FILETYPE_PEM) == 1,
              SSL_CTX_check_private_key(context) == 1 else {
            SSL_CTX_free(context)
            throw .openSSL("SSL_CTX_use_PrivateKey_file(\(privateKeyPEMPath))")
        }
        return context
    }

    /// The server side of the handshake on `fd` (blocking; its SO_RCVTIMEO bounds the wait).
    /// The socket stays the caller's to close.
    public func accept(socket fd: Int32) throws(TLSCertificateError) -> TLSServerConnection {
        let context = try Self.makeContext(certificatePEMPath, privateKeyPEMPath)
        // The SSL takes its own reference to the context; ours ends here.
        defer { SSL_CTX_free(context) }
        guard let ssl = SSL_new(context) else { throw .openSSL("SSL_new") }
        guard SSL_set_fd(ssl, fd) == 1 else {
            SSL_free(ssl)
            throw .openSSL("SSL_set_fd")
        }
        guard SSL_accept(ssl) == 1 else {
            let error = TLSCertificateError.openSSL("SSL_accept")
            SSL_free(ssl)
            throw error
        }
        return TLSServerConnection(ssl: ssl)
    }
}

/// One accepted TLS connection on a blocking socket; used by one thread.
public final class TLSServerConnection {
    private let ssl: OpaquePointer  // SSL *

    init(ssl: OpaquePointer) { self.ssl = ssl }

    deinit { SSL_free(ssl) }

    /// Decrypted bytes into `buffer`: the count, 0 when the peer closed, -1 on an error or timeout.
    public func read(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        let n = SSL_read(ssl, buffer.baseAddress, Int32(clamping: buffer.count))
        if n > 0 { return Int(n) }
        let error = SSL_get_error(ssl, n)
        ERR_clear_error()
        return error == SSL_ERROR_ZERO_RETURN ? 0 : -1
    }

    /// Writes all of `bytes`; false when the connection broke.
    public func write(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { SSL_write(ssl, $0.baseAddress! + offset, Int32(clamping: bytes.count - offset)) }
            guard n > 0 else { ERR_clear_error(); return false }
            offset += Int(n)
        }
        return true
    }

    /// Sends close_notify (best effort) before the caller closes the socket.
    public func shutdown() {
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
    }
}
