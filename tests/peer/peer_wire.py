"""The peer's own reading of the wire (gateway-protocol.md): the spec's key sets, base64url,
the v3 signature payload and its Ed25519 check, the spec's test vectors, and the checks on one
connect frame."""
import base64, hashlib

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from peer_harness import check

CONNECT_KEYS = {"minProtocol", "maxProtocol", "client", "caps", "commands", "permissions", "pathEnv", "role",
                "scopes", "device", "auth", "locale", "userAgent"}
CLIENT_KEYS = {"id", "displayName", "version", "platform", "deviceFamily", "modelIdentifier", "mode", "instanceId"}
AUTH_KEYS = {"token", "bootstrapToken", "deviceToken", "password"}
DEVICE_KEYS = {"id", "publicKey", "signature", "signedAt", "nonce"}


def b64url_decode(s):
    s = s.replace("-", "+").replace("_", "/")
    return base64.b64decode(s + "=" * (-len(s) % 4))


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def norm(s):
    # trim + ASCII-only lowercase (spec 2.4): no locale or Unicode folding
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in (s or "").strip())


def payload(version, device_id, client_id, mode, role, scopes, signed_at, token, nonce, platform, family):
    parts = [version, device_id, client_id, mode, role, ",".join(scopes), str(signed_at), token, nonce]
    if version == "v3":
        parts += [norm(platform), norm(family)]
    return "|".join(parts)


def signed_payload(params, role):
    """The v3 payload a connect's device signature must cover: its own fields and the token it sends."""
    client, device, auth = params.get("client", {}), params.get("device", {}), params.get("auth", {})
    token = auth.get("token") or auth.get("deviceToken") or auth.get("bootstrapToken") or ""
    return payload("v3", device.get("id"), client.get("id"), client.get("mode"), role, params.get("scopes", []),
                   device.get("signedAt"), token, device.get("nonce"), client.get("platform"), client.get("deviceFamily"))


def verify(pk, message, sig):
    try:
        Ed25519PublicKey.from_public_bytes(pk).verify(b64url_decode(sig), message.encode())
        return True
    except Exception:
        return False


def spec_vectors():
    # Section 13 of gateway-protocol.md, checked with this peer's own builder and verifier.
    key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    raw = key.public_key().public_bytes_raw()
    check("spec vector: public key", b64url(raw) == "A6EHv_POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg")
    did = hashlib.sha256(raw).hexdigest()
    check("spec vector: device id", did == "56475aa75463474c0285df5dbf2bcab73da651358839e9b77481b2eab107708c")
    p = payload("v3", did, "node-host", "node", "node", [], 1767225600000, "tok_example_shared",
                "3f1c2a9e-5b7d-4e21-9c0a-8d6f4b2e1a77", "linux", "Linux")
    check("spec vector: v3 node signature", verify(raw, p, "NCsOsTCIpU3Np8GJt9UC9aJ-fm8YabH4JKxe266OYClB0_g6rQMto3BtA4Sxoq0maZ2UgYGjl8Dt2iEEmtOHBw"))


def check_connect(label, role, params, nonce, ts, origin, frame, expect_token, slot="token"):
    check(f"{label}: first frame is req connect", frame.get("type") == "req" and frame.get("method") == "connect")
    check(f"{label}: no Origin header", origin is None, origin)
    check(f"{label}: only spec keys at top level", set(params) <= CONNECT_KEYS, set(params) - CONNECT_KEYS)
    client, device, auth = params.get("client", {}), params.get("device", {}), params.get("auth", {})
    check(f"{label}: only spec keys in client", set(client) <= CLIENT_KEYS, set(client) - CLIENT_KEYS)
    check(f"{label}: only spec keys in auth", set(auth) <= AUTH_KEYS, set(auth) - AUTH_KEYS)
    check(f"{label}: exact device keys", set(device) == DEVICE_KEYS, set(device) ^ DEVICE_KEYS)
    check(f"{label}: platform linux / family Linux", client.get("platform") == "linux" and client.get("deviceFamily") == "Linux")
    if role == "node":
        # 3..4 in one connect (the ESP node's choice; v4 and released-v3 gateways both accept it).
        check(f"{label}: node identity", client.get("id") == "node-host" and client.get("mode") == "node"
              and params.get("scopes") == [] and params.get("minProtocol") == 3 and params.get("maxProtocol") == 4)
        check(f"{label}: caps and commands", "talk" in params.get("caps", []) and "talk.ptt.start" in params.get("commands", []))
    else:
        check(f"{label}: operator scopes", {"operator.read", "operator.write"} <= set(params.get("scopes", [])))
    pk = b64url_decode(device.get("publicKey", ""))
    check(f"{label}: device id = sha256(public key)", len(pk) == 32 and hashlib.sha256(pk).hexdigest() == device.get("id"))
    check(f"{label}: nonce echoed, signedAt = challenge ts", device.get("nonce") == nonce and device.get("signedAt") == ts)
    if slot == "token":
        check(f"{label}: auth.token is {expect_token[:12]}…", auth.get("token") == expect_token, auth.get("token", "")[:12])
    else:
        # Device token in its own slot and nothing else (drift §7; the newest official clients).
        check(f"{label}: auth is exactly {{deviceToken: {expect_token[:12]}…}}", auth == {"deviceToken": expect_token},
              {k: v[:12] for k, v in auth.items()})
    p3 = signed_payload(params, role)
    check(f"{label}: v3 signature verifies", verify(pk, p3, device.get("signature", "")))
    tampered = p3.replace("|node-host|", "|cli|") if role == "node" else p3.replace("|cli|", "|node-host|")
    check(f"{label}: signature does not verify a changed payload", not verify(pk, tampered, device.get("signature", "")))
    return device.get("id")
