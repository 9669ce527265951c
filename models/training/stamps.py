"""Recorded human speech from a Debian package: the spoken stamp descriptions of Tux Paint
(`tuxpaint-stamps-default`, GPL; a 160 MB download): short sentences read by volunteers, one or a few per language,
in about a dozen languages, 44.1 kHz Ogg Vorbis. They are false-wake figures for the heads
(stamp_negatives.py), and the stop sign's descriptions are the first real recordings of "stop" here.

Each description `NAME_desc_LANG.ogg` (English: `NAME_desc.ogg`) has its text in `NAME.txt` (the first
line in English, `LANG.utf8=...` for the others). A description whose text holds a trigger or "stop"
anywhere, even inside another word ("stoptegn", "компьютерная"), is never a negative; those that say
"stop" are listed apart (`stops`). Each description falls once, by a hash of its name, into a training
half and an evaluation half, as prompts.py splits the voice prompts.
Standard library and sox (to decode Ogg Vorbis to 16 kHz).
"""
import glob
import os
import re
import subprocess
import sys
import zlib

STAMPS = "/usr/share/tuxpaint/stamps"
PACKAGE = "tuxpaint-stamps-default"
RATE = 16000
# A trigger or "stop" in any script the descriptions use, matched inside words too (a negative must not
# even sound like one): Latin (computer, komputer, kompjuter), Cyrillic (компьютер, компютър, камп'ютэр, кампутар)
# and Greek spellings.
SAID = re.compile(r"stop|стоп|στοπ|claud|клод|comput|komp.?i?j?ut|комп.?ют|камп.?ю?т|κομπιούτ|open ?claw", re.IGNORECASE)
STOP = re.compile(r"\b(stop|стоп|στοπ)\b", re.IGNORECASE)
# No dither (-D): sox's default dither draws new noise on every run, and the same file must decode the same.
DECODER = ["sox", "-D"]
_FILE = re.compile(r"(.*)_desc(?:_([A-Za-z]{2,3}(?:_[A-Z]{2})?))?\.(ogg|wav)$")


def _text(txt, lang):
    """The description's text in its language, or None when the .txt has no line for it."""
    try:
        with open(txt, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    if lang == "en":
        return lines[0].strip() if lines else None
    return next((line.split("=", 1)[1].strip() for line in lines if line.startswith(lang + ".utf8=")), None)


def descriptions():
    """[(lang, name, path, text)] of every spoken description whose text is known, in name order.
    name: the stamp's path under STAMPS with the language, e.g. town/roadsigns/stop_fr."""
    if not os.path.isdir(STAMPS):
        sys.exit(f"stamps: no {STAMPS}; install it with: apt-get install {PACKAGE}")
    out = []
    for path in sorted(glob.glob(os.path.join(STAMPS, "**", "*_desc*"), recursive=True)):
        m = _FILE.match(os.path.relpath(path, STAMPS))
        if not m:
            continue
        base, lang = m.group(1), m.group(2) or "en"
        text = _text(os.path.join(STAMPS, base + ".txt"), lang)
        if text:
            out.append((lang, f"{base}_{lang}", path, text))
    return out


def half(name):
    """0: the training half, 1: the evaluation half (fixed by the description's name)."""
    return zlib.crc32(name.encode()) % 2


def negatives(which="all"):
    """{lang: [(name, path)]} of the descriptions that say no trigger and no "stop" (which: all,
    train or eval), and [(name, text)] of those left out."""
    by_lang, left = {}, []
    for lang, name, path, text in descriptions():
        if SAID.search(text):
            left.append((name, text))
        elif which == "all" or half(name) == (0 if which == "train" else 1):
            by_lang.setdefault(lang, []).append((name, path))
    return by_lang, left


def stops():
    """[(name, path, text)] of the descriptions that say "stop" as a word of its own (the stop sign's)."""
    return [(name, path, text) for _, name, path, text in descriptions() if STOP.search(text)]


def read(path):
    """A description's samples as 16 kHz mono 16-bit little-endian bytes (sox decodes and resamples, the same each run)."""
    try:
        run = subprocess.run(DECODER + [path, "-t", "raw", "-r", str(RATE), "-c", "1", "-b", "16", "-e", "signed-integer",
                                        "-L", "-"], capture_output=True)
    except FileNotFoundError:
        sys.exit("stamps: sox not found; install it with: apt-get install sox")
    if run.returncode != 0:
        sys.exit(f"stamps: sox could not read {path}: {run.stderr.decode(errors='replace').strip()} "
                 "(its Ogg Vorbis reader is in libsox-fmt-base: apt-get install sox)")
    return run.stdout
