"""What every scenario of handshake_peer.py shares: the tally of checks, the shared token, a
fresh state directory, running the binary, and the peer's own WAV clip for tts answers."""
import asyncio, io, json, math, os, signal, struct, subprocess, tempfile, time, uuid, wave

SHARED = "peer-shared-token"

results = []


def check(name, ok, detail=""):
    results.append(bool(ok))
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else f"  ({detail})"), flush=True)


def fresh_env():
    state = tempfile.mkdtemp(prefix="clawvoice-peer-")
    return dict(os.environ, CLAWVOICE_STATE_DIR=state, XDG_CONFIG_HOME=state + "/cfg")


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


def sine_wav(seconds=0.3, rate=16000):
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"".join(struct.pack("<h", int(6000 * math.sin(2 * math.pi * 440 * i / rate)))
                               for i in range(int(seconds * rate))))
    return buf.getvalue()


async def open_connect(ws):
    """A gateway's side of the first exchange: sends connect.challenge, reads the connect frame.
    Returns (frame, params, nonce, ts), or None when no frame came within 10 s."""
    nonce = str(uuid.uuid4())
    ts = int(time.time() * 1000)
    await ws.send(json.dumps({"type": "event", "event": "connect.challenge", "payload": {"nonce": nonce, "ts": ts}}))
    try:
        frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
    except Exception:
        return None
    return frame, frame.get("params", {}), nonce, ts


def start_pulse(label):
    """A private PulseAudio for one daemon run (tests/audio/pulse-server.sh): (script, its directory,
    the environment naming it, its PULSE_SERVER values), or None after a failed check."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "audio", "pulse-server.sh")
    pulse_dir = tempfile.mkdtemp(prefix="clawvoice-peer-pulse-")
    penv = dict(os.environ, CLAWVOICE_PULSE_DIR=pulse_dir)
    started = subprocess.run(["bash", script, "start"], env=penv, capture_output=True, text=True)
    if started.returncode != 0:
        check(f"{label}: private PulseAudio started", False, started.stderr[-300:])
        return None
    pulse = [line.split("=", 1)[1] for line in started.stdout.splitlines() if line.startswith("export PULSE_SERVER=")]
    return script, pulse_dir, penv, pulse


async def stop_daemon(proc):
    """Ends a `clawvoice run` as systemd would (SIGTERM, then SIGKILL after 15 s); returns its output."""
    proc.send_signal(signal.SIGTERM)
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), 15)
    except asyncio.TimeoutError:
        proc.kill()
        out, _ = await proc.communicate()
    return out.decode(errors="replace")


async def start_daemon(binary, url, pulse):
    """`clawvoice run` against the peer's gateway at url, wake words off, on the private PulseAudio
    (start_pulse's PULSE_SERVER values): (the process, its environment for CLI calls beside it)."""
    env = fresh_env()
    cfg = os.path.join(env["XDG_CONFIG_HOME"], "clawvoice")
    os.makedirs(cfg, exist_ok=True)
    with open(os.path.join(cfg, "config.json5"), "w") as f:
        f.write("{ wake: { enabled: false } }\n")
    env.update(CLAWVOICE_GATEWAY_URL=url, CLAWVOICE_GATEWAY_TOKEN=SHARED, PULSE_SERVER=pulse[0] if pulse else "")
    proc = await asyncio.create_subprocess_exec(binary, "run", env=env, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.STDOUT)
    return proc, env
