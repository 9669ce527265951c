#!/usr/bin/env python3
"""Independent gateway peer: plays the gateway's side of the OpenClaw handshake against the
real `clawvoice` binary and checks the node's connect frames and Ed25519 signatures with its
own code (Python `websockets` + `cryptography`), so a bug shared by clawvoice's signer and its
loopback gateway's verifier cannot hide. Written from gateway-protocol.md and
protocol-drift-2026-12.md, not from our Swift.

Scenarios: first pairing with the shared token; a second run on the stored device tokens
(sent as auth.deviceToken, signed over that token; the shared secret then leaves SQLite),
during which node.invoke.request arrives with sessionKey as a value, null, omitted and only
nested in params, every event carrying unknown top-level keys; a released-v3 gateway that
refuses 3..4 (and the operator's 4..4) with details {expectedProtocol:3} and no code (one retry
with 3..3 on a fresh socket, new nonce and signature, for both roles: issue 26); AUTH_TOKEN_MISMATCH
naming protocol 3 (no retry); OPERATOR_ACCESS_DENIED retried with backoff and named by `pair`
(drift D9); `clawvoice run` on a private PulseAudio answering system.notify as the Linux node does
({"ok": true} once spoken from the peer's own tts.speak clip; "INVALID_REQUEST: empty
notification"); and one push-to-talk turn through `clawvoice run` against a gateway with
talk.agentId, talk-session-target-v1, closed talk.* schemas and chat deltas whose later frames
carry no `message` (drift D2, D3, D4, protocol-drift-2026-12b.md).

Usage: handshake_peer.py PATH/TO/clawvoice
Prints one line per check and ends with "N passed, M failed".
"""
import asyncio, base64, hashlib, io, json, math, os, signal, sqlite3, struct, subprocess, sys, tempfile, time, uuid, wave

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


# Keys newer gateways put on frames that a client must ignore (drift notes §1 rows 1-2).
EXTRA_EVENT_KEYS = {"recipientProfileId": "profile-1", "stateVersion": {"presence": 9}}
# (label, top-level sessionKey form, paramsJSON) for the invokes sent in the second run.
INVOKES = [("value", "agent:main:room", "{}"), ("null", None, "{}"), ("omitted", "OMIT", "{}"),
           ("nested only", "OMIT", json.dumps({"sessionKey": "agent:evil:main"}))]


class Peer:
    def __init__(self):
        self.connects = []          # (role, params, nonce, origin)
        self.approved = set()       # roles approved
        self.tokens = {}            # role -> issued device token
        self.pending_shown = {}     # role -> request id
        self.nonces = {}
        self.send_invokes = False   # second run: exercise node.invoke.request forms
        self.invoke_results = {}    # invoke id -> node.invoke.result params
        self.invokes_done = None    # asyncio.Event once every invoke was answered

    async def node_invokes(self, ws, node_id):
        # A tick with unknown keys first: a strict decoder would drop it (or the link).
        await ws.send(json.dumps(dict({"type": "event", "event": "tick", "payload": {"ts": int(time.time() * 1000)}, "seq": 1},
                                      **EXTRA_EVENT_KEYS)))
        for i, (label, key, params) in enumerate(INVOKES):
            payload = {"id": f"inv-{i}", "nodeId": node_id, "command": "system.notify", "paramsJSON": params,
                       "timeoutMs": 5000, "idempotencyKey": str(uuid.uuid4())}
            if key != "OMIT":
                payload["sessionKey"] = key
            await ws.send(json.dumps(dict({"type": "event", "event": "node.invoke.request", "payload": payload}, **EXTRA_EVENT_KEYS)))

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
        if self.send_invokes and role == "operator" and self.invokes_done is not None:
            # Hold the operator back until the node answered, so `pair` does not leave early.
            try:
                await asyncio.wait_for(self.invokes_done.wait(), 15)
            except asyncio.TimeoutError:
                pass
        token = self.tokens.setdefault(role, "dt_" + role + "_" + uuid.uuid4().hex)
        await ws.send(json.dumps({"type": "res", "id": frame.get("id"), "ok": True, "payload": {
            "type": "hello-ok", "protocol": 4, "server": {"version": "peer-1", "connId": str(uuid.uuid4())},
            "features": {"methods": ["chat.send"], "events": ["tick"]},
            "snapshot": {"presence": [], "health": {}, "stateVersion": {"presence": 1, "health": 1}, "uptimeMs": 1,
                         "sessionDefaults": {"defaultAgentId": "main", "mainKey": "main", "mainSessionKey": "agent:main:main"}},
            "auth": {"role": role, "scopes": params.get("scopes", []), "deviceToken": token, "issuedAtMs": ts},
            "policy": {"maxPayload": 26214400, "maxBufferedBytes": 52428800, "tickIntervalMs": 15000}}}))
        if self.send_invokes and role == "node":
            await self.node_invokes(ws, params.get("device", {}).get("id", ""))
        # The node's pair command disconnects when both roles are in.
        try:
            async for raw in ws:
                msg = json.loads(raw if isinstance(raw, str) else raw.decode())
                if msg.get("type") == "req" and msg.get("method") == "node.invoke.result":
                    p = msg.get("params", {})
                    self.invoke_results[p.get("id")] = p
                    await ws.send(json.dumps({"type": "res", "id": msg.get("id"), "ok": True, "payload": {"ok": True}}))
                    if self.invokes_done is not None and len(self.invoke_results) >= len(INVOKES):
                        self.invokes_done.set()
        except Exception:
            pass


class OldGatewayPeer:
    """A released protocol-3 gateway as the official clients' tests show it: it refuses a range
    above 3 with INVALID_REQUEST "protocol mismatch" and details {expectedProtocol:3}, no code,
    and answers hello-ok with protocol 3, for both roles (issue 26: the operator offers 4..4 and
    must come back with 3..3 as the node does). `first_error` replaces the node's mismatch with
    another rejection shape."""

    def __init__(self, first_error=None):
        self.node_connects = []     # (params, nonce)
        self.operator_connects = [] # (params, nonce)
        self.first_error = first_error

    async def handler(self, ws):
        nonce = str(uuid.uuid4())
        ts = int(time.time() * 1000)
        await ws.send(json.dumps({"type": "event", "event": "connect.challenge", "payload": {"nonce": nonce, "ts": ts}}))
        try:
            frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
        except Exception:
            return
        params = frame.get("params", {})
        role = params.get("role")
        (self.node_connects if role == "node" else self.operator_connects).append((params, nonce, ts))
        if role == "node" and self.first_error is not None:
            await ws.send(json.dumps({"type": "res", "id": frame.get("id"), "ok": False, "error": self.first_error}))
            await ws.close(1008, "rejected")
            return
        if params.get("maxProtocol", 0) > 3 or params.get("minProtocol", 0) > 3:
            await ws.send(json.dumps({"type": "res", "id": frame.get("id"), "ok": False, "error": {
                "code": "INVALID_REQUEST", "message": "protocol mismatch", "details": {"expectedProtocol": 3}}}))
            await ws.close(1002, "protocol mismatch")
            return
        await ws.send(json.dumps({"type": "res", "id": frame.get("id"), "ok": True, "payload": {
            "type": "hello-ok", "protocol": 3, "server": {"version": "peer-v3", "connId": str(uuid.uuid4())},
            "features": {"methods": ["chat.send", "chat.history"], "events": ["tick"]},
            "auth": {"role": role, "scopes": params.get("scopes", []), "deviceToken": "dt_v3_" + role, "issuedAtMs": ts},
            "policy": {"maxPayload": 26214400, "maxBufferedBytes": 52428800, "tickIntervalMs": 15000}}}))
        try:
            async for _ in ws:
                pass
        except Exception:
            pass


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
    token = auth.get("token") or auth.get("deviceToken") or auth.get("bootstrapToken") or ""
    p3 = payload("v3", device.get("id"), client.get("id"), client.get("mode"), role, params.get("scopes", []),
                 device.get("signedAt"), token, device.get("nonce"), client.get("platform"), client.get("deviceFamily"))
    check(f"{label}: v3 signature verifies", verify(pk, p3, device.get("signature", "")))
    tampered = p3.replace("|node-host|", "|cli|") if role == "node" else p3.replace("|cli|", "|node-host|")
    check(f"{label}: signature does not verify a changed payload", not verify(pk, tampered, device.get("signature", "")))
    return device.get("id")


def stored_secret(db):
    """(shared_token, password) of the one gateway row, read with Python's own sqlite3."""
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            row = con.execute("SELECT shared_token, password FROM gateways").fetchone()
        finally:
            con.close()
        return tuple(row) if row else ("no row", "no row")
    except Exception as e:
        return (f"error: {e}", None)


def fresh_env():
    state = tempfile.mkdtemp(prefix="clawvoice-peer-")
    return dict(os.environ, CLAWVOICE_STATE_DIR=state, XDG_CONFIG_HOME=state + "/cfg")


async def released_v3(binary):
    old = OldGatewayPeer()
    async with serve(old.handler, "127.0.0.1", 0, origins=None) as server:
        url = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        code, out = await run_node(binary, dict(fresh_env(), CLAWVOICE_GATEWAY_TOKEN=SHARED), ["pair", "--url", url, "--timeout", "20"])
    check("released-v3 gateway: pair exits 0", code == 0, out[-400:])
    c = old.node_connects
    check("released-v3 gateway: exactly two node connects (3..4, then 3..3)", len(c) == 2
          and (c[0][0].get("minProtocol"), c[0][0].get("maxProtocol")) == (3, 4)
          and (c[1][0].get("minProtocol"), c[1][0].get("maxProtocol")) == (3, 3),
          [(p.get("minProtocol"), p.get("maxProtocol")) for (p, _n, _t) in c])
    if len(c) >= 2:
        (p1, n1, _t1), (p2, n2, t2) = c[0], c[1]
        d2 = p2.get("device", {})
        check("released-v3 gateway: the retry answers its own fresh challenge", n1 != n2 and d2.get("nonce") == n2
              and d2.get("signedAt") == t2)
        check("released-v3 gateway: a new signature", d2.get("signature") != p1.get("device", {}).get("signature"))
        pk = b64url_decode(d2.get("publicKey", ""))
        cl = p2.get("client", {})
        auth = p2.get("auth", {})
        token = auth.get("token") or auth.get("deviceToken") or auth.get("bootstrapToken") or ""
        msg = payload("v3", d2.get("id"), cl.get("id"), cl.get("mode"), "node", p2.get("scopes", []), d2.get("signedAt"),
                      token, d2.get("nonce"), cl.get("platform"), cl.get("deviceFamily"))
        check("released-v3 gateway: the retry's v3 signature verifies", verify(pk, msg, d2.get("signature", "")))
        check("released-v3 gateway: same client envelope apart from the range",
              {k: v for k, v in p1.items() if k not in ("minProtocol", "maxProtocol", "device")}
              == {k: v for k, v in p2.items() if k not in ("minProtocol", "maxProtocol", "device")})
    o = old.operator_connects
    check("released-v3 gateway: the operator offers 4..4, then falls back to 3..3 once (issue 26)", len(o) == 2
          and (o[0][0].get("minProtocol"), o[0][0].get("maxProtocol")) == (4, 4)
          and (o[1][0].get("minProtocol"), o[1][0].get("maxProtocol")) == (3, 3),
          [(p.get("minProtocol"), p.get("maxProtocol")) for (p, _n, _t) in o])
    if len(o) >= 2:
        (q1, m1, _u1), (q2, m2, u2) = o[0], o[1]
        e2 = q2.get("device", {})
        check("released-v3 gateway: the operator's retry signs its own fresh challenge", m1 != m2 and e2.get("nonce") == m2
              and e2.get("signedAt") == u2 and e2.get("signature") != q1.get("device", {}).get("signature"))
        pk = b64url_decode(e2.get("publicKey", ""))
        cl = q2.get("client", {})
        auth = q2.get("auth", {})
        token = auth.get("token") or auth.get("deviceToken") or ""
        msg = payload("v3", e2.get("id"), cl.get("id"), cl.get("mode"), "operator", q2.get("scopes", []), e2.get("signedAt"),
                      token, e2.get("nonce"), cl.get("platform"), cl.get("deviceFamily"))
        check("released-v3 gateway: the operator's 3..3 signature verifies", verify(pk, msg, e2.get("signature", "")))


async def no_retry_on_auth_mismatch(binary):
    old = OldGatewayPeer(first_error={"code": "INVALID_REQUEST", "message": "rejected",
                                      "details": {"code": "AUTH_TOKEN_MISMATCH", "expectedProtocol": 3}})
    async with serve(old.handler, "127.0.0.1", 0, origins=None) as server:
        url = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        code, out = await run_node(binary, dict(fresh_env(), CLAWVOICE_GATEWAY_TOKEN="wrong-token"), ["pair", "--url", url, "--timeout", "6"])
    check("AUTH_TOKEN_MISMATCH naming protocol 3: pair stops with exit 1", code == 1, out[-300:])
    check("AUTH_TOKEN_MISMATCH naming protocol 3: no 3..3 retry, no second connect", len(old.node_connects) == 1,
          [(p.get("minProtocol"), p.get("maxProtocol")) for (p, _n, _t) in old.node_connects])
    check("AUTH_TOKEN_MISMATCH naming protocol 3: one line says what to fix", "shared token" in out, out[-300:])


def sine_wav(seconds=0.3, rate=16000):
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"".join(struct.pack("<h", int(6000 * math.sin(2 * math.pi * 440 * i / rate)))
                               for i in range(int(seconds * rate))))
    return buf.getvalue()


class RunPeer:
    """A gateway that approves at once and serves what `clawvoice run` asks of it: tts.speak
    answers with its own WAV clip; other methods are unknown. On the node's hello-ok it invokes
    system.notify twice: an empty one and a real one."""

    def __init__(self):
        self.results = {}
        self.speak_calls = []
        self.done = asyncio.Event()

    async def handler(self, ws):
        nonce = str(uuid.uuid4())
        ts = int(time.time() * 1000)
        await ws.send(json.dumps({"type": "event", "event": "connect.challenge", "payload": {"nonce": nonce, "ts": ts}}))
        try:
            frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
        except Exception:
            return
        params = frame.get("params", {})
        role = params.get("role")
        await ws.send(json.dumps({"type": "res", "id": frame.get("id"), "ok": True, "payload": {
            "type": "hello-ok", "protocol": 4, "server": {"version": "peer-run", "connId": str(uuid.uuid4())},
            "features": {"methods": ["tts.speak", "chat.send", "chat.history"], "events": ["tick"]},
            "snapshot": {"sessionDefaults": {"mainSessionKey": "agent:main:main"}},
            "auth": {"role": role, "scopes": params.get("scopes", []), "deviceToken": "dt_run_" + role, "issuedAtMs": ts},
            "policy": {"maxPayload": 26214400, "maxBufferedBytes": 52428800, "tickIntervalMs": 15000}}}))
        if role == "node":
            node_id = params.get("device", {}).get("id", "")
            # Give the operator session a moment so tts.speak has somewhere to go.
            await asyncio.sleep(1.0)
            for iid, p in [("notify-empty", {"title": " ", "body": ""}), ("notify-real", {"title": "Dinner", "body": "is ready"})]:
                await ws.send(json.dumps({"type": "event", "event": "node.invoke.request", "payload": {
                    "id": iid, "nodeId": node_id, "command": "system.notify", "paramsJSON": json.dumps(p), "timeoutMs": 20000,
                    "sessionKey": None, "idempotencyKey": str(uuid.uuid4())}}))
        try:
            async for raw in ws:
                msg = json.loads(raw if isinstance(raw, str) else raw.decode())
                if msg.get("type") != "req":
                    continue
                method, rid = msg.get("method"), msg.get("id")
                if method == "node.invoke.result":
                    p = msg.get("params", {})
                    self.results[p.get("id")] = p
                    await ws.send(json.dumps({"type": "res", "id": rid, "ok": True, "payload": {"ok": True}}))
                    if len(self.results) >= 2:
                        self.done.set()
                elif method == "tts.speak":
                    self.speak_calls.append(msg.get("params", {}).get("text"))
                    await ws.send(json.dumps({"type": "res", "id": rid, "ok": True, "payload": {
                        "audioBase64": base64.b64encode(sine_wav()).decode(), "provider": "peer", "outputFormat": "wav",
                        "voiceCompatible": False, "mimeType": "audio/wav", "fileExtension": ".wav"}}))
                else:
                    await ws.send(json.dumps({"type": "res", "id": rid, "ok": False, "error": {
                        "code": "INVALID_REQUEST", "message": f"unknown method: {method}"}}))
        except Exception:
            pass


async def run_daemon_notify(binary):
    here = os.path.dirname(os.path.abspath(__file__))
    script = os.path.join(here, "..", "audio", "pulse-server.sh")
    pulse_dir = tempfile.mkdtemp(prefix="clawvoice-peer-pulse-")
    penv = dict(os.environ, CLAWVOICE_PULSE_DIR=pulse_dir)
    started = subprocess.run(["bash", script, "start"], env=penv, capture_output=True, text=True)
    if started.returncode != 0:
        check("run: private PulseAudio started", False, started.stderr[-300:])
        return
    pulse = [line.split("=", 1)[1] for line in started.stdout.splitlines() if line.startswith("export PULSE_SERVER=")]
    peer = RunPeer()
    proc = None
    try:
        async with serve(peer.handler, "127.0.0.1", 0, origins=None) as server:
            url = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"
            env = fresh_env()
            cfg = os.path.join(env["XDG_CONFIG_HOME"], "clawvoice")
            os.makedirs(cfg, exist_ok=True)
            with open(os.path.join(cfg, "config.json5"), "w") as f:
                f.write("{ wake: { enabled: false } }\n")
            env.update(CLAWVOICE_GATEWAY_URL=url, CLAWVOICE_GATEWAY_TOKEN=SHARED, PULSE_SERVER=pulse[0] if pulse else "")
            proc = await asyncio.create_subprocess_exec(binary, "run", env=env, stdout=asyncio.subprocess.PIPE,
                                                        stderr=asyncio.subprocess.STDOUT)
            try:
                await asyncio.wait_for(peer.done.wait(), 40)
            except asyncio.TimeoutError:
                pass
            proc.send_signal(signal.SIGTERM)
            try:
                out, _ = await asyncio.wait_for(proc.communicate(), 15)
            except asyncio.TimeoutError:
                proc.kill()
                out, _ = await proc.communicate()
            log = out.decode(errors="replace")
    finally:
        if proc is not None and proc.returncode is None:
            proc.kill()
        subprocess.run(["bash", script, "stop"], env=penv, capture_output=True)
    empty = peer.results.get("notify-empty", {})
    check("run: an empty system.notify is INVALID_REQUEST: empty notification",
          empty.get("ok") is False and empty.get("error") == {"code": "INVALID_REQUEST", "message": "INVALID_REQUEST: empty notification"},
          empty or log[-400:])
    real = peer.results.get("notify-real", {})
    payload = real.get("payload")
    if payload is None and isinstance(real.get("payloadJSON"), str):
        payload = json.loads(real["payloadJSON"])
    check("run: a spoken system.notify answers exactly {\"ok\": true}", real.get("ok") is True and payload == {"ok": True},
          real or log[-400:])
    check("run: the notification was spoken through tts.speak, title then body", peer.speak_calls == ["Dinner", "is ready"],
          peer.speak_calls)


class AccessDeniedPeer:
    """D9: the operator authenticates, but the gateway's access policy grants it nothing yet:
    `OPERATOR_ACCESS_DENIED` ("keep reconnecting with backoff so newly granted access applies
    without user action", docs/gateway/protocol/auth.md @0711ee47). The first `denials`
    operator connects are refused that way, then access is granted."""

    def __init__(self, denials=2):
        self.denials = denials
        self.operator_times = []

    async def handler(self, ws):
        nonce = str(uuid.uuid4())
        ts = int(time.time() * 1000)
        await ws.send(json.dumps({"type": "event", "event": "connect.challenge", "payload": {"nonce": nonce, "ts": ts}}))
        try:
            frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
        except Exception:
            return
        params = frame.get("params", {})
        role = params.get("role")
        if role == "operator":
            self.operator_times.append(time.monotonic())
            if len(self.operator_times) <= self.denials:
                await ws.send(json.dumps({"type": "res", "id": frame.get("id"), "ok": False, "error": {
                    "code": "INVALID_REQUEST", "message": "operator access denied",
                    "details": {"code": "OPERATOR_ACCESS_DENIED"}}}))
                await ws.close(1008, "operator access denied")
                return
        await ws.send(json.dumps({"type": "res", "id": frame.get("id"), "ok": True, "payload": {
            "type": "hello-ok", "protocol": 4, "server": {"version": "peer-d9", "connId": str(uuid.uuid4())},
            "features": {"methods": ["chat.send"], "events": ["tick"]},
            "auth": {"role": role, "scopes": params.get("scopes", []), "deviceToken": "dt_d9_" + role, "issuedAtMs": ts},
            "policy": {"maxPayload": 26214400, "maxBufferedBytes": 52428800, "tickIntervalMs": 15000}}}))
        try:
            async for _ in ws:
                pass
        except Exception:
            pass


async def operator_access_denied(binary):
    peer = AccessDeniedPeer(denials=2)
    async with serve(peer.handler, "127.0.0.1", 0, origins=None) as server:
        url = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        code, out = await run_node(binary, dict(fresh_env(), CLAWVOICE_GATEWAY_TOKEN=SHARED), ["pair", "--url", url, "--timeout", "30"])
    t = peer.operator_times
    check("OPERATOR_ACCESS_DENIED: pair keeps retrying and finishes once access is granted", code == 0 and len(t) == 3,
          (code, len(t), out[-400:]))
    gaps = [b - a for a, b in zip(t, t[1:])]
    check("OPERATOR_ACCESS_DENIED: retries back off (no hot loop)", len(gaps) == 2 and min(gaps) >= 0.2, gaps)
    check("OPERATOR_ACCESS_DENIED: pair says the access policy grants nothing yet, not a generic failure",
          "access policy grants this device nothing yet" in out, out[-400:])


# The reply the talk peer streams: only the first delta carries the cumulative `message`, later
# ones only `deltaText` (D3, docs/gateway/protocol/rpc-bootstrap-and-events.md @13957377).
REPLY_DELTAS = ["The plan is simple.", " Rest first.", " Then work."]
TALK_CREATE_KEYS = {"sessionKey", "agentId", "mode", "transport", "brain", "language", "provider", "model", "voice"}


class TalkPeer:
    """A protocol-4 gateway for one push-to-talk turn through `clawvoice run`: hello-ok lists
    `talk-session-target-v1`; talk.config names talk.agentId " Work " and session.mainKey "Desk"
    (D2: the node must talk to agent:work:desk); talk.config and talk.session.create are closed
    schemas that refuse unknown params (D4); the transcription relay answers with a transcript;
    chat.send gets a reply whose later deltas carry no `message` (D3); talk.speak records what
    is spoken."""

    def __init__(self):
        self.requests = []          # (method, params)
        self.schema_rejections = []
        self.spoken = []
        self.both = asyncio.Event()
        self.roles = set()
        self.reply_done = asyncio.Event()

    def closed_schema(self, method, params, allowed):
        extra = sorted(set(params) - allowed)
        if extra:
            self.schema_rejections.append((method, extra))
            return {"code": "INVALID_REQUEST", "message": f"invalid {method} params: at root: unexpected property '{extra[0]}'"}
        return None

    async def answer(self, ws, method, rid, p):
        if method == "talk.config":
            err = self.closed_schema(method, p, {"includeSecrets"})
            if err:
                return False, err
            return True, {"config": {"talk": {"agentId": " Work ", "silenceTimeoutMs": 700}, "session": {"mainKey": "Desk"}}}
        if method == "talk.session.create":
            err = self.closed_schema(method, p, TALK_CREATE_KEYS)
            if err:
                return False, err
            return True, {"sessionId": "relay-1", "transcriptionSessionId": "relay-1", "mode": "transcription",
                          "transport": "gateway-relay", "brain": "none", "provider": "peer",
                          "audio": {"inputEncoding": "g711_ulaw", "inputSampleRateHz": 8000}}
        if method == "talk.session.appendAudio":
            return True, {"ok": True}
        if method == "talk.session.close":
            async def transcript():
                await asyncio.sleep(0.05)
                await ws.send(json.dumps({"type": "event", "event": "talk.event", "payload": {
                    "transcriptionSessionId": "relay-1", "type": "transcript", "text": "what is the plan", "final": True}}))
            asyncio.get_running_loop().create_task(transcript())
            return True, {"ok": True}
        if method == "chat.send":
            run = p.get("idempotencyKey", "run")
            asyncio.get_running_loop().create_task(self.stream_reply(ws, run, p.get("sessionKey", "")))
            return True, {"runId": run, "status": "started"}
        if method == "chat.history":
            return True, {"sessionKey": p.get("sessionKey"), "messages": []}
        if method == "voicewake.get":
            return True, {"triggers": ["openclaw"]}
        if method == "talk.speak":
            self.spoken.append(p.get("text"))
            if " ".join(self.spoken).strip() == "".join(REPLY_DELTAS):
                self.reply_done.set()
            return True, {"audioBase64": base64.b64encode(sine_wav(0.2, 24000)).decode(), "provider": "peer",
                          "outputFormat": "wav", "mimeType": "audio/wav", "fileExtension": ".wav"}
        return False, {"code": "INVALID_REQUEST", "message": f"unknown method: {method}"}

    async def stream_reply(self, ws, run, key):
        seq, text = 0, ""
        for i, d in enumerate(REPLY_DELTAS):
            await asyncio.sleep(0.05)
            text += d
            ev = {"runId": run, "sessionKey": key, "seq": seq, "state": "delta", "deltaText": d}
            if i == 0:
                ev["message"] = {"role": "assistant", "content": [{"type": "text", "text": text}]}
            await ws.send(json.dumps({"type": "event", "event": "chat", "payload": ev, "seq": seq + 1}))
            seq += 1
        await ws.send(json.dumps({"type": "event", "event": "chat", "seq": seq + 1, "payload": {
            "runId": run, "sessionKey": key, "seq": seq, "state": "final",
            "message": {"role": "assistant", "content": [{"type": "text", "text": text}]}}}))

    async def handler(self, ws):
        nonce = str(uuid.uuid4())
        ts = int(time.time() * 1000)
        await ws.send(json.dumps({"type": "event", "event": "connect.challenge", "payload": {"nonce": nonce, "ts": ts}}))
        try:
            frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
        except Exception:
            return
        params = frame.get("params", {})
        role = params.get("role")
        await ws.send(json.dumps({"type": "res", "id": frame.get("id"), "ok": True, "payload": {
            "type": "hello-ok", "protocol": 4, "server": {"version": "peer-talk", "connId": str(uuid.uuid4())},
            "features": {"methods": ["chat.send", "chat.history", "voicewake.get", "talk.config", "talk.speak",
                                     "talk.session.create", "talk.session.appendAudio", "talk.session.close"],
                         "events": ["tick", "chat", "talk.event"], "capabilities": ["talk-session-target-v1"]},
            "snapshot": {"sessionDefaults": {"defaultAgentId": "main", "mainKey": "main", "mainSessionKey": "agent:main:main"}},
            "auth": {"role": role, "scopes": params.get("scopes", []), "deviceToken": "dt_talk_" + role, "issuedAtMs": ts},
            "policy": {"maxPayload": 26214400, "maxBufferedBytes": 52428800, "tickIntervalMs": 15000}}}))
        self.roles.add(role)
        if self.roles >= {"node", "operator"}:
            self.both.set()
        try:
            async for raw in ws:
                msg = json.loads(raw if isinstance(raw, str) else raw.decode())
                if msg.get("type") != "req":
                    continue
                method, rid, p = msg.get("method"), msg.get("id"), msg.get("params") or {}
                self.requests.append((method, p))
                ok, body = await self.answer(ws, method, rid, p)
                res = {"type": "res", "id": rid, "ok": ok}
                res["payload" if ok else "error"] = body
                await ws.send(json.dumps(res))
        except Exception:
            pass


async def talk_turn(binary):
    here = os.path.dirname(os.path.abspath(__file__))
    script = os.path.join(here, "..", "audio", "pulse-server.sh")
    pulse_dir = tempfile.mkdtemp(prefix="clawvoice-peer-pulse-")
    penv = dict(os.environ, CLAWVOICE_PULSE_DIR=pulse_dir)
    started = subprocess.run(["bash", script, "start"], env=penv, capture_output=True, text=True)
    if started.returncode != 0:
        check("talk turn: private PulseAudio started", False, started.stderr[-300:])
        return
    pulse = [line.split("=", 1)[1] for line in started.stdout.splitlines() if line.startswith("export PULSE_SERVER=")]
    peer = TalkPeer()
    proc = None
    status = {}
    log = ""
    try:
        async with serve(peer.handler, "127.0.0.1", 0, origins=None) as server:
            url = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"
            env = fresh_env()
            cfg = os.path.join(env["XDG_CONFIG_HOME"], "clawvoice")
            os.makedirs(cfg, exist_ok=True)
            with open(os.path.join(cfg, "config.json5"), "w") as f:
                f.write("{ wake: { enabled: false } }\n")
            env.update(CLAWVOICE_GATEWAY_URL=url, CLAWVOICE_GATEWAY_TOKEN=SHARED, PULSE_SERVER=pulse[0] if pulse else "")
            proc = await asyncio.create_subprocess_exec(binary, "run", env=env, stdout=asyncio.subprocess.PIPE,
                                                        stderr=asyncio.subprocess.STDOUT)
            try:
                await asyncio.wait_for(peer.both.wait(), 20)
                # The operator reads talk.config once it is in; give the target a moment to settle.
                for _ in range(50):
                    if any(m == "talk.config" for (m, _p) in peer.requests):
                        break
                    await asyncio.sleep(0.1)
                await asyncio.sleep(0.5)
                code, out = await run_node(binary, env, ["status", "--json"], timeout=10)
                try:
                    status = json.loads(out)
                except Exception:
                    status = {"unparsed": out[-300:]}
                await run_node(binary, env, ["ptt", "start"], timeout=30)
                await asyncio.sleep(0.5)
                # stop answers once the turn is queued: relay close, transcript, outbox (slow on a busy machine).
                await run_node(binary, env, ["ptt", "stop"], timeout=60)
                await asyncio.wait_for(peer.reply_done.wait(), 40)
            except asyncio.TimeoutError:
                pass
            proc.send_signal(signal.SIGTERM)
            try:
                out, _ = await asyncio.wait_for(proc.communicate(), 15)
            except asyncio.TimeoutError:
                proc.kill()
                out, _ = await proc.communicate()
            log = out.decode(errors="replace")
    finally:
        if proc is not None and proc.returncode is None:
            proc.kill()
        subprocess.run(["bash", script, "stop"], env=penv, capture_output=True)
    by = {}
    for (m, p) in peer.requests:
        by.setdefault(m, []).append(p)
    configs = by.get("talk.config", [])
    check("D2: talk.config is asked with exactly {includeSecrets: false}", configs and all(c == {"includeSecrets": False} for c in configs),
          configs)
    check("D2: status names the agent-scoped target agent:work:desk (trimmed, lowercased)",
          status.get("sessionKey") == "agent:work:desk", status.get("sessionKey", status))
    sends = by.get("chat.send", [])
    check("D2: the push-to-talk turn goes to agent:work:desk", len(sends) == 1 and sends[0].get("sessionKey") == "agent:work:desk"
          and sends[0].get("message") == "what is the plan", sends or log[-600:])
    creates = by.get("talk.session.create", [])
    check("D2: the transcription relay stays sessionless (no sessionKey, no agentId)", len(creates) == 1
          and creates[0].get("mode") == "transcription" and "sessionKey" not in creates[0] and "agentId" not in creates[0], creates)
    check("D4: no request carried a param the closed schemas refuse", peer.schema_rejections == [], peer.schema_rejections)
    check("D3: every sentence is spoken, also those whose deltas carried no message",
          " ".join(peer.spoken).strip() == "".join(REPLY_DELTAS), peer.spoken or log[-600:])


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
        code, out = await run_node(binary, dict(env, CLAWVOICE_GATEWAY_TOKEN=SHARED), ["pair", "--url", url, "--timeout", "30"])
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

        db = os.path.join(state, "clawvoice.sqlite")
        check("after pairing the shared token is still stored (the device tokens are not proven yet)",
              stored_secret(db) == (SHARED, None), stored_secret(db))

        # Second run without the shared token: the stored device token must be used and signed,
        # and meanwhile the node gets node.invoke.request in every sessionKey form.
        before = len(peer.connects)
        peer.send_invokes = True
        peer.invokes_done = asyncio.Event()
        env2 = dict(env)
        env2.pop("CLAWVOICE_GATEWAY_TOKEN", None)
        code, out = await run_node(binary, env2, ["pair", "--url", url, "--timeout", "20"])
        check("reconnect with stored tokens exits 0", code == 0, out[-400:])
        for (role, params, nonce, ts, origin, frame) in peer.connects[before:]:
            check_connect(f"reconnect {role}", role, params, nonce, ts, origin, frame, peer.tokens.get(role, "?"), slot="deviceToken")
        node_id = next((p.get("device", {}).get("id") for (r, p, *_x) in peer.connects if r == "node"), None)
        for i, (label, _key, _params) in enumerate(INVOKES):
            res = peer.invoke_results.get(f"inv-{i}")
            check(f"invoke with sessionKey {label} (and unknown event keys) is answered", res is not None
                  and res.get("nodeId") == node_id and isinstance(res.get("ok"), bool), res)
            if res is not None and not res.get("ok"):
                err = res.get("error", {})
                check(f"invoke with sessionKey {label}: error is {{code, message}} with the code as prefix",
                      set(err) == {"code", "message"} and err.get("message", "").startswith(err.get("code", "?") + ":"), err)
        check("both roles signed in on device tokens: the shared secret left SQLite", stored_secret(db) == (None, None),
              stored_secret(db))

    await released_v3(binary)
    await no_retry_on_auth_mismatch(binary)
    await operator_access_denied(binary)
    await run_daemon_notify(binary)
    await talk_turn(binary)
    passed = sum(results)
    failed = len(results) - passed
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(asyncio.run(main(sys.argv[1])))
