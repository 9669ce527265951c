"""`clawvoice run` on a private PulseAudio answering system.notify as the Linux node does:
{"ok": true} once spoken from the peer's own tts.speak clip, "INVALID_REQUEST: empty notification"."""
import asyncio, base64, json, subprocess, uuid

from websockets.asyncio.server import serve

from peer_harness import check, open_connect, start_daemon, start_pulse, stop_daemon, sine_wav


class RunPeer:
    """A gateway that approves at once and serves what `clawvoice run` asks of it: tts.speak
    answers with its own WAV clip; other methods are unknown. On the node's hello-ok it invokes
    system.notify twice: an empty one and a real one."""

    def __init__(self):
        self.results = {}
        self.speak_calls = []
        self.done = asyncio.Event()

    async def handler(self, ws):
        opened = await open_connect(ws)
        if opened is None:
            return
        frame, params, nonce, ts = opened
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
    pulsed = start_pulse("run")
    if pulsed is None:
        return
    script, pulse_dir, penv, pulse = pulsed
    peer = RunPeer()
    proc = None
    try:
        async with serve(peer.handler, "127.0.0.1", 0, origins=None) as server:
            url = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"
            proc, env = await start_daemon(binary, url, pulse)
            try:
                await asyncio.wait_for(peer.done.wait(), 40)
            except asyncio.TimeoutError:
                pass
            log = await stop_daemon(proc)
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
