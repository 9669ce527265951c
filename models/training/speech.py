"""espeak-ng through ctypes (libespeak-ng.so.1, the Debian package), plus the voice split and
the text sources. One engine per process: espeak-ng keeps its state in globals.

Voices are split once, by name, into a training set and a held-out test set; evaluate.py
uses only the held-out ones (and noise types training never sees), so its figures are on
voices and variants the models never heard.
"""
import ast
import ctypes
import os
import re
import sysconfig
import zlib

import numpy as np
from scipy.signal import resample_poly

# --- voices -------------------------------------------------------------------------------

# Every English espeak-ng voice (the mbrola ones need mbrola, which Debian does not install
# by default, so they are left out).
TRAIN_VOICES = ["en", "en-us", "en-029", "en-gb-scotland", "en-gb-x-gbclan", "en-gb-x-rp"]
TEST_VOICES = ["en-us-nyc", "en-gb-x-gbcwmd"]


def _variants():
    base = "/usr/lib/x86_64-linux-gnu/espeak-ng-data/voices/!v"
    for cand in (base, "/usr/share/espeak-ng-data/voices/!v"):
        if os.path.isdir(cand):
            return sorted(v for v in os.listdir(cand) if " " not in v)
    return ["m1", "m2", "m3", "f1", "f2", "f3"]


ALL_VARIANTS = _variants()
# Every fifth variant (by sorted name, offset 2) is held out for the test set.
TEST_VARIANTS = [v for i, v in enumerate(ALL_VARIANTS) if i % 5 == 2]
TRAIN_VARIANTS = [v for i, v in enumerate(ALL_VARIANTS) if i % 5 != 2]


# --- engine -------------------------------------------------------------------------------

_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p)


class Espeak:
    """Synchronous espeak-ng; synth() returns 16 kHz int16 numpy audio."""

    RATE, VOLUME, PITCH, RANGE = 1, 2, 3, 4

    def __init__(self):
        self.lib = ctypes.CDLL("libespeak-ng.so.1")
        self.lib.espeak_Initialize.restype = ctypes.c_int
        # AUDIO_OUTPUT_SYNCHRONOUS = 2, 100 ms buffers, default data path, don't exit on error.
        rate = self.lib.espeak_Initialize(2, 100, None, 0x8000)
        if rate <= 0:
            raise RuntimeError("espeak_Initialize failed")
        self.rate = rate
        self._chunks = []

        def cb(wav, n, events):
            if n > 0 and wav:
                self._chunks.append(np.ctypeslib.as_array(wav, shape=(n,)).copy())
            return 0

        self._cb = _CALLBACK(cb)
        self.lib.espeak_SetSynthCallback(self._cb)
        self.lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        self.lib.espeak_Synth.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int,
                                          ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p]

    def synth(self, text, voice="en-us", variant=None, rate=175, pitch=50, pitch_range=50):
        name = voice if not variant else f"{voice}+{variant}"
        if self.lib.espeak_SetVoiceByName(name.encode()) != 0:
            raise RuntimeError(f"unknown voice {name}")
        self.lib.espeak_SetParameter(self.RATE, int(rate), 0)
        self.lib.espeak_SetParameter(self.PITCH, int(pitch), 0)
        self.lib.espeak_SetParameter(self.RANGE, int(pitch_range), 0)
        self.lib.espeak_SetParameter(self.VOLUME, 100, 0)
        self._chunks = []
        data = text.encode("utf-8")
        # flags: espeakCHARS_UTF8; position type POS_CHARACTER.
        self.lib.espeak_Synth(data, len(data) + 1, 0, 1, 0, 1, None, None)
        audio = np.concatenate(self._chunks) if self._chunks else np.zeros(0, np.int16)
        return to16k(audio, self.rate)


def to16k(audio, rate):
    if rate == 16000:
        return audio.astype(np.int16)
    g = np.gcd(16000, rate)
    y = resample_poly(audio.astype(np.float64), 16000 // g, rate // g)
    return np.clip(np.round(y), -32768, 32767).astype(np.int16)


def speech_bounds(audio, threshold_db=-35.0):
    """(start, end) sample indices of the speech in a clean clip: 10 ms frames whose RMS is
    within threshold_db of the loudest one."""
    x = audio.astype(np.float64)
    n = len(x) // 160
    if n == 0:
        return 0, len(x)
    rms = np.sqrt((x[: n * 160].reshape(n, 160) ** 2).mean(axis=1) + 1e-9)
    db = 20 * np.log10(rms / rms.max())
    on = np.nonzero(db > threshold_db)[0]
    return int(on[0] * 160), int((on[-1] + 1) * 160)


# --- text ---------------------------------------------------------------------------------

# Words that sound like part of a trigger but are not it. True homophones ("clawed" for
# "claude") are deliberately absent: no acoustic model can tell them apart.
NEAR_MISSES = {
    "openclaw": ["open", "claw", "open the door", "open call", "open club", "open clock", "oh pen",
                 "opening", "open law", "broken claw", "opal", "open letter", "clause", "clown",
                 "open cloud", "hope and law", "open flaw", "open car", "clock", "opera"],
    "claude": ["cloud", "clause", "claw", "clod", "code", "clued", "crowd", "loud", "called", "cold",
               "claws", "clot", "cord", "glued", "clone", "closed", "load", "applaud", "fraud", "claudia"],
    "computer": ["commuter", "computation", "compute", "competitor", "compete", "computing", "amputee",
                 "compote", "composer", "commuted", "computed", "pewter", "company", "competent",
                 "come here", "compost", "tutor", "campus", "scooter", "commute"],
    # The stop word (issue 14): short words that share its onset, vowel or coda.
    "stop": ["top", "shop", "step", "stock", "spot", "stuff", "store", "story", "drop", "pop", "stomp",
             "stone", "start", "stab", "sock", "cop", "stuck", "stay", "hop on", "a top"],
}

GENERIC_NEAR_MISSES = ["okay", "hey", "hello", "yes", "no", "open", "clear", "close", "call", "play",
                       "stop", "later", "color", "cool", "clean", "computer science", "cloudy"]


def near_misses(trigger):
    key = trigger.lower().replace(" ", "")
    if key in NEAR_MISSES:
        return NEAR_MISSES[key]
    # An arbitrary phrase: its single words and a few edits of them.
    words = re.findall(r"[a-z]+", trigger.lower())
    out = list(GENERIC_NEAR_MISSES)
    for w in words:
        out += [w[:-1] or w, w + "s" if not w.endswith("s") else w[:-1], "the " + w]
    if len(words) > 1:
        out += words
    return [o for o in out if o.replace(" ", "") != key]


def trigger_spellings(trigger):
    """Text renderings espeak-ng says as the trigger (it reads each a little differently)."""
    t = trigger.strip()
    out = {t, t.lower(), t.capitalize(), t + "!", t + "?", t + ","}
    if t.lower() == "openclaw":
        out |= {"OpenClaw", "open claw", "Open Claw"}
    if " " not in t and len(t) > 6 and t.lower() != "computer":
        pass
    return sorted(out)


def contains_trigger(sentence, triggers):
    s = " " + re.sub(r"[^a-z]+", " ", sentence.lower()) + " "
    squashed = s.replace(" ", "")
    for t in triggers:
        tt = re.sub(r"[^a-z]+", " ", t.lower()).strip()
        if f" {tt} " in s or f" {tt}s " in s or tt.replace(" ", "") in squashed:
            return True
    return False


_EVERYDAY = {
    "subj": ["I", "we", "you", "my sister", "the neighbours", "our team", "the kids", "my friend", "she", "he",
             "they", "the teacher", "the driver", "my mother", "the doctor", "everyone", "nobody", "the cat"],
    "verb": ["bought", "found", "cooked", "painted", "washed", "carried", "forgot", "fixed", "ordered", "liked",
             "cleaned", "borrowed", "moved", "watched", "opened", "closed", "dropped", "sold", "read", "wrote"],
    "obj": ["the blue chair", "a loaf of bread", "some apples", "the old bicycle", "a letter", "the kitchen",
            "a cup of tea", "the garden fence", "the window", "a new phone", "the map", "a warm jacket",
            "the red door", "two tickets", "the laundry", "a birthday cake", "the car keys", "the newspaper"],
    "when": ["yesterday", "this morning", "last week", "on Sunday", "after lunch", "before dinner", "at noon",
             "in the evening", "every day", "tonight", "later", "an hour ago", "at the weekend", "in April"],
    "tail": ["because it was raining", "and then went home", "without saying a word", "while the radio played",
             "so we could leave early", "near the station", "at the market", "with a little help",
             "before the shop closed", "and it worked", "but it was too late", "for the first time"],
}


def everyday_sentences(rng, n):
    out = []
    for _ in range(n):
        parts = [rng.choice(_EVERYDAY["subj"]), rng.choice(_EVERYDAY["verb"]), rng.choice(_EVERYDAY["obj"])]
        if rng.random() < 0.7:
            parts.append(rng.choice(_EVERYDAY["when"]))
        if rng.random() < 0.5:
            parts.append(rng.choice(_EVERYDAY["tail"]))
        s = " ".join(parts)
        out.append(s[0].upper() + s[1:] + rng.choice([".", ".", "?", "!"]))
    return out


_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+")
_OK = re.compile(r"^[A-Za-z][A-Za-z ,;:'\-]+[.!?]$")


def docstring_sentences(split):
    """Ordinary English sentences from the docstrings of Python's standard library.
    split: 'train' or 'test', by a CRC of the module path (1 in 4 modules is test)."""
    root = sysconfig.get_paths()["stdlib"]
    out = []
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in ("test", "tests", "site-packages", "idlelib", "lib2to3", "__pycache__"))
        for f in sorted(files):
            if not f.endswith(".py"):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, root)
            is_test = zlib.crc32(rel.encode()) % 4 == 0
            if is_test != (split == "test"):
                continue
            try:
                tree = ast.parse(open(path, encoding="utf-8", errors="ignore").read())
            except (SyntaxError, ValueError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    doc = ast.get_docstring(node)
                    if not doc:
                        continue
                    text = " ".join(doc.split())
                    for s in _SENT_SPLIT.split(text):
                        words = s.split()
                        if 4 <= len(words) <= 24 and _OK.match(s) and sum(w.isupper() for w in words) < 2:
                            out.append(s)
    return sorted(set(out))
