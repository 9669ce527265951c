"""Gateways that refuse a connect: a released protocol-3 gateway (issue 26), an
AUTH_TOKEN_MISMATCH that names protocol 3 (no retry), and OPERATOR_ACCESS_DENIED (drift D9)."""
import json, time, uuid

from websockets.asyncio.server import serve

from peer_harness import SHARED, check, open_connect, fresh_env, run_node
from peer_wire import b64url_decode, signed_payload, verify


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
        opened = await open_connect(ws)
        if opened is None:
            return
        frame, params, nonce, ts = opened
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


async def released_v3(binary):
    old = OldGatewayPeer()
    async with serve(old.handler, "127.0.0.1", 0, origins=None) as server:
        url = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        code, out = await run_node(binary, dict(fresh_env(), CLAWVOICE_GATEWAY_TOKEN=SHARED), ["pair", "--url", url, "--timeout", "20"])
    check("released-v3 gateway: pair exits 0", code == 0, out[-400:])
    pair = check_retry("the node", old.node_connects, "node", (3, 4), "exactly two node connects (3..4, then 3..3)")
    if pair:
        p1, p2 = pair
        check("released-v3 gateway: same client envelope apart from the range",
              {k: v for k, v in p1.items() if k not in ("minProtocol", "maxProtocol", "device")}
              == {k: v for k, v in p2.items() if k not in ("minProtocol", "maxProtocol", "device")})
    check_retry("the operator", old.operator_connects, "operator", (4, 4),
                "the operator offers 4..4, then falls back to 3..3 once (issue 26)")


def check_retry(who, connects, role, first, what):
    """A role's connects to a released-v3 gateway: `first`, then one retry at 3..3 that answers its own
    fresh challenge with a new signature that verifies. The two connects' params, or None."""
    ranges = [(p.get("minProtocol"), p.get("maxProtocol")) for (p, _n, _t) in connects]
    check(f"released-v3 gateway: {what}", ranges == [first, (3, 3)], ranges)
    if len(connects) < 2:
        return None
    (p1, n1), (p2, n2, t2) = connects[0][:2], connects[1]
    d2 = p2.get("device", {})
    check(f"released-v3 gateway: {who}'s retry answers its own fresh challenge", n1 != n2 and d2.get("nonce") == n2
          and d2.get("signedAt") == t2)
    check(f"released-v3 gateway: {who}'s retry has a new signature", d2.get("signature") != p1.get("device", {}).get("signature"))
    check(f"released-v3 gateway: {who}'s 3..3 signature verifies",
          verify(b64url_decode(d2.get("publicKey", "")), signed_payload(p2, role), d2.get("signature", "")))
    return p1, p2


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


class AccessDeniedPeer:
    """D9: the operator authenticates, but the gateway's access policy grants it nothing yet:
    `OPERATOR_ACCESS_DENIED` ("keep reconnecting with backoff so newly granted access applies
    without user action", docs/gateway/protocol/auth.md @0711ee47). The first `denials`
    operator connects are refused that way, then access is granted."""

    def __init__(self, denials=2):
        self.denials = denials
        self.operator_times = []

    async def handler(self, ws):
        opened = await open_connect(ws)
        if opened is None:
            return
        frame, params, nonce, ts = opened
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
