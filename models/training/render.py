"""Rendered speech for training, cached under models/training/.cache/render/ (gitignored):
per engine, the trigger's spellings, near-miss words and a pool of ordinary sentences, split
into training and validation sentences. train_head.py and holdout.py build their canvases
from these functions; this module imports neither of them.

    python render.py --trigger openclaw      (train_head.py calls the same functions)
"""
import argparse
import functools
import hashlib
import os
import re
import time
import zlib

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

DEFAULT_TRIGGERS = ["openclaw", "claude", "computer"]


def own_recipe(phrase):
    """True for the default triggers and the stop word: they keep their hand-made near-miss lists and
    recipe v4 (train.sh never gives them recipe v16's near misses found by sound)."""
    return phrase.strip().lower() in DEFAULT_TRIGGERS + ["stop"]


def file_stem(phrase):
    s = re.sub(r"[^a-z0-9]+", "-", phrase.lower()).strip("-")
    return s or "x" + phrase.strip().encode("utf-8").hex()


# --- pools and triggers (train_head.py's rendering) ---------------------------------------------

@functools.lru_cache(maxsize=None)
def split_sentences(trigger=None):
    # The trigger itself is excluded too: an ordinary word ("stop") must never be a negative in
    # its own training. For the default triggers this removes nothing more, so their pools (and
    # the cache keys, which hash the texts) stay as they were.
    exclude = sorted(set(DEFAULT_TRIGGERS) | ({trigger.lower()} if trigger else set()))
    s = sentences_for("train", exclude)
    val = [x for x in s if zlib.crc32(x.encode()) % 10 == 0]
    tr = [x for x in s if zlib.crc32(x.encode()) % 10 != 0]
    return tr + speech.everyday_sentences(np.random.default_rng(11), 1500), val


def render_pool(eng, n=1600, split="train", trigger=None):
    tr, val = split_sentences(trigger)
    src = tr if split == "train" else val
    m = int(n * SHARE[eng.name])
    texts = sentence_texts(np.random.default_rng(5 if split == "train" else 6), src, m)
    return rendered(eng, f"pool-{split}", texts, m, 21 if split == "train" else 22)


MINE_SHARE = {"espeak-ng": 1.0, "piper-joe": 0.1, "pico-en-US": 0.2, "pico-en-GB": 0.2}


def render_mining_pool(eng, n=1600, trigger=None):
    """Sentences for hard-negative mining that no training canvas holds: the training sentences
    the training pool's texts never drew (a head scores the sentences it trained on low, so
    they hide what it confuses). Never the validation sentences."""
    tr, _ = split_sentences(trigger)
    used = set()        # replay render_pool's draws (sentence_texts, seed 5; every engine's texts are a prefix of espeak-ng's)
    rng = np.random.default_rng(5)
    for _ in range(int(1600 * max(SHARE.values()))):
        k = 1 if rng.random() < 0.6 else 2
        used.update(int(j) for j in rng.integers(len(tr), size=k))
    fresh = [x for i, x in enumerate(tr) if i not in used]
    m = int(n * MINE_SHARE[eng.name])
    texts = sentence_texts(np.random.default_rng(7), fresh, m)
    return rendered(eng, "pool-mine", texts, m, 23)


def near_words(trigger, phonetic=0, common=0):
    """Near-miss texts: the trigger's, every default trigger's and the generic ones; with phonetic
    (recipe v16, a new phrase only) also its phonetic.neighbours, with common (candidate recipe v17)
    also phonetic.common."""
    stem = file_stem(trigger)
    words = set(speech.near_misses(trigger)) | {w for t in DEFAULT_TRIGGERS if file_stem(t) != stem
                                                 for w in speech.near_misses(t)} | set(speech.GENERIC_NEAR_MISSES)
    # A generic near miss that holds a new trigger ("stop", "the stop") is no near miss of it
    # (the default triggers' lists are kept exactly as they were trained).
    if trigger.lower() in DEFAULT_TRIGGERS:
        return sorted(words)
    if phonetic:
        import phonetic as ph
        words |= set(ph.neighbours(trigger, phonetic))
    if common:
        import phonetic as ph
        words |= set(ph.common(trigger, common))
    return sorted(w for w in words if not speech.contains_trigger(w, [trigger]))


def pool_tag(trigger):
    """'' when the trigger occurs in none of the shared sentences (every default trigger, most
    phrases); else a suffix for the caches built from this trigger's own, smaller pool."""
    base = split_sentences()
    own = split_sentences(trigger)
    return "" if (len(base[0]), len(base[1])) == (len(own[0]), len(own[1])) else f"-x{file_stem(trigger)}"


def render_trigger(eng, trigger, positives=1800, near=1500, phonetic=0, common=0):
    stem = file_stem(trigger)
    seed = zlib.crc32((stem + eng.name).encode()) % 100000
    pos = rendered(eng, f"trigger-{stem}", voices.trigger_texts(trigger, eng.name),
                          int(positives * SHARE[eng.name]), seed)
    nm = rendered(eng, f"near-{stem}", near_words(trigger, phonetic, common), int(near * NEAR_SHARE[eng.name]), seed + 1)
    return pos, nm


# Extra engines, for training canvases only (never validation): Kokoro (recipe v6; small counts,
# it runs at about 1.5x real time on one core) and RHVoice (recipe v13; many times faster than real
# time: 800 sentences in about 1.5 min, render.py's progress lines).
EXTRA = {"kokoro": dict(trigger=500, near=400, pool=240), "rhvoice": dict(trigger=1500, near=800, pool=800)}


def render_extra(eng, trigger):
    """An extra engine's trigger renderings and near misses (the default triggers share one near-miss set)."""
    n = EXTRA[eng.name]
    stem = file_stem(trigger)
    pos = rendered(eng, f"trigger-{stem}", voices.trigger_texts(trigger, eng.name), n["trigger"],
                          zlib.crc32((stem + eng.name).encode()) % 100000)
    shared = trigger.lower() in DEFAULT_TRIGGERS
    nm = rendered(eng, "near-" + ("defaults" if shared else stem), near_words(trigger), n["near"],
                         31 if shared else zlib.crc32(stem.encode()) % 100000 + 31)
    return pos, nm


def render_extra_pool(eng, trigger=None):
    n = EXTRA[eng.name]["pool"]
    tr, _ = split_sentences(trigger)
    texts = sentence_texts(np.random.default_rng(8), tr, n)
    return rendered(eng, "pool-train", texts, n, 24)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trigger", action="append", default=[])
    ap.add_argument("--pool", type=int, default=1600)
    ap.add_argument("--engine", action="append", default=[], help="only these engines")
    ap.add_argument("--skip-pool", action="store_true")
    ap.add_argument("--kokoro", action="store_true", help="Kokoro's renderings (recipe v6's extra canvases) only")
    args = ap.parse_args()
    if args.kokoro:
        eng = voices.kokoro_engine()
        if not args.skip_pool:
            log(f"kokoro pool: {len(render_extra_pool(eng))} sentences")
        for t in args.trigger:
            pos, nm = render_extra(eng, t)
            log(f"kokoro {t}: {len(pos)} triggers, {len(nm)} near misses")
        return
    for eng in voices.engines():
        if args.engine and eng.name not in args.engine:
            continue
        if not args.skip_pool:
            render_pool(eng, args.pool)
            render_pool(eng, 400, "val")
        for t in args.trigger:
            render_trigger(eng, t)


if __name__ == "__main__":
    main()
