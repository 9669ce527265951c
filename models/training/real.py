"""Real people saying wake words: the 1,882 crowd-sourced clips in ../shared/wake-real (Picovoice's
wake-word benchmark, Apache-2.0; alexa, jarvis, smart mirror, snowboy, view glass; 16 kHz FLAC,
~3 s each). Read by realspeech.py (the real-speech yardstick) and by train_head.py's candidate
recipe v9 (--real-negatives: other words' clips as negatives).

Each word's clips are split once, by a hash of their names, into a training half and an evaluation
half; a training run only ever draws from the training half, and never from its own word or from
the words it is told to leave out (the yardstick leaves out both of its scored words). The files
carry no speaker ids, so the halves share speakers.
"""
import os
import subprocess
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
WORDS = {"alexa": "alexa", "jarvis": "jarvis", "smart-mirror": "smart mirror", "snowboy": "snowboy",
         "view-glass": "view glass"}
YARDSTICK = ["alexa", "jarvis"]          # scored by realspeech.py; their heads never see either word's clips


def real_dir():
    d = os.environ.get("WAKE_REAL_DIR") or os.path.normpath(os.path.join(REPO, "..", "shared", "wake-real"))
    if not os.path.isdir(os.path.join(d, "alexa")):
        raise SystemExit(f"real.py: no real recordings in {d} (set WAKE_REAL_DIR to the wake-real folder)")
    return d


def half(word, name):
    """0: the training half, 1: the evaluation half (fixed by the clip's name)."""
    return zlib.crc32(f"{word}/{name}".encode()) % 2


def _decode(path):
    r = subprocess.run(["ffmpeg", "-v", "error", "-i", path, "-f", "s16le", "-ac", "1", "-ar", "16000", "-"],
                       capture_output=True, check=True)
    return np.frombuffer(r.stdout, np.int16)


def clips(word, cache_dir):
    """[(name, int16 16 kHz)] of one word, sorted by clip number; decoded once into cache_dir."""
    src = os.path.join(real_dir(), word)
    names = sorted((f for f in os.listdir(src) if f.endswith(".flac")), key=lambda f: int(f.split(".")[0]))
    path = os.path.join(cache_dir, f"real-{word}-{len(names)}.npz")
    if not os.path.exists(path):
        os.makedirs(cache_dir, exist_ok=True)
        arrs = [_decode(os.path.join(src, n)) for n in names]
        np.savez(path + ".tmp.npz", names=np.array(names), lens=np.array([len(a) for a in arrs]),
                 audio=np.concatenate(arrs))
        os.replace(path + ".tmp.npz", path)
    with np.load(path) as z:
        offs = np.concatenate([[0], np.cumsum(z["lens"])])
        return [(str(n), z["audio"][offs[i]:offs[i + 1]]) for i, n in enumerate(z["names"])]


def negative_words(trigger_stem, exclude=()):
    """The words whose clips may be negatives for a trigger: never its own, never one inside it
    or around it, never one excluded."""
    t = trigger_stem.replace("-", " ")
    return [w for w, spoken in WORDS.items()
            if w not in exclude and w != trigger_stem and spoken not in t and t not in spoken]


def training_negatives(trigger_stem, cache_dir, exclude=()):
    """The training half of every allowed word's clips: [(word/name, int16)]."""
    return [(f"{w}/{n}", a) for w in negative_words(trigger_stem, exclude) for n, a in clips(w, cache_dir)
            if half(w, n) == 0]
