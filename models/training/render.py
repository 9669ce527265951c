"""Rendered speech for training, cached under models/training/.cache/render/ (gitignored):
per engine, the trigger's spellings, near-miss words and a pool of ordinary sentences.

    python render.py --trigger openclaw      (train_head.py calls the same functions)
"""
import argparse
import hashlib
import os
import time

import numpy as np

import speech
import voices

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.environ.get("WAKE_RENDER_CACHE") or os.path.join(HERE, ".cache", "render")   # override: timing a clean run
RENDER_VERSION = 1
# Clips per engine, scaled by how fast each engine is (Piper is ~50x slower than espeak-ng).
SHARE = {"espeak-ng": 1.0, "piper-joe": 0.3, "pico-en-US": 0.2, "pico-en-GB": 0.2}
NEAR_SHARE = {"espeak-ng": 1.0, "piper-joe": 0.1, "pico-en-US": 0.2, "pico-en-GB": 0.2}


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _save(path, clips):
    # Written aside and renamed: trainings side by side read each other's renderings.
    lens = np.array([len(c) for c in clips], np.int64)
    tmp = f"{path[:-4]}.{os.getpid()}.tmp.npz"
    np.savez(tmp, audio=np.concatenate(clips) if clips else np.zeros(0, np.int16), lens=lens)
    os.replace(tmp, path)


def _load(path):
    with np.load(path) as z:
        audio, lens = z["audio"], z["lens"]
    offs = np.concatenate([[0], np.cumsum(lens)])
    return [audio[offs[i]:offs[i + 1]] for i in range(len(lens))]


def rendered(engine, kind, texts, n, seed):
    """n clips of texts (chosen at random) by engine, cached by everything that shapes them."""
    key = hashlib.sha1(repr((RENDER_VERSION, engine.name, kind, sorted(texts), n, seed)).encode()).hexdigest()[:12]
    os.makedirs(os.path.join(CACHE, engine.name), exist_ok=True)
    path = os.path.join(CACHE, engine.name, f"{kind}-{key}.npz")
    if os.path.exists(path):
        return _load(path)
    rng = np.random.default_rng(seed)
    out, t0 = [], time.time()
    for i in range(n):
        a = engine.render(texts[rng.integers(len(texts))], rng)
        if len(a) >= 1600:
            out.append(a)
        if (i + 1) % (100 if n <= 1000 else 500) == 0:
            log(f"  {engine.name} {kind}: {i + 1}/{n} ({time.time() - t0:.0f} s)")
    _save(path, out)
    return out


def sentences_for(split, exclude):
    s = [x for x in speech.docstring_sentences(split) if not speech.contains_trigger(x, exclude)]
    return s


def sentence_texts(rng, sentences, n):
    out = []
    for _ in range(n):
        k = 1 if rng.random() < 0.6 else 2
        out.append(" ".join(sentences[j] for j in rng.integers(len(sentences), size=k)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trigger", action="append", default=[])
    ap.add_argument("--pool", type=int, default=1600)
    ap.add_argument("--engine", action="append", default=[], help="only these engines")
    ap.add_argument("--skip-pool", action="store_true")
    ap.add_argument("--kokoro", action="store_true", help="Kokoro's renderings (recipe v6's extra canvases) only")
    args = ap.parse_args()
    import train_head
    if args.kokoro:
        eng = voices.kokoro_engine()
        if not args.skip_pool:
            log(f"kokoro pool: {len(train_head.render_kokoro_pool(eng))} sentences")
        for t in args.trigger:
            pos, nm = train_head.render_kokoro(eng, t)
            log(f"kokoro {t}: {len(pos)} triggers, {len(nm)} near misses")
        return
    for eng in voices.engines():
        if args.engine and eng.name not in args.engine:
            continue
        if not args.skip_pool:
            train_head.render_pool(eng, args.pool)
            train_head.render_pool(eng, 400, "val")
        for t in args.trigger:
            train_head.render_trigger(eng, t)


if __name__ == "__main__":
    main()
