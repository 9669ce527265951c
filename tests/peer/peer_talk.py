"""One push-to-talk turn through `clawvoice run` against a protocol-4 gateway with talk.agentId,
talk-session-target-v1, closed talk.* schemas and message-less chat deltas (drift D2, D3, D4)."""
import asyncio, base64, json, subprocess, uuid

from websockets.asyncio.server import serve

from peer_harness import check, open_connect, start_daemon, start_pulse, stop_daemon, run_node, sine_wav


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
        opened = await open_connect(ws)
        if opened is None:
            return
        frame, params, nonce, ts = opened
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
    pulsed = start_pulse("talk turn")
    if pulsed is None:
        return
    script, pulse_dir, penv, pulse = pulsed
    peer = TalkPeer()
    proc = None
    status = {}
    log = ""
    try:
        async with serve(peer.handler, "127.0.0.1", 0, origins=None) as server:
            url = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"
            proc, env = await start_daemon(binary, url, pulse)
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
            log = await stop_daemon(proc)
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
