"""A validation stream of voices a recipe-v4 head never trained on (threshold rule v5, RULE-V19.md):
the validation sentences (render.split_sentences: never a training sentence, never a default
trigger) read by RHVoice's two English speakers (bdl, clb) and by Kokoro's mixed speakers, back to
back in 30 s segments, each through a training room and training noise at 3-30 dB (streams.
stream_audio, as rule v2's stream is built, without its babble: the stream's only voices are the
unseen ones). Neither engine is flite nor the engine flite shares speakers with (both held out),
and neither trains a recipe-v4 head: a head that trained on one of them (recipe v13's --rhvoice,
the stop word's --kokoro) is refused by the caller, since its "unseen" voices would not be; so is
a phrase the sentences say (prompt_threshold.py).

    .venv/bin/python unseen_stream.py [--out DIR]     (builds the WAV once; prints its path and hours)
    .venv/bin/python unseen_stream.py --engines rhvoice    (RHVoice's part alone: rule v5b, RULE-V21.md)

Renders 1,300 clips of RHVoice (2.27 h with the gaps; about 3.5 min) and 400 of Kokoro (0.80 h; about
22 min on one core), cached in the render cache; the joined WAV (350 MB) is kept in --out (default
.cache/unseen), keyed by everything that shapes it.
"""
import argparse
import hashlib
import json
import os
import time
import wave

import numpy as np

import render
from canvas import Noise
from streams import stream_audio

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, ".cache", "unseen")
ENGINES = ("rhvoice", "kokoro")                 # what a head using this stream must not have trained on
# Clips of one or two validation sentences (render.sentence_texts).
CLIPS = {"rhvoice": 1300, "kokoro": 400}
GAP_S = (0.15, 1.2)
SEED = 1919
# 2: training noise without babble (canvas.Noise); 1, RULE-V19's first run, also had a fan's hum,
# a noise only the held-out set uses.
STREAM_VERSION = 2


def engine(name):
    if name == "rhvoice":
        import rhvoice
        return rhvoice.rhvoice_engine()
    import voices
    return voices.kokoro_engine()


class _Named:
    """The engine's name without loading it: render.rendered only loads clips from the cache
    when they are there, and asks the engine for audio only when they are not."""

    def __init__(self, name):
        self.name, self._e = name, None

    def render(self, text, rng):
        if self._e is None:
            render.log(f"unseen stream: rendering with {self.name} (one time)")
            self._e = engine(self.name)
        return self._e.render(text, rng)


def texts():
    """The texts each engine reads (the sentences of the validation half, one or two a clip)."""
    _, val = render.split_sentences()
    return {name: render.sentence_texts(np.random.default_rng(SEED + i), val, CLIPS[name]) for i, name in enumerate(ENGINES)}


def build(out_dir, engines=ENGINES):
    """The stream's WAV (16 kHz mono int16) and its meta {hours, hoursByEngine, texts}; built once
    per content (the texts, the render cache's version and this module's settings). `engines` is a
    leading part of ENGINES: the engines' segments share one generator in that order, so
    ("rhvoice",) is the full stream's first 2.27 h bit for bit (rule v5b, RULE-V21.md)."""
    if not engines or tuple(engines) != ENGINES[:len(engines)]:
        raise ValueError(f"unseen_stream: engines must be a leading part of {ENGINES}, not {engines}")
    said = {e: t for e, t in texts().items() if e in engines}
    key = hashlib.sha1(repr((STREAM_VERSION, render.RENDER_VERSION, SEED, GAP_S, CLIPS, said)).encode()).hexdigest()[:12]
    os.makedirs(out_dir, exist_ok=True)
    wav, meta = os.path.join(out_dir, f"unseen-{key}.wav"), os.path.join(out_dir, f"unseen-{key}.json")
    if os.path.exists(wav) and os.path.exists(meta):
        return wav, json.load(open(meta))
    clips = {name: render.rendered(_Named(name), "unseen-val", said[name], CLIPS[name], SEED + 10 + i)
             for i, name in enumerate(ENGINES) if name in engines}
    rng = np.random.default_rng(SEED)
    noise, t0, seconds = Noise(rng, []), time.time(), {}
    tmp = f"{wav}.{os.getpid()}.tmp"
    try:
        with wave.open(tmp, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(16000)
            for name, pool in clips.items():           # each engine's segments together: its share is reported
                y = stream_audio(rng, pool, noise, None, gap=GAP_S)
                w.writeframes(y.astype("<i2").tobytes())
                seconds[name] = len(y) / 16000
        m = {"hours": sum(seconds.values()) / 3600, "hoursByEngine": {e: x / 3600 for e, x in seconds.items()},
             "version": STREAM_VERSION, "texts": sorted({t for v in said.values() for t in v})}
        with open(meta + f".{os.getpid()}.tmp", "w") as f:
            json.dump(m, f)
        os.replace(tmp, wav)
        os.replace(meta + f".{os.getpid()}.tmp", meta)
    finally:
        for left in (tmp, meta + f".{os.getpid()}.tmp"):
            if os.path.exists(left):
                os.remove(left)
    render.log(f"unseen stream: {m['hours']:.2f} h (" + ", ".join(f"{e} {h:.2f} h" for e, h in m["hoursByEngine"].items())
               + f") in {wav} ({time.time() - t0:.0f} s)")
    return wav, m


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--engines", default=",".join(ENGINES),
                    help="which engines' parts, comma-separated (rhvoice alone: rule v5b's stream, about 3.5 min to render)")
    args = ap.parse_args()
    try:
        wav, m = build(args.out, tuple(args.engines.split(",")))
    except ValueError as e:
        ap.error(str(e))
    print(f"{wav}: {m['hours']:.2f} h")


if __name__ == "__main__":
    main()
