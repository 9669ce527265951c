"""Writes the feature fixture for Tests/WakeWordTests: a fixed espeak-ng clip with seeded
noise (features-input.wav, 16 kHz) and its log-mel frames from features.py (features.json),
the reference LogMelFeatures.swift must match within 1e-3.

    models/training/.venv/bin/python models/training/make_fixtures.py
"""
import os
import wave

import numpy as np

import features
import speech

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.normpath(os.path.join(HERE, "..", "..", "Tests", "WakeWordTests", "Fixtures"))


def main():
    eng = speech.Espeak()
    clip = eng.synth("Openclaw, lights on.", "en-us", None, rate=175)
    rng = np.random.default_rng(5)
    x = np.concatenate([np.zeros(1234), clip.astype(np.float64), np.zeros(800)])
    x = x + rng.normal(0, 30, len(x))
    x[3000:3100] = 0                                  # a stretch of digital silence (log floor)
    x = np.clip(np.round(x), -32768, 32767).astype(np.int16)
    os.makedirs(FIX, exist_ok=True)
    with wave.open(os.path.join(FIX, "features-input.wav"), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(x.tobytes())
    f = features.logmel(x)
    with open(os.path.join(FIX, "features.json"), "w") as out:
        out.write('{"samples": %d,\n"frames": [\n' % len(x))
        out.write(",\n".join("[" + ",".join("%.6f" % v for v in row) + "]" for row in f))
        out.write("]}\n")
    print(f"wrote {len(x)} samples, {len(f)} frames to {FIX}")


if __name__ == "__main__":
    main()
