"""What every scenario of handshake_peer.py shares: the tally of checks, the shared token, a
fresh state directory, running the binary, and the peer's own WAV clip for tts answers."""
import asyncio, io, math, os, struct, tempfile, wave

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
