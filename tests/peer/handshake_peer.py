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
# The scenarios live beside this file: peer_wire.py (signatures, spec vectors, connect checks),
# peer_refusals.py (released v3, AUTH_TOKEN_MISMATCH, OPERATOR_ACCESS_DENIED), peer_notify.py and
# peer_talk.py (`clawvoice run`), peer_harness.py (the tally and running the binary). This file
# keeps the pairing runs and the order in which everything runs.
import asyncio, json, os, sqlite3, sys, tempfile, time, uuid

import websockets
from websockets.asyncio.server import serve

from peer_harness import SHARED, check, results, run_node
from peer_notify import run_daemon_notify
from peer_refusals import no_retry_on_auth_mismatch, operator_access_denied, released_v3
from peer_talk import talk_turn
from peer_wire import check_connect, spec_vectors


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
