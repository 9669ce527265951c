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


def _samples(path):
    """Total samples from a FLAC file's STREAMINFO block (16 kHz mono 16-bit is checked)."""
    with open(path, "rb") as f:
        head = f.read(42)
    v = int.from_bytes(head[18:26], "big")
    if head[:4] != b"fLaC" or v >> 44 != 16000 or ((v >> 41) & 7) != 0 or ((v >> 36) & 31) != 15 or not v & ((1 << 36) - 1):
        raise SystemExit(f"real.py: {path} is not 16 kHz mono 16-bit FLAC with a sample count")
    return v & ((1 << 36) - 1)


def _decode_all(paths):
    """One ffmpeg run over all files (concat demuxer): a process per clip is slow on a busy machine."""
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as lst:
        lst.write("".join(f"file '{p}'\n" for p in paths))
    try:
        r = subprocess.run(["ffmpeg", "-v", "error", "-f", "concat", "-safe", "0", "-i", lst.name, "-f", "s16le",
                            "-ac", "1", "-ar", "16000", "-"], capture_output=True, check=True)
    finally:
        os.remove(lst.name)
    return np.frombuffer(r.stdout, np.int16)


def clips(word, cache_dir):
    """[(name, int16 16 kHz)] of one word, sorted by clip number; decoded once into cache_dir."""
    src = os.path.join(real_dir(), word)
    names = sorted((f for f in os.listdir(src) if f.endswith(".flac")), key=lambda f: (len(f), f))
    path = os.path.join(cache_dir, f"real-{word}-{len(names)}.npz")
    if not os.path.exists(path):
        os.makedirs(cache_dir, exist_ok=True)
        paths = [os.path.join(src, n) for n in names]
        lens = np.array([_samples(p) for p in paths])
        audio = _decode_all(paths)
        if len(audio) != lens.sum():
            raise SystemExit(f"real.py: {word}: decoded {len(audio)} samples, the FLAC headers say {lens.sum()}")
        np.savez(path + ".tmp.npz", names=np.array(names), lens=lens, audio=audio)
        os.replace(path + ".tmp.npz", path)
    with np.load(path) as z:         # each z[...] reads the array anew: read each once
        names, lens, audio = z["names"], z["lens"], z["audio"]
    offs = np.concatenate([[0], np.cumsum(lens)])
    return [(str(n), audio[offs[i]:offs[i + 1]]) for i, n in enumerate(names)]


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
