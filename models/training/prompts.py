"""Recorded human speech from Debian packages: the voice prompts of asterisk-core-sounds-LANG-wav
(four professional speakers in five languages, 8 kHz, CC-BY-SA), for false-wake figures
(real_negatives.py) and, in candidate recipe v12 (train_head.py --prompt-negatives), as training
negatives. A prompt whose transcript (the asterisk-core-sounds-LANG package's core-sounds-LANG.txt)
says a trigger word or "stop" is never used. Each set's prompts are split once, by a hash of their
names, into a training half and an evaluation half: a training run only ever draws from the
training half, so the evaluation half stays held out (`real_negatives.py --half eval`).
Standard library only (real_negatives.py runs on the system Python).
"""
import glob
import gzip
import os
import re
import sys
import wave
import zlib

# key: (language and speaker, prompts directory, package)
SETS = {"en": ("English, Allison", "/usr/share/asterisk/sounds/en_US_f_Allison", "asterisk-core-sounds-en-wav"),
        "es": ("Spanish, Allison", "/usr/share/asterisk/sounds/es_MX_f_Allison", "asterisk-core-sounds-es-wav"),
        "fr": ("French, June", "/usr/share/asterisk/sounds/fr_CA_f_June", "asterisk-core-sounds-fr-wav"),
        "it": ("Italian, Carlo", "/usr/share/asterisk/sounds/it_IT_m_Carlo", "asterisk-core-sounds-it-wav"),
        "ru": ("Russian, IvrvoiceRU", "/usr/share/asterisk/sounds/ru_RU_f_IvrvoiceRU", "asterisk-core-sounds-ru-wav")}
RATE = 8000
# The words a prompt must not say to count as a negative (by its transcript), in the sets' scripts too.
SAID = re.compile(r"\b(open ?claw|claude|computer|stop|компьютер\w*|стоп)\b", re.IGNORECASE)


def saying_a_trigger(key):
    """Prompt names whose transcript holds a trigger word or "stop"."""
    path = f"/usr/share/doc/asterisk-core-sounds-{key}/core-sounds-{key}.txt.gz"
    if not os.path.exists(path):
        sys.exit(f"prompts: no transcript {path}; install it with: apt-get install asterisk-core-sounds-{key}")
    names = set()
    with gzip.open(path, "rt", encoding="utf-8-sig") as f:
        for line in f:
            name, _, text = line.partition(":")
            if text and SAID.search(text):
                names.add(name.strip())
    return names


def half(key, name):
    """0: the training half, 1: the evaluation half (fixed by the set and the prompt's name)."""
    return zlib.crc32(f"{key}/{name}".encode()) % 2


def prompts(key, which="all"):
    """[(name, path)] of a set's usable prompts in name order: which = all, train (half 0) or eval (half 1);
    and the names left out because their transcript says a trigger."""
    _, sounds, package = SETS[key]
    files = sorted(glob.glob(os.path.join(sounds, "**", "*.wav"), recursive=True))
    if not files:
        sys.exit(f"prompts: no prompts under {sounds}; install them with: apt-get install {package}")
    leave_out = saying_a_trigger(key)
    out = []
    for f in files:
        name = os.path.splitext(os.path.relpath(f, sounds))[0]
        if name in leave_out or (which == "train" and half(key, name) != 0) or (which == "eval" and half(key, name) != 1):
            continue
        out.append((name, f))
    return out, sorted(leave_out)


def read(path):
    """A prompt's samples (8 kHz mono 16-bit little-endian bytes), or None in another format."""
    with wave.open(path, "rb") as r:
        if (r.getnchannels(), r.getsampwidth(), r.getframerate()) != (1, 2, RATE):
            return None
        return r.readframes(r.getnframes())
