// The node's Ed25519 device identity (spec 2.3) and the exact string it signs (spec 2.4).
// This is the only file that calls OpenSSL's signing API. The seed never appears in any
// description, mirror or error: it leaves this type only through `privateSeed`, for the store.

internal import CSSL
import GatewayProtocol

/// Why an identity operation failed: the OpenSSL call and OpenSSL's own reason. Never key bytes.
public enum IdentityError: Error, Sendable, CustomStringConvertible, Equatable {
    /// A seed must be exactly 32 bytes.
    case invalidSeedLength(Int)
    /// An OpenSSL call returned failure; `reason` is from `ERR_error_string_n`.
    case openssl(call: String, reason: String)

    public var description: String {
        switch self {
        case .invalidSeedLength(let n):
            return "Ed25519 seed must be 32 bytes, got \(n)"
        case .openssl(let call, let reason):
            return "\(call) failed: \(reason)"
        }
    }

    /// Drains OpenSSL's thread-local error queue into one error for `call`.
    static func fromQueue(_ call: String) -> IdentityError {
        var reason = "no OpenSSL error recorded"
        var code = ERR_get_error()
        if code != 0 {
            var buf = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buf, buf.count)
            reason = String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        // Leave the queue empty so a later failure is not blamed on this one.
        while code != 0 { code = ERR_get_error() }
        return .openssl(call: call, reason: reason)
    }
}

/// An Ed25519 key pair. The device id (= node id) is the SHA-256 of the raw public key.
public struct DeviceIdentity: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// DER prefix of an Ed25519 SubjectPublicKeyInfo; the raw key follows it (spec 2.3).
    public static let spkiPrefix: [UInt8] = [0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00]

    private let seed: [UInt8]
    /// Raw 32-byte Ed25519 public key.
    public let publicKey: [UInt8]

    /// Builds the key pair from a 32-byte private seed.
    public init(seed: [UInt8]) throws(IdentityError) {
        guard seed.count == 32 else { throw .invalidSeedLength(seed.count) }
        let pkey = try Self.privateKey(seed)
        defer { EVP_PKEY_free(pkey) }
        self.seed = seed
        self.publicKey = try Self.rawPublicKey(pkey)
    }

    /// A fresh key pair from OpenSSL's CSPRNG.
    public static func generate() throws(IdentityError) -> DeviceIdentity {
        ERR_clear_error()
        guard let ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nil) else { throw .fromQueue("EVP_PKEY_CTX_new_id") }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_keygen_init(ctx) == 1 else { throw .fromQueue("EVP_PKEY_keygen_init") }
        var pkey: OpaquePointer?
        guard EVP_PKEY_keygen(ctx, &pkey) == 1, let pkey else { throw .fromQueue("EVP_PKEY_keygen") }
        defer { EVP_PKEY_free(pkey) }
        var seed = [UInt8](repeating: 0, count: 32)
        var length = seed.count
        guard EVP_PKEY_get_raw_private_key(pkey, &seed, &length) == 1, length == 32 else {
            throw .fromQueue("EVP_PKEY_get_raw_private_key")
        }
        return try DeviceIdentity(seed: seed)
    }

    /// The 32-byte private seed. Only the store should read this.
    public var privateSeed: [UInt8] { seed }

    /// Lowercase hex SHA-256 of the raw public key: `device.id` and the node id.
    public var deviceId: String { Hex.encode(SHA256.digest(publicKey)) }

    /// `device.publicKey`: the raw key, base64url without padding.
    public var publicKeyBase64URL: String { Base64URL.encode(publicKey) }

    /// Signs the UTF-8 bytes of `message` (pure Ed25519, no pre-hash); base64url, no padding.
    public func sign(_ message: String) throws(IdentityError) -> String {
        let pkey = try Self.privateKey(seed)
        defer { EVP_PKEY_free(pkey) }
        guard let ctx = EVP_MD_CTX_new() else { throw .fromQueue("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(ctx) }
        // Ed25519 takes no digest: md must be NULL and the one-shot EVP_DigestSign must be used.
        guard EVP_DigestSignInit(ctx, nil, nil, nil, pkey) == 1 else { throw .fromQueue("EVP_DigestSignInit") }
        let bytes = Array(message.utf8)
        var signature = [UInt8](repeating: 0, count: 64)
        var length = signature.count
        guard EVP_DigestSign(ctx, &signature, &length, bytes, bytes.count) == 1, length == 64 else {
            throw .fromQueue("EVP_DigestSign")
        }
        return Base64URL.encode(signature)
    }

    /// Checks an Ed25519 signature the way the gateway does. `publicKey` may be the raw
    /// 32 bytes or a DER SubjectPublicKeyInfo; `signature` may be base64url or base64.
    public static func verify(publicKey: [UInt8], message: String, signature: String) -> Bool {
        guard let sig = Base64URL.decode(signature), sig.count == 64 else { return false }
        ERR_clear_error()
        defer { ERR_clear_error() }
        let pkey: OpaquePointer?
        if publicKey.count == 32 {
            pkey = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, publicKey, publicKey.count)
        } else {
            pkey = publicKey.withUnsafeBufferPointer { buf -> OpaquePointer? in
                var cursor: UnsafePointer<UInt8>? = buf.baseAddress
                return d2i_PUBKEY(nil, &cursor, buf.count)
            }
        }
        guard let pkey else { return false }
        defer { EVP_PKEY_free(pkey) }
        guard EVP_PKEY_get_base_id(pkey) == EVP_PKEY_ED25519 else { return false }
        guard let ctx = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestVerifyInit(ctx, nil, nil, nil, pkey) == 1 else { return false }
        let bytes = Array(message.utf8)
        return EVP_DigestVerify(ctx, sig, sig.count, bytes, bytes.count) == 1
    }

    public var description: String { "DeviceIdentity(deviceId: \(deviceId), privateKey: <redacted>)" }
    public var debugDescription: String { description }
    // dump() and Mirror would otherwise walk the stored seed.
    public var customMirror: Mirror {
        Mirror(self, children: ["deviceId": deviceId, "publicKey": publicKeyBase64URL], displayStyle: .struct)
    }

    private static func privateKey(_ seed: [UInt8]) throws(IdentityError) -> OpaquePointer {
        ERR_clear_error()
        guard let pkey = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, seed, seed.count) else {
            throw .fromQueue("EVP_PKEY_new_raw_private_key")
        }
        return pkey
    }

    private static func rawPublicKey(_ pkey: OpaquePointer) throws(IdentityError) -> [UInt8] {
        var key = [UInt8](repeating: 0, count: 32)
        var length = key.count
        guard EVP_PKEY_get_raw_public_key(pkey, &key, &length) == 1, length == 32 else {
            throw .fromQueue("EVP_PKEY_get_raw_public_key")
        }
        return key
    }
}

/// The `|`-joined string a device signs in `connect` (spec 2.4).
public enum DeviceAuthPayload {
    /// v3 binds platform and device family; v2 is for gateways that verify only v2.
    public enum Version: String, Sendable, CaseIterable {
        case v2
        case v3
    }

    /// Builds the payload. `token` is whatever goes first among `auth.token`,
    /// `auth.deviceToken`, `auth.bootstrapToken`, or "" when no auth is sent.
    /// `platform` and `deviceFamily` are used only by v3.
    public static func build(
        version: Version,
        deviceId: String,
        clientId: String,
        clientMode: String,
        role: String,
        scopes: [String],
        signedAtMs: Int64,
        token: String,
        nonce: String,
        platform: String?,
        deviceFamily: String?
    ) -> String {
        var fields = [
            version.rawValue, deviceId, clientId, clientMode, role,
            scopes.joined(separator: ","), String(signedAtMs), token, nonce,
        ]
        if version == .v3 {
            fields.append(normalizeMetadata(platform))
            fields.append(normalizeMetadata(deviceFamily))
        }
        return fields.joined(separator: "|")
    }

    /// Trim, then lowercase A–Z only. Locale or Unicode folding would change bytes the
    /// server does not change (for example "İ") and break verification.
    public static func normalizeMetadata(_ s: String?) -> String {
        guard let s else { return "" }
        let trimmed = s.unicodeScalars
            .drop { $0.properties.isWhitespace }
            .reversed().drop { $0.properties.isWhitespace }.reversed()
        var out = String.UnicodeScalarView()
        for scalar in trimmed {
            if scalar.value >= 0x41, scalar.value <= 0x5A, let lower = Unicode.Scalar(scalar.value + 0x20) {
                out.append(lower)
            } else {
                out.append(scalar)
            }
        }
        return String(out)
    }
}
