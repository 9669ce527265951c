// Rows of the store as Sendable values. Descriptions redact every credential.

/// A configured gateway.
public struct GatewayRecord: Sendable, Equatable, CustomStringConvertible {
    /// User-chosen name; the primary key.
    public var name: String
    /// `ws://` or `wss://` URL.
    public var url: String
    /// Pinned certificate SHA-256 (64 lowercase hex), if any.
    public var tlsFingerprint: String?
    /// The user accepted plaintext `ws://` to a non-loopback host.
    public var allowInsecure: Bool
    /// Setup-code token, kept only until the first device token arrives.
    public var bootstrapToken: String?
    /// Explicit shared gateway token configured by the user.
    public var sharedToken: String?
    /// Gateway password configured by the user.
    public var password: String?
    /// Whether this is the gateway the node connects to. At most one is active.
    public var isActive: Bool
    /// The session key hello-ok named as main, for the operator connection.
    public var mainSessionKey: String?
    /// When the gateway was first added, Unix milliseconds. Kept across upserts.
    public var addedAtMs: Int64

    public init(
        name: String, url: String, tlsFingerprint: String? = nil, allowInsecure: Bool = false,
        bootstrapToken: String? = nil, sharedToken: String? = nil, password: String? = nil,
        isActive: Bool = false, mainSessionKey: String? = nil, addedAtMs: Int64
    ) {
        self.name = name
        self.url = url
        self.tlsFingerprint = tlsFingerprint
        self.allowInsecure = allowInsecure
        self.bootstrapToken = bootstrapToken
        self.sharedToken = sharedToken
        self.password = password
        self.isActive = isActive
        self.mainSessionKey = mainSessionKey
        self.addedAtMs = addedAtMs
    }

    public var description: String {
        func secret(_ s: String?) -> String { s == nil ? "nil" : "<redacted>" }
        return "GatewayRecord(name: \(name), url: \(url), tlsFingerprint: \(tlsFingerprint ?? "nil"), "
            + "allowInsecure: \(allowInsecure), bootstrapToken: \(secret(bootstrapToken)), "
            + "sharedToken: \(secret(sharedToken)), password: \(secret(password)), isActive: \(isActive), "
            + "mainSessionKey: \(mainSessionKey ?? "nil"), addedAtMs: \(addedAtMs))"
    }
}

/// A device token the gateway issued in hello-ok, stored per gateway and role.
public struct DeviceToken: Sendable, Equatable, CustomStringConvertible {
    public var token: String
    public var role: String
    public var scopes: [String]
    /// Unix milliseconds of the last save.
    public var updatedAtMs: Int64

    public init(token: String, role: String, scopes: [String], updatedAtMs: Int64) {
        self.token = token
        self.role = role
        self.scopes = scopes
        self.updatedAtMs = updatedAtMs
    }

    public var description: String {
        "DeviceToken(role: \(role), scopes: \(scopes), updatedAtMs: \(updatedAtMs), token: <redacted>)"
    }
}
