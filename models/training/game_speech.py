"""Recorded English speech from a Debian package: the voice acting of Flight of the Amazon Queen
(`flight-of-the-amazon-queen`, the talkie ScummVM released as freeware; a 35 MB download): about
6,700 lines said by the game's cast of professional actors, 11 kHz MP3 in one resource file. They are
false-wake figures for the heads (game_negatives.py), in English, the language the heads are for.

The resource file (`queen.1c`) opens with a table: "QTBL", a 6-byte version ("CEM10": CD, English),
two flag bytes, a compression byte (1: MP3), a big-endian entry count, then per entry a 12-byte name, a bundle byte,
a big-endian offset and size. Each `.SB` entry is one spoken line as an MP3 stream. The game's text
(its `.CUT`, `.DOG` and `.JAS` entries) never says a trigger ("computer", "claude", "openclaw"), so
every line is a negative for the wake heads; 34 of its text lines say "stop" ("we've gotta stop
Floda"; three say "stopped"), and which spoken line does is not known here, so the stop word is not
scored on it. Each line falls
once, by a hash of its name, into a training half and an evaluation half, as stamps.py splits.
Standard library and ffmpeg (to decode MP3 to 16 kHz). `python3 models/training/game_speech.py` prints each
half's lines and hours of speech (about 3 minutes: it decodes every line).
"""
import os
import re
import struct
import subprocess
import sys
import zlib
from concurrent.futures import ThreadPoolExecutor

GAME = "/usr/share/scummvm/flight-of-the-amazon-queen/queen.1c"
PACKAGE = "flight-of-the-amazon-queen"
RATE = 16000
DECODER = ["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-f", "mp3", "-i", "pipe:0"]
# What the game's text would have to hold for a line to be able to say a trigger.
TRIGGER_TEXT = re.compile(rb"comput|claud|open ?claw", re.IGNORECASE)
_HEADER = b"QTBL"


def entries():
    """[(name, offset, size)] of the resource file's table; exits with the fix when it is missing or not one."""
    if not os.path.exists(GAME):
        sys.exit(f"game_speech: no {GAME}; install it with: apt-get install {PACKAGE}")
    with open(GAME, "rb") as f:
        head = f.read(15)
        if head[:4] != _HEADER:
            sys.exit(f"game_speech: {GAME} does not open with a QTBL table (a version this script does not read)")
        if head[12] != 1:  # bytes 10-11: flags
            sys.exit(f"game_speech: {GAME}: compression {head[12]}, not MP3 (1), which this script reads")
        n = struct.unpack(">H", head[13:15])[0]
        table = f.read(21 * n)
    out = []
    for i in range(n):
        e = table[21 * i:21 * (i + 1)]
        name = e[:12].split(b"\0")[0].decode("ascii")
        offset, size = struct.unpack(">II", e[13:21])
        out.append((name, offset, size))
    return out


def _blob(offset, size):
    with open(GAME, "rb") as f:
        f.seek(offset)
        return f.read(size)


def trigger_in_text():
    """True when any of the game's text says a trigger (then its lines are not all negatives)."""
    return any(TRIGGER_TEXT.search(_blob(o, s)) for name, o, s in entries()
               if name.rsplit(".", 1)[-1] in ("CUT", "DOG", "JAS"))


def lines():
    """[(name, offset, size)] of every spoken line (`.SB`), in name order."""
    return sorted((e for e in entries() if e[0].endswith(".SB") and e[2] > 0), key=lambda e: e[0])


def half(name):
    """0: the training half, 1: the evaluation half (fixed by the line's name)."""
    return zlib.crc32(name.encode()) % 2


def negatives(which="all"):
    """[(name, (offset, size))] of the lines in `which` (all, train or eval)."""
    return [(name, (o, s)) for name, o, s in lines()
            if which == "all" or half(name) == (0 if which == "train" else 1)]


def read(where):
    """A line's samples, where = (offset, size), as 16 kHz mono 16-bit little-endian bytes; exits with
    ffmpeg's message when it cannot decode one (every line decodes with Debian's ffmpeg)."""
    try:
        run = subprocess.run(DECODER + ["-ar", str(RATE), "-ac", "1", "-f", "s16le", "pipe:1"],
                             input=_blob(*where), capture_output=True)
    except FileNotFoundError:
        sys.exit("game_speech: ffmpeg not found; install it with: apt-get install ffmpeg")
    if run.returncode != 0 or not run.stdout:
        sys.exit(f"game_speech: ffmpeg could not decode the line at {where[0]} in {GAME}: "
                 f"{run.stderr.decode(errors='replace').strip() or 'no samples'} (its MP3 decoder is in libavcodec: apt-get install ffmpeg)")
    return run.stdout


def read_many(wheres):
    """read() of each, two decoders at a time, in order."""
    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(read, wheres))


if __name__ == "__main__":   # each half's lines and hours of speech (the joined streams' gaps not counted)
    for which in ("train", "eval"):
        got = negatives(which)
        seconds = sum(len(d) for d in read_many([w for _, w in got])) / 2 / RATE
        print(f"{which}: {len(got)} lines, {seconds / 3600:.2f} h of speech")
