#!/usr/bin/env python3
"""A real WebRTC peer for clawvoice's realtime-call tests (aiortc), standing in for the provider
behind a gateway's offer broker (protocol-drift-2026-12b.md D1): it takes an SDP offer as
`POST <path>` with `Content-Type: application/sdp` and `Authorization: Bearer <secret>` (the secret
is single-use), answers 201 with an SDP answer starting "v=0", and then answers speech with
speech: every utterance it hears (voice for at least 200 ms, then 400 ms of quiet) is played back
to the caller after --reply-delay-ms. Written from the spec, not from our Swift, so a bug shared
by our offerer and a Swift answerer cannot hide.

It listens on 127.0.0.1 only and gathers ICE candidates on 127.0.0.1 only.

  GET  /stats   JSON: what it heard and played, the connection state, the offer's checks
  POST /close   closes the peer connection (the caller must see its link end)

Usage: webrtc_peer.py --secret S [--path /talk/offer] [--reply-delay-ms 0]
Prints "listening <port>" on stdout once ready, then one line per event.
"""
import argparse, array, asyncio, fractions, json, math, sys, time

import aioice.ice
from aiortc import RTCPeerConnection, RTCSessionDescription, MediaStreamTrack
from aiortc.rtcdtlstransport import RTCCertificate
from av import AudioFrame

# Loopback only: every host candidate on 127.0.0.1.
aioice.ice.get_host_addresses = lambda use_ipv4, use_ipv6: ["127.0.0.1"] if use_ipv4 else []

# aiortc offers ECDSA cipher suites only; GStreamer 1.22's DTLS (our side, the DTLS server when
# we offer actpass) signs with an RSA certificate, as libwebrtc and Pion accept. Widen aiortc's
# list by the ECDHE-RSA suites so the handshake meets; everything else stays aiortc's.
_create_ssl_context = RTCCertificate._create_ssl_context


def _ssl_context_with_rsa(self, srtp_profiles):
    ctx = _create_ssl_context(self, srtp_profiles)
    ctx.set_cipher_list(b"ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-SHA:"
                        b"ECDHE-ECDSA-AES256-SHA:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-AES128-SHA")
    return ctx


RTCCertificate._create_ssl_context = _ssl_context_with_rsa

RATE = 48000
FRAME = 960  # 20 ms
VOICE_DBFS = -40.0


def log(*parts):
    print(*parts, flush=True)


def dbfs(samples):
    if not samples:
        return -120.0
    rms = math.sqrt(sum(s * s for s in samples) / len(samples))
    return 20 * math.log10(max(rms, 1e-9) / 32768.0)


class ReplyTrack(MediaStreamTrack):
    """The peer's voice: silence, or the queued reply, paced at 20 ms per frame."""
    kind = "audio"

    def __init__(self, stats):
        super().__init__()
        self.queue = array.array("h")
        self.pts = 0
        self.start = None
        self.stats = stats
        self.since = None  # monotonic time of the last voiced frame of the utterance being answered

    async def recv(self):
        if self.start is None:
            self.start = time.monotonic()
        due = self.start + self.pts / RATE
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        chunk = self.queue[:FRAME]
        del self.queue[:FRAME]
        if len(chunk) < FRAME:
            chunk.extend([0] * (FRAME - len(chunk)))
        elif any(chunk):
            self.stats["playedMs"] += 20
            if self.stats["firstReplyAt"] is None:
                self.stats["firstReplyAt"] = time.time()
            if self.since is not None:
                # The peer's own share of a reply (endpoint + --reply-delay-ms + frame pacing), for clawvoice-bench.
                # With wall-clock times of both ends (heard, sent), to split the legs on one machine.
                now = time.monotonic()
                log("reply-gap-ms", round((now - self.since) * 1000, 1), "heard", round(time.time() - (now - self.since), 4), "sent", round(time.time(), 4))
                self.since = None
        frame = AudioFrame(format="s16", layout="mono", samples=FRAME)
        frame.planes[0].update(chunk.tobytes())
        frame.sample_rate = RATE
        frame.pts = self.pts
        frame.time_base = fractions.Fraction(1, RATE)
        self.pts += FRAME
        return frame


class Peer:
    def __init__(self, args):
        self.args = args
        self.secret_used = False
        self.pc = None
        self.stats = {"offers": 0, "connectionState": "new", "heardMs": 0, "heardVoiceMs": 0, "heardMaxDbfs": -120.0,
                      "utterances": 0, "playedMs": 0, "firstReplyAt": None, "lastVoiceAt": None, "offerChecks": {}}
        self.reply = None

    async def offer(self, headers, body):
        if headers.get("content-type", "").split(";")[0].strip() != "application/sdp":
            return 415, "text/plain", b"Content-Type must be application/sdp"
        if headers.get("authorization") != "Bearer " + self.args.secret or self.secret_used:
            return 401, "text/plain", b"bad or used secret"
        sdp = body.decode("utf-8", "replace")
        checks = {
            "startsV0": sdp.startswith("v=0"),
            "audio": "\nm=audio" in sdp,
            "noVideo": "\nm=video" not in sdp,
            "noDataChannel": "\nm=application" not in sdp,
            "candidates": "a=candidate:" in sdp,
            "opus": "opus/48000/2" in sdp.lower(),
            "sendrecv": "a=sendrecv" in sdp,
        }
        self.stats["offerChecks"] = checks
        if not all(checks.values()):
            return 400, "text/plain", ("offer refused: " + json.dumps(checks)).encode()
        self.secret_used = True
        self.stats["offers"] += 1
        pc = RTCPeerConnection()
        self.pc = pc
        self.reply = ReplyTrack(self.stats)

        @pc.on("connectionstatechange")
        async def on_state():
            self.stats["connectionState"] = pc.connectionState
            log("connection", pc.connectionState)

        @pc.on("track")
        def on_track(track):
            if track.kind == "audio":
                asyncio.ensure_future(self.listen(track))

        await pc.setRemoteDescription(RTCSessionDescription(sdp=sdp, type="offer"))
        for t in pc.getTransceivers():
            if t.kind == "audio":
                t.sender.replaceTrack(self.reply)
                t.direction = "sendrecv"
        answer = await pc.createAnswer()
        await pc.setLocalDescription(answer)  # aiortc gathers every candidate before this returns
        log("answered")
        return 201, "application/sdp", pc.localDescription.sdp.encode()

    async def listen(self, track):
        """Counts what it hears; an utterance (voice ≥ 200 ms, then 400 ms quiet) is played back."""
        voice_ms, quiet_ms, utterance, last_voice = 0, 0, array.array("h"), 0.0
        while True:
            try:
                frame = await track.recv()
            except Exception:
                return
            pcm = array.array("h", bytes(frame.planes[0])[: frame.samples * 2 * len(frame.layout.channels)])
            if len(frame.layout.channels) == 2:
                pcm = pcm[0::2]
            ms = 1000 * frame.samples // frame.sample_rate
            level = dbfs(pcm)
            self.stats["heardMs"] += ms
            self.stats["heardMaxDbfs"] = max(self.stats["heardMaxDbfs"], round(level, 1))
            if level > VOICE_DBFS:
                self.stats["heardVoiceMs"] += ms
                self.stats["lastVoiceAt"] = time.time()
                last_voice = time.monotonic()
                voice_ms += ms
                quiet_ms = 0
                utterance.extend(pcm if frame.sample_rate == RATE else resample(pcm, frame.sample_rate))
            elif voice_ms >= 200:
                quiet_ms += ms
                if quiet_ms >= 400:
                    self.stats["utterances"] += 1
                    log("heard", voice_ms, "ms")
                    asyncio.ensure_future(self.answer_with(utterance, last_voice))
                    voice_ms, quiet_ms, utterance = 0, 0, array.array("h")
            else:
                voice_ms, utterance = 0, array.array("h")

    async def answer_with(self, pcm, last_voice):
        await asyncio.sleep(self.args.reply_delay_ms / 1000)
        if self.reply:
            self.reply.since = last_voice
            self.reply.queue.extend(pcm)

    async def close(self):
        if self.pc:
            await self.pc.close()
            self.stats["connectionState"] = "closed"
            log("closed")


def resample(pcm, rate):
    step = rate / RATE
    return array.array("h", (pcm[min(int(i * step), len(pcm) - 1)] for i in range(int(len(pcm) / step))))


async def handle(peer, reader, writer):
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        if method == "POST" and path == peer.args.path:
            status, ctype, out = await peer.offer(headers, body)
        elif method == "GET" and path == "/stats":
            status, ctype, out = 200, "application/json", json.dumps(peer.stats).encode()
        elif method == "POST" and path == "/close":
            await peer.close()
            status, ctype, out = 200, "text/plain", b"closed"
        else:
            status, ctype, out = 404, "text/plain", b"not found"
        reason = {200: "OK", 201: "Created", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 415: "Unsupported Media Type"}[status]
        writer.write(f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {len(out)}\r\nConnection: close\r\n\r\n".encode() + out)
        await writer.drain()
    except Exception as e:  # a broken request must not take the peer down
        log("request failed", repr(e))
    finally:
        writer.close()


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--secret", required=True)
    ap.add_argument("--path", default="/talk/offer")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--reply-delay-ms", type=int, default=0)
    args = ap.parse_args()
    peer = Peer(args)
    server = await asyncio.start_server(lambda r, w: handle(peer, r, w), "127.0.0.1", args.port)
    log("listening", server.sockets[0].getsockname()[1])
    # Ends when stdin closes: the test that started it is gone.
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)
    await peer.close()


if __name__ == "__main__":
    asyncio.run(main())
