"""The probe RULE-V13.md quotes before it ran: do the shipped heads hear RHVoice's speakers?

    cd models/training && .venv/bin/python rhvoice_probe.py     (after swift build -c release)

Per trigger: 40 English renderings (bdl and clb, 20 each, rate and pitch drawn in ±0.4; the shipped
wake heads loaded together at the default sensitivity, the stop head alone at 0.5), and 36 accented
ones (the twelve other speakers in turn, each word in their own spelling; the trigger's head alone at
sensitivity 0.7), each clip 0.5 s after silence and 2.5 s before the next. Counts the wakes for the
trigger. It decides nothing; it says whether the voices are new to the heads."""
import argparse
import json
import os
import subprocess
import tempfile
import wave

import numpy as np
from scipy.signal import resample_poly

import rhvoice

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
ENGLISH_TEXTS = {"openclaw": ["openclaw", "Openclaw.", "open claw"], "claude": ["claude", "Claude.", "Claude!"],
                 "computer": ["computer", "Computer."], "stop": ["stop", "Stop.", "Stop!"]}


def pcm(eng, text, voice, sets=None):
    b = eng.tts.get(text, voice=voice, format_="pcm", **({"sets": sets} if sets else {}))
    return np.frombuffer(b[:len(b) // 2 * 2], np.int16)


def write(path, clips):
    x = np.concatenate([np.concatenate([np.zeros(8000), c.astype(float), np.zeros(40000)]) for c in clips])
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(np.clip(x, -32768, 32767).astype(np.int16).tobytes())


def wakes(binary, wav, trigger, phrases=None, sensitivity=None):
    cmd = [binary, "wake", "detect", "--input", wav] + (["--phrases", phrases] if phrases else []) \
        + (["--sensitivity", str(sensitivity)] if sensitivity else [])
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return sum(1 for line in out.splitlines() if line.strip() and json.loads(line).get("phrase") == trigger)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clawvoice", default=os.path.join(REPO, ".build", "release", "clawvoice"))
    args = ap.parse_args()
    eng = rhvoice.rhvoice_engine()
    tmp = tempfile.mkdtemp(prefix="rhvoice-probe-")
    rng = np.random.default_rng(1)
    for trig, texts in ENGLISH_TEXTS.items():
        clips = []
        for voice in rhvoice.ENGLISH:
            for _ in range(20):
                text = str(rng.choice(texts))
                sets = {"absolute_rate": float(rng.uniform(-0.4, 0.4)), "absolute_pitch": float(rng.uniform(-0.4, 0.4))}
                clips.append(resample_poly(pcm(eng, text, voice, sets).astype(float), 2, 3))
        path = os.path.join(tmp, f"english-{trig}.wav")
        write(path, clips)
        n = wakes(args.clawvoice, path, trig, phrases="stop" if trig == "stop" else None)
        print(f"English (bdl, clb), {trig}: {n} of {len(clips)} heard "
              f"({'the stop head alone at 0.5' if trig == 'stop' else 'the wake heads together, default sensitivity'})")
    rng = np.random.default_rng(3)
    accented = sorted(rhvoice.ACCENTED)
    for trig in ENGLISH_TEXTS:
        clips = []
        for k in range(36):
            voice = accented[k % len(accented)]
            said = str(rng.choice(rhvoice.SPELLINGS[rhvoice.ACCENTED[voice]][trig]))
            clips.append(rhvoice.speech.to16k(pcm(eng, said, voice), rhvoice.RHVoiceEngine.RATE))
        path = os.path.join(tmp, f"accented-{trig}.wav")
        write(path, clips)
        n = wakes(args.clawvoice, path, trig, phrases=trig, sensitivity=0.7)
        print(f"accented (12 speakers), {trig}: {n} of {len(clips)} heard (its head alone at sensitivity 0.7)")


if __name__ == "__main__":
    main()
