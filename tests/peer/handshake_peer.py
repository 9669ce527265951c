#!/usr/bin/env python3
"""Independent gateway peer: plays the gateway's side of the OpenClaw handshake against the
real `clawvoice` binary and checks the node's connect frames and Ed25519 signatures with its
own code (Python `websockets` + `cryptography`), so a bug shared by clawvoice's signer and its
loopback gateway's verifier cannot hide. Written from gateway-protocol.md, not from our Swift.

Usage: handshake_peer.py PATH/TO/clawvoice
Prints one line per check and ends with "N passed, M failed".
"""
import asyncio, base64, hashlib, json, os, sys, tempfile, time, uuid

import websockets
from websockets.asyncio.server import serve
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

CONNECT_KEYS = {"minProtocol", "maxProtocol", "client", "caps", "commands", "permissions", "pathEnv", "role",
                "scopes", "device", "auth", "locale", "userAgent"}
CLIENT_KEYS = {"id", "displayName", "version", "platform", "deviceFamily", "modelIdentifier", "mode", "instanceId"}
AUTH_KEYS = {"token", "bootstrapToken", "deviceToken", "password"}
DEVICE_KEYS = {"id", "publicKey", "signature", "signedAt", "nonce"}
SHARED = "peer-shared-token"

results = []


def check(name, ok, detail=""):
    results.append(bool(ok))
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else f"  ({detail})"), flush=True)


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


class Peer:
    def __init__(self):
        self.connects = []          # (role, params, nonce, origin)
        self.approved = set()       # roles approved
        self.tokens = {}            # role -> issued device token
        self.pending_shown = {}     # role -> request id
        self.nonces = {}

    async def handler(self, ws):
        origin = ws.request.headers.get("Origin")
        nonce = str(uuid.uuid4())
        ts = int(time.time() * 1000)
        await ws.send(json.dumps({"type": "event", "event": "connect.challenge", "payload": {"nonce": nonce, "ts": ts}}))
        try:
            raw = await asyncio.wait_for(ws.recv(), 10)
        except Exception:
            return
        frame = json.loads(raw if isinstance(raw, str) else raw.decode())
        params = frame.get("params", {})
        role = params.get("role")
        self.connects.append((role, params, nonce, ts, origin, frame))
        if role not in self.approved and role not in self.pending_shown:
            rid = "r_peer_" + role
            self.pending_shown[role] = rid
            await ws.send(json.dumps({"type": "res", "id": frame.get("id"), "ok": False, "error": {
                "code": "NOT_PAIRED", "message": "pairing required: device is not approved yet",
                "details": {"code": "PAIRING_REQUIRED", "reason": "not-paired", "requestId": rid,
                            "requestedRole": role, "requestedScopes": params.get("scopes", [])}}}))
            await ws.close(1008, f"pairing required: device is not approved yet (requestId: {rid})")
            # The operator approves a moment later.
            asyncio.get_running_loop().call_later(0.3, self.approved.add, role)
            return
        if role not in self.approved:
            await ws.send(json.dumps({"type": "res", "id": frame.get("id"), "ok": False, "error": {
                "code": "NOT_PAIRED", "message": "pairing required: device is not approved yet",
                "details": {"code": "PAIRING_REQUIRED", "reason": "not-paired", "requestId": self.pending_shown[role]}}}))
            await ws.close(1008, "pairing required")
            return
        token = self.tokens.setdefault(role, "dt_" + role + "_" + uuid.uuid4().hex)
        await ws.send(json.dumps({"type": "res", "id": frame.get("id"), "ok": True, "payload": {
            "type": "hello-ok", "protocol": 4, "server": {"version": "peer-1", "connId": str(uuid.uuid4())},
            "features": {"methods": ["chat.send"], "events": ["tick"]},
            "snapshot": {"presence": [], "health": {}, "stateVersion": {"presence": 1, "health": 1}, "uptimeMs": 1,
                         "sessionDefaults": {"defaultAgentId": "main", "mainKey": "main", "mainSessionKey": "agent:main:main"}},
            "auth": {"role": role, "scopes": params.get("scopes", []), "deviceToken": token, "issuedAtMs": ts},
            "policy": {"maxPayload": 26214400, "maxBufferedBytes": 52428800, "tickIntervalMs": 15000}}}))
        # The gateway sends nothing more; the node's pair command disconnects when both roles are in.
        try:
            async for _ in ws:
                pass
        except Exception:
            pass


def check_connect(label, role, params, nonce, ts, origin, frame, expect_token):
    check(f"{label}: first frame is req connect", frame.get("type") == "req" and frame.get("method") == "connect")
    check(f"{label}: no Origin header", origin is None, origin)
    check(f"{label}: only spec keys at top level", set(params) <= CONNECT_KEYS, set(params) - CONNECT_KEYS)
    client, device, auth = params.get("client", {}), params.get("device", {}), params.get("auth", {})
    check(f"{label}: only spec keys in client", set(client) <= CLIENT_KEYS, set(client) - CLIENT_KEYS)
    check(f"{label}: only spec keys in auth", set(auth) <= AUTH_KEYS, set(auth) - AUTH_KEYS)
    check(f"{label}: exact device keys", set(device) == DEVICE_KEYS, set(device) ^ DEVICE_KEYS)
    check(f"{label}: platform linux / family Linux", client.get("platform") == "linux" and client.get("deviceFamily") == "Linux")
    if role == "node":
        check(f"{label}: node identity", client.get("id") == "node-host" and client.get("mode") == "node"
              and params.get("scopes") == [] and params.get("minProtocol") == 3 and params.get("maxProtocol") == 4)
        check(f"{label}: caps and commands", "talk" in params.get("caps", []) and "talk.ptt.start" in params.get("commands", []))
    else:
        check(f"{label}: operator scopes", {"operator.read", "operator.write"} <= set(params.get("scopes", [])))
    pk = b64url_decode(device.get("publicKey", ""))
    check(f"{label}: device id = sha256(public key)", len(pk) == 32 and hashlib.sha256(pk).hexdigest() == device.get("id"))
    check(f"{label}: nonce echoed, signedAt = challenge ts", device.get("nonce") == nonce and device.get("signedAt") == ts)
    check(f"{label}: auth.token is {expect_token[:12]}…", auth.get("token") == expect_token, auth.get("token", "")[:12])
    token = auth.get("token") or auth.get("deviceToken") or auth.get("bootstrapToken") or ""
    p3 = payload("v3", device.get("id"), client.get("id"), client.get("mode"), role, params.get("scopes", []),
                 device.get("signedAt"), token, device.get("nonce"), client.get("platform"), client.get("deviceFamily"))
    check(f"{label}: v3 signature verifies", verify(pk, p3, device.get("signature", "")))
    tampered = p3.replace("|node-host|", "|cli|") if role == "node" else p3.replace("|cli|", "|node-host|")
    check(f"{label}: signature does not verify a changed payload", not verify(pk, tampered, device.get("signature", "")))
    return device.get("id")


async def run_node(binary, env, args, timeout=40):
    proc = await asyncio.create_subprocess_exec(binary, *args, env=env, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.STDOUT)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except asyncio.TimeoutError:
        proc.kill()
        out, _ = await proc.communicate()
        return -1, out.decode(errors="replace")
    return proc.returncode, out.decode(errors="replace")


async def main(binary):
    spec_vectors()
    peer = Peer()
    state = tempfile.mkdtemp(prefix="clawvoice-peer-")
    env = dict(os.environ, CLAWVOICE_STATE_DIR=state, XDG_CONFIG_HOME=state + "/cfg")
    async with serve(peer.handler, "127.0.0.1", 0, origins=None) as server:
        port = server.sockets[0].getsockname()[1]
        url = f"ws://127.0.0.1:{port}"
        code, out = await run_node(binary, env, ["pair", "--url", url, "--token", SHARED, "--timeout", "30"])
        check("pair exits 0 after both roles are approved", code == 0, out[-400:])
        check("pair printed the approve command for the node", "openclaw devices approve r_peer_node" in out, out[-400:])
        check("pair printed the approve command for the operator", "openclaw devices approve r_peer_operator" in out)
        first = {}
        for (role, params, nonce, ts, origin, frame) in peer.connects:
            if role not in first:
                first[role] = True
                check_connect(f"first {role} connect", role, params, nonce, ts, origin, frame, SHARED)
        node_ids = {p.get("device", {}).get("id") for (_, p, *_r) in peer.connects}
        check("one device key for every connect and both roles", len(node_ids) == 1, node_ids)
        retries = [c for c in peer.connects if c[0] == "node"]
        check("node retried after NOT_PAIRED with the same role and scopes", len(retries) >= 2
              and all(c[1].get("scopes") == [] for c in retries))

        # Second run without the shared token: the stored device token must be used and signed.
        before = len(peer.connects)
        env2 = dict(env)
        env2.pop("CLAWVOICE_GATEWAY_TOKEN", None)
        code, out = await run_node(binary, env2, ["pair", "--url", url, "--timeout", "20"])
        check("reconnect with stored tokens exits 0", code == 0, out[-400:])
        for (role, params, nonce, ts, origin, frame) in peer.connects[before:]:
            check_connect(f"reconnect {role}", role, params, nonce, ts, origin, frame, peer.tokens.get(role, "?"))
    passed = sum(results)
    failed = len(results) - passed
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(asyncio.run(main(sys.argv[1])))
