import GatewayCrypto
import Testing
import GatewayProtocol

/// Spec section 13: the TEST ONLY key with seed 00 01 … 1f.
private enum Vector {
    static let seed = (0..<32).map { UInt8($0) }
    static let publicKeyB64URL = "A6EHv_POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg"
    static let publicKeyB64 = "A6EHv/POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg="
    static let deviceId = "56475aa75463474c0285df5dbf2bcab73da651358839e9b77481b2eab107708c"
    static let nonce = "3f1c2a9e-5b7d-4e21-9c0a-8d6f4b2e1a77"
    static let signedAtMs: Int64 = 1_767_225_600_000
    static let token = "tok_example_shared"

    static let nodeV3 = "v3|\(deviceId)|node-host|node|node||1767225600000|tok_example_shared|\(nonce)|linux|linux"
    static let nodeV3Signature = "NCsOsTCIpU3Np8GJt9UC9aJ-fm8YabH4JKxe266OYClB0_g6rQMto3BtA4Sxoq0maZ2UgYGjl8Dt2iEEmtOHBw"
    static let nodeV2 = "v2|\(deviceId)|node-host|node|node||1767225600000|tok_example_shared|\(nonce)"
    static let nodeV2Signature = "15xo6nzceWGWrTm1HZrNY68hBdr9kBE4_2umju7FZuSZ66vom4_DrrqwFqMplEjHb0wRh9Y_GywVYLStyB0xCA"
    static let operatorV3 = "v3|\(deviceId)|openclaw-linux|ui|operator|operator.read,operator.write|1767225600000|tok_example_shared|\(nonce)|linux|linux"
    static let operatorV3Signature = "63N__4kKQdn5--mDx6baKYakBgjHKjawYmiq_B17m5OofdEQiHlxKBo2RrMyZzT8kCZBF_Gx9oVg9ysVdD9FDw"
    static let spkiPrefixHex = "302a300506032b6570032100"

    static func identity() throws -> DeviceIdentity { try DeviceIdentity(seed: seed) }

    static func nodePayload(_ version: DeviceAuthPayload.Version) -> String {
        DeviceAuthPayload.build(
            version: version, deviceId: deviceId, clientId: "node-host", clientMode: "node", role: "node",
            scopes: [], signedAtMs: signedAtMs, token: token, nonce: nonce, platform: "linux", deviceFamily: "Linux")
    }
}

@Suite struct `Device identity` {
    @Test func `the test seed gives the spec public key in base64url and base64`() throws {
        let identity = try Vector.identity()
        #expect(identity.publicKeyBase64URL == Vector.publicKeyB64URL)
        #expect(Base64URL.decode(Vector.publicKeyB64) == identity.publicKey)
        #expect(Base64URL.decode(Vector.publicKeyB64URL) == identity.publicKey)
    }

    @Test func `device id is lowercase hex sha256 of the raw public key`() throws {
        let identity = try Vector.identity()
        #expect(identity.deviceId == Vector.deviceId)
        #expect(Hex.encode(SHA256.digest(identity.publicKey)) == Vector.deviceId)
    }

    @Test func `node v3 payload and signature match the spec`() throws {
        let payload = Vector.nodePayload(.v3)
        #expect(payload == Vector.nodeV3)
        #expect(try Vector.identity().sign(payload) == Vector.nodeV3Signature)
    }

    @Test func `node v2 payload and signature match the spec`() throws {
        let payload = Vector.nodePayload(.v2)
        #expect(payload == Vector.nodeV2)
        #expect(try Vector.identity().sign(payload) == Vector.nodeV2Signature)
    }

    @Test func `operator v3 payload and signature match the spec`() throws {
        let payload = DeviceAuthPayload.build(
            version: .v3, deviceId: Vector.deviceId, clientId: "openclaw-linux", clientMode: "ui", role: "operator",
            scopes: ["operator.read", "operator.write"], signedAtMs: Vector.signedAtMs, token: Vector.token,
            nonce: Vector.nonce, platform: "linux", deviceFamily: "Linux")
        #expect(payload == Vector.operatorV3)
        #expect(try Vector.identity().sign(payload) == Vector.operatorV3Signature)
    }

    @Test func `spec signatures verify against the raw key and the SPKI-prefixed key alike`() throws {
        let raw = try Vector.identity().publicKey
        let prefix = try #require(Hex.decode(Vector.spkiPrefixHex))
        #expect(DeviceIdentity.spkiPrefix == prefix)
        for key in [raw, prefix + raw] {
            #expect(DeviceIdentity.verify(publicKey: key, message: Vector.nodeV3, signature: Vector.nodeV3Signature))
            #expect(DeviceIdentity.verify(publicKey: key, message: Vector.nodeV2, signature: Vector.nodeV2Signature))
            #expect(DeviceIdentity.verify(publicKey: key, message: Vector.operatorV3, signature: Vector.operatorV3Signature))
        }
    }

    @Test func `a signature in standard base64 with padding also verifies`() throws {
        let raw = try #require(Base64URL.decode(Vector.nodeV3Signature))
        let standard = Base64URL.encode(raw).replacing("-", with: "+").replacing("_", with: "/") + "=="
        #expect(standard != Vector.nodeV3Signature)
        #expect(DeviceIdentity.verify(publicKey: try Vector.identity().publicKey, message: Vector.nodeV3, signature: standard))
    }

    @Test func `a generated identity signs and verifies its own messages`() throws {
        let identity = try DeviceIdentity.generate()
        #expect(identity.privateSeed.count == 32)
        #expect(identity.publicKey.count == 32)
        #expect(identity.deviceId.count == 64)
        let signature = try identity.sign("hello from clawvoice")
        #expect(DeviceIdentity.verify(publicKey: identity.publicKey, message: "hello from clawvoice", signature: signature))
        let again = try DeviceIdentity(seed: identity.privateSeed)
        #expect(again.publicKey == identity.publicKey)
    }

    @Test func `two generated identities differ`() throws {
        #expect(try DeviceIdentity.generate().deviceId != DeviceIdentity.generate().deviceId)
    }

    @Test func `a tampered message or signature fails verification`() throws {
        let key = try Vector.identity().publicKey
        #expect(!DeviceIdentity.verify(publicKey: key, message: Vector.nodeV3 + " ", signature: Vector.nodeV3Signature))
        #expect(!DeviceIdentity.verify(publicKey: key, message: Vector.nodeV2, signature: Vector.nodeV3Signature))
        var bytes = try #require(Base64URL.decode(Vector.nodeV3Signature))
        bytes[10] ^= 0x01
        #expect(!DeviceIdentity.verify(publicKey: key, message: Vector.nodeV3, signature: Base64URL.encode(bytes)))
        #expect(!DeviceIdentity.verify(publicKey: key, message: Vector.nodeV3, signature: "not*base64"))
        #expect(!DeviceIdentity.verify(publicKey: Array(key.prefix(31)), message: Vector.nodeV3, signature: Vector.nodeV3Signature))
    }

    @Test func `description, debug description and dump never show the private seed`() throws {
        let identity = try Vector.identity()
        let seedForms = [
            Hex.encode(Vector.seed), Base64URL.encode(Vector.seed),
            Base64URL.encode(Vector.seed).replacing("-", with: "+").replacing("_", with: "/"),
        ]
        var dumped = ""
        dump(identity, to: &dumped)
        for text in [identity.description, String(reflecting: identity), "\(identity)", dumped] {
            #expect(text.contains(Vector.deviceId))
            for form in seedForms { #expect(!text.contains(form)) }
            #expect(!text.contains("0, 1, 2, 3"))
        }
    }

    @Test func `a seed of the wrong length is rejected without echoing it`() {
        #expect(throws: IdentityError.invalidSeedLength(31)) { try DeviceIdentity(seed: Array(Vector.seed.prefix(31))) }
        #expect(IdentityError.invalidSeedLength(31).description == "Ed25519 seed must be 32 bytes, got 31")
    }
}

@Suite struct `Signed payload` {
    @Test func `v2 matches the Swift kit compatibility payload`() {
        let payload = DeviceAuthPayload.build(
            version: .v2, deviceId: "dev-1", clientId: "openclaw-macos", clientMode: "ui", role: "operator",
            scopes: ["operator.admin", "operator.read"], signedAtMs: 1_800_000_000_000, token: "tok-123",
            nonce: "nonce-abc", platform: "  IOS  ", deviceFamily: "  iPhone  ")
        #expect(payload == "v2|dev-1|openclaw-macos|ui|operator|operator.admin,operator.read|1800000000000|tok-123|nonce-abc")
    }

    @Test func `v3 appends trimmed ASCII-lowercased platform and family`() {
        let payload = DeviceAuthPayload.build(
            version: .v3, deviceId: "dev-1", clientId: "openclaw-macos", clientMode: "ui", role: "operator",
            scopes: ["operator.admin", "operator.read"], signedAtMs: 1_800_000_000_000, token: "tok-123",
            nonce: "nonce-abc", platform: "  IOS  ", deviceFamily: "  iPhone  ")
        #expect(payload == "v3|dev-1|openclaw-macos|ui|operator|operator.admin,operator.read|1800000000000|tok-123|nonce-abc|ios|iphone")
    }

    @Test func `missing platform and family become empty fields`() {
        let payload = DeviceAuthPayload.build(
            version: .v3, deviceId: "d", clientId: "c", clientMode: "m", role: "node", scopes: [],
            signedAtMs: 1, token: "", nonce: "n", platform: nil, deviceFamily: nil)
        #expect(payload == "v3|d|c|m|node||1||n||")
    }

    @Test(arguments: [
        ("İ", "İ"),
        ("  LİNUX ", "lİnux"),
        ("ÄBC", "Äbc"),
        ("\tRaspberry Pi\n", "raspberry pi"),
        ("", ""),
        ("   ", ""),
    ])
    func `metadata normalisation lowercases only A to Z`(input: String, expected: String) {
        #expect(DeviceAuthPayload.normalizeMetadata(input) == expected)
    }
}

@Suite struct `Byte encodings` {
    @Test func `base64url round-trips every length without padding`() {
        for n in 0...20 {
            let bytes = (0..<n).map { UInt8(truncatingIfNeeded: $0 * 37 + 251) }
            let encoded = Base64URL.encode(bytes)
            #expect(!encoded.contains("="))
            #expect(Base64URL.decode(encoded) == bytes)
        }
    }

    @Test(arguments: ["a", "ab*c", "abc===", "ab=c", "a=", "abcde", "ab c"])
    func `base64 decoding rejects bad characters, padding and lengths`(input: String) {
        #expect(Base64URL.decode(input) == nil)
    }

    @Test func `hex encodes lowercase and decodes either case`() {
        #expect(Hex.encode([0x00, 0xAB, 0xff]) == "00abff")
        #expect(Hex.decode("00ABff") == [0x00, 0xab, 0xff])
        #expect(Hex.decode("abc") == nil)
        #expect(Hex.decode("zz") == nil)
    }

    @Test func `sha256 of empty input is the known digest`() {
        #expect(Hex.encode(SHA256.digest([UInt8]())) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(Hex.encode(SHA256.digest(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }
}
