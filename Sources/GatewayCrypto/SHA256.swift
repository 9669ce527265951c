// SHA-256 from OpenSSL, so there is one crypto library: the device id is the hash of the public key.

internal import CSSL

/// SHA-256 via OpenSSL's one-shot `EVP_Digest`.
public enum SHA256 {
    public static func digest(_ bytes: some Collection<UInt8>) -> [UInt8] {
        let input = Array(bytes)
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let ok = input.withUnsafeBytes { raw in
            EVP_Digest(raw.baseAddress, raw.count, &out, &length, EVP_sha256(), nil)
        }
        // EVP_Digest with the built-in SHA-256 only fails on allocation failure.
        precondition(ok == 1 && length == 32, "EVP_Digest(SHA-256) failed")
        return Array(out.prefix(32))
    }
}
