"""A validation stream of voices a recipe-v4 head never trained on (threshold rule v5, RULE-V19.md):
the validation sentences (render.split_sentences: never a training sentence, never a trigger)
read by RHVoice's two English speakers (bdl, clb) and by Kokoro's mixed speakers, back to back in
30 s segments, each through a training room and training noise (canvas.finish, as rule v2's
stream is built). Neither engine is flite or festival, and neither trains a recipe-v4 head: a
head that trained on one of them (recipe v13's --rhvoice, the stop word's --kokoro) is refused
by the caller, since its "unseen" voices would not be.

    .venv/bin/python unseen_stream.py [--out DIR]     (builds the WAV once; prints its path and hours)

Renders ~1.5 h of RHVoice (about 2 min) and 0.5 h of Kokoro (about 15 min on one core), cached in
the render cache; the joined WAV is kept in --out (default .cache/unseen).
"""
import argparse
import hashlib
import json
import os
import time
import wave

import numpy as np

import augment
import render
from canvas import finish

HERE = os.path.dirname(os.path.abspath(__file__))
ENGINES = ("rhvoice", "kokoro")                 # what a head using this stream must not have trained on
# Clips of one or two validation sentences (render.sentence_texts), ~4.5 s each on average.
CLIPS = {"rhvoice": 1300, "kokoro": 400}
SEGMENT_S = 30
SEED = 1919


class TrainingNoise:
    """Training's own noise generators only (coloured noise, a fan, synthetic music): no speech
    babble, so the stream's only voices are the unseen ones."""

    def __init__(self, rng):
        self.music = [augment.train_music(rng, 10 * 16000) for _ in range(40)]

    def __call__(self, rng, n):
        r = rng.random()
        if r < 0.5:
            return augment.coloured_noise(rng, n, float(rng.choice([0.0, 1.0, 2.0])))
        if r < 0.75:
            return augment.fan_noise(rng, n)
        out = np.concatenate([self.music[rng.integers(len(self.music))] for _ in range(n // 160000 + 1)])[:n]
        return out / (np.std(out) + 1e-12)


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


def clips():
    _, val = render.split_sentences()
    out = {}
    for i, name in enumerate(ENGINES):
        texts = render.sentence_texts(np.random.default_rng(SEED + i), val, CLIPS[name])
        out[name] = render.rendered(_Named(name), "unseen-val", texts, CLIPS[name], SEED + 10 + i)
    return out


def build(out_dir):
    """The stream's WAV (16 kHz mono int16) and its meta {hours, by engine}; built once per content."""
    by_engine = clips()
    key = hashlib.sha1(repr((SEED, SEGMENT_S, [(e, len(c), int(sum(map(len, c)))) for e, c in by_engine.items()]))
                       .encode()).hexdigest()[:12]
    os.makedirs(out_dir, exist_ok=True)
    wav, meta = os.path.join(out_dir, f"unseen-{key}.wav"), os.path.join(out_dir, f"unseen-{key}.json")
    if os.path.exists(wav) and os.path.exists(meta):
        return wav, json.load(open(meta))
    rng = np.random.default_rng(SEED)
    noise, t0 = TrainingNoise(rng), time.time()
    tmp = f"{wav}.{os.getpid()}.tmp"
    seconds = {}
    with wave.open(tmp, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        for name, pool in by_engine.items():           # each engine's segments together: its share is reported
            order, i, total = rng.permutation(len(pool)), 0, 0
            while i < len(pool):
                seg = []
                while i < len(pool) and sum(map(len, seg)) < SEGMENT_S * 16000:
                    seg += [pool[order[i]].astype(np.float64), np.zeros(int(rng.uniform(0.15, 1.2) * 16000))]
                    i += 1
                y = finish(rng, np.concatenate(seg), noise, snr=(3.0, 30.0))
                w.writeframes(y.astype("<i2").tobytes())
                total += len(y)
            seconds[name] = total / 16000
    os.replace(tmp, wav)
    m = {"hours": sum(seconds.values()) / 3600, "hoursByEngine": {e: s / 3600 for e, s in seconds.items()},
         "sentences": "render.split_sentences() validation half", "seed": SEED}
    json.dump(m, open(meta, "w"))
    render.log(f"unseen stream: {m['hours']:.2f} h (" + ", ".join(f"{e} {h:.2f} h" for e, h in m["hoursByEngine"].items())
               + f") in {wav} ({time.time() - t0:.0f} s)")
    return wav, m


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(HERE, ".cache", "unseen"))
    wav, m = build(ap.parse_args().out)
    print(f"{wav}: {m['hours']:.2f} h")


if __name__ == "__main__":
    main()
