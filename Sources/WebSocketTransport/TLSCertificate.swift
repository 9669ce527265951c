// The OpenSSL edge of this module, part 1: digests, certificate fingerprints (for pinning)
// and the self-signed certificate the loopback gateway and the tests serve TLS with.
// Part 2, the client's TLS connection, is TLSClientSession.swift; part 3, TLS on a served
// blocking socket, TLSServerSocket.swift; no other file calls OpenSSL.
internal import CSSL
internal import Foundation

/// A failed OpenSSL or file operation; `call` names the C function, `detail` is OpenSSL's
/// own error string (or errno's).
public struct TLSCertificateError: Error, Sendable, Equatable, CustomStringConvertible {
    public let call: String
    public let detail: String

    public var description: String { "\(call) failed: \(detail)" }

    /// Captures (and clears) OpenSSL's error queue right after `call` failed.
    static func openSSL(_ call: String) -> TLSCertificateError {
        let code = ERR_get_error()
        ERR_clear_error()
        guard code != 0 else { return TLSCertificateError(call: call, detail: "no OpenSSL error recorded") }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        return TLSCertificateError(call: call, detail: String(nulTerminated: buffer))
    }
}

/// One-shot digests.
enum Digest {
    /// SHA-1, for the WebSocket accept key only (RFC 6455 §4.2.2); nothing here relies on
    /// its collision resistance.
    static func sha1(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        guard EVP_Digest(bytes, bytes.count, &digest, &length, EVP_sha1(), nil) == 1 else { return [] }
        return Array(digest[..<Int(length)])
    }
}

/// SHA-256 fingerprints of X.509 certificates in the pin format: 64 lowercase hex digits over
/// the leaf certificate's DER encoding.
public enum TLSCertificateFingerprint {
    /// The fingerprint of the first certificate in a PEM file.
    public static func sha256Hex(pemFile: String) throws(TLSCertificateError) -> String {
        guard let bio = BIO_new_file(pemFile, "r") else {
            throw TLSCertificateError(call: "BIO_new_file(\(pemFile))", detail: String(cString: strerror(errno)))
        }
        defer { BIO_free(bio) }
        guard let certificate = PEM_read_bio_X509(bio, nil, nil, nil) else {
            throw .openSSL("PEM_read_bio_X509(\(pemFile))")
        }
        defer { X509_free(certificate) }
        guard let hex = sha256Hex(certificate: certificate) else { throw .openSSL("i2d_X509") }
        return hex
    }

    /// Canonical pin form: drops a `sha256:` / `sha-256:` prefix, colons and spaces, and
    /// lowercases. Returns nil unless exactly 64 hex digits remain.
    public static func normalize(_ pin: String) -> String? {
        var text = pin.trimmingASCIIWhitespace().lowercased()
        for prefix in ["sha256:", "sha-256:"] where text.hasPrefix(prefix) {
            text.removeFirst(prefix.count)
        }
        text.removeAll { $0 == ":" || $0 == " " }
        guard text.count == 64, text.allSatisfy({ $0.isHexDigit && $0.isASCII }) else { return nil }
        return text
    }

    /// The fingerprint of the peer's leaf certificate on an established TLS connection
    /// (`ssl` is an `SSL *`), or nil if there is none.
    static func sha256Hex(peerOf ssl: OpaquePointer) -> String? {
        guard let certificate = SSL_get1_peer_certificate(ssl) else { return nil }
        defer { X509_free(certificate) }
        return sha256Hex(certificate: certificate)
    }

    static func sha256Hex(certificate: OpaquePointer) -> String? {
        let length = i2d_X509(certificate, nil)
        guard length > 0 else { return nil }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            return i2d_X509(certificate, &cursor)
        }
        guard written == length else { return nil }
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var digestLength: UInt32 = 0
        guard EVP_Digest(der, der.count, &digest, &digestLength, EVP_sha256(), nil) == 1, digestLength == 32 else {
            return nil
        }
        return digest[..<32].map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }
}

/// Creates throwaway self-signed TLS identities for the loopback gateway's TLS mode and the
/// tests: an EC P-256 key and a certificate valid for one day (from a minute ago, to absorb
/// clock skew), with subjectAltName 127.0.0.1, ::1 and localhost (plus the common name if it
/// is another DNS name). Clients trust it by pinning its fingerprint, not through a CA.
public enum SelfSignedCertificate {
    /// Writes the certificate (PEM) to `certPath` and the unencrypted private key (PEM,
    /// mode 0600) to `keyPath`, replacing existing files.
    public static func generate(commonName: String, certPath: String, keyPath: String) throws(TLSCertificateError) {
        let key = try makeP256Key()
        defer { EVP_PKEY_free(key) }

        guard let certificate = X509_new() else { throw .openSSL("X509_new") }
        defer { X509_free(certificate) }
        guard X509_set_version(certificate, 2) == 1 else { throw .openSSL("X509_set_version") }  // 2 = v3

        var serial: Int = 0
        withUnsafeMutableBytes(of: &serial) { _ = RAND_bytes($0.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32($0.count)) }
        serial = (serial & 0x3FFF_FFFF_FFFF_FFFF) | 1  // positive, non-zero
        guard ASN1_INTEGER_set(X509_get_serialNumber(certificate), serial) == 1 else { throw .openSSL("ASN1_INTEGER_set") }
        guard X509_gmtime_adj(X509_getm_notBefore(certificate), -60) != nil,
              X509_gmtime_adj(X509_getm_notAfter(certificate), 86_400) != nil else {
            throw .openSSL("X509_gmtime_adj")
        }
        guard X509_set_pubkey(certificate, key) == 1 else { throw .openSSL("X509_set_pubkey") }

        guard let name = X509_get_subject_name(certificate) else { throw .openSSL("X509_get_subject_name") }
        let cn = Array(commonName.utf8)
        guard X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, cn, Int32(cn.count), -1, 0) == 1 else {
            throw .openSSL("X509_NAME_add_entry_by_txt(CN)")
        }
        guard X509_set_issuer_name(certificate, name) == 1 else { throw .openSSL("X509_set_issuer_name") }

        try addSubjectAltName(to: certificate, extraDNSName: commonName)

        guard X509_sign(certificate, key, EVP_sha256()) > 0 else { throw .openSSL("X509_sign") }

        try writePEM(to: certPath, mode: 0o644, call: "PEM_write_bio_X509") { bio in
            PEM_write_bio_X509(bio, certificate)
        }
        try writePEM(to: keyPath, mode: 0o600, call: "PEM_write_bio_PrivateKey") { bio in
            PEM_write_bio_PrivateKey(bio, key, nil, nil, 0, nil, nil)
        }
    }

    private static func makeP256Key() throws(TLSCertificateError) -> OpaquePointer {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { throw .openSSL("EVP_PKEY_CTX_new_from_name(EC)") }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_keygen_init(context) == 1 else { throw .openSSL("EVP_PKEY_keygen_init") }
        guard EVP_PKEY_CTX_set_group_name(context, "P-256") == 1 else { throw .openSSL("EVP_PKEY_CTX_set_group_name(P-256)") }
        var key: OpaquePointer?
        guard EVP_PKEY_generate(context, &key) == 1, let key else { throw .openSSL("EVP_PKEY_generate") }
        return key
    }

    /// subjectAltName as DER: SEQUENCE OF GeneralName, with iPAddress [7] and dNSName [2]
    /// (both IMPLICIT, primitive). Built by hand because x509v3.h's config-string helpers are
    /// not part of the CSSL module.
    private static func addSubjectAltName(to certificate: OpaquePointer, extraDNSName: String) throws(TLSCertificateError) {
        var names: [UInt8] = []
        func append(tag: UInt8, _ value: [UInt8]) {
            names.append(tag)
            names.append(contentsOf: derLength(value.count))
            names.append(contentsOf: value)
        }
        append(tag: 0x87, [127, 0, 0, 1])
        append(tag: 0x87, [UInt8](repeating: 0, count: 15) + [1])
        append(tag: 0x82, Array("localhost".utf8))
        let extra = extraDNSName.lowercased()
        if extra != "localhost", !extra.isEmpty, !IPAddress.isIPv6(extra), !extra.allSatisfy({ $0.isNumber || $0 == "." }),
           extra.utf8.allSatisfy({ $0 < 0x80 }) {
            append(tag: 0x82, Array(extra.utf8))
        }
        let sequence = [0x30] + derLength(names.count) + names

        guard let octets = ASN1_OCTET_STRING_new() else { throw .openSSL("ASN1_OCTET_STRING_new") }
        defer { ASN1_OCTET_STRING_free(octets) }
        guard ASN1_OCTET_STRING_set(octets, sequence, Int32(sequence.count)) == 1 else { throw .openSSL("ASN1_OCTET_STRING_set") }
        guard let ext = X509_EXTENSION_create_by_NID(nil, NID_subject_alt_name, 0, octets) else {
            throw .openSSL("X509_EXTENSION_create_by_NID(subjectAltName)")
        }
        defer { X509_EXTENSION_free(ext) }
        guard X509_add_ext(certificate, ext, -1) == 1 else { throw .openSSL("X509_add_ext") }
    }

    private static func derLength(_ count: Int) -> [UInt8] {
        if count < 0x80 { return [UInt8(count)] }
        if count < 0x100 { return [0x81, UInt8(count)] }
        return [0x82, UInt8(count >> 8), UInt8(count & 0xFF)]
    }

    private static func writePEM(
        to path: String, mode: mode_t, call: String, _ write: (OpaquePointer) -> Int32
    ) throws(TLSCertificateError) {
        // Create with the final mode so a private key is never briefly world-readable.
        unlink(path)
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode)
        guard fd >= 0 else { throw TLSCertificateError(call: "open(\(path))", detail: String(cString: strerror(errno))) }
        close(fd)
        guard let bio = BIO_new_file(path, "w") else {
            throw TLSCertificateError(call: "BIO_new_file(\(path))", detail: String(cString: strerror(errno)))
        }
        defer { BIO_free(bio) }
        guard write(bio) == 1 else { throw .openSSL(call) }
    }
}
