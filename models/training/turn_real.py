"""The end-of-turn features on real speech (issue 25): the English asterisk voice prompts that pause
inside (the ones `clawvoice-bench --endpoint` scores as real recordings; one speaker, Allison, read
speech, her own pauses), through the node's own features (`clawvoice-bench --turn-features`), at
200 ms into every pause after speech: how well each feature, and models/turn.json's score when it
exists, tells the prompt's end from a pause inside it (AUC; 0.5 is chance, under 0.5 reads it
backwards).

    apt-get install asterisk-core-sounds-en asterisk-core-sounds-en-wav
    swift build -c release --product clawvoice-bench
    models/training/.venv/bin/python models/training/turn_real.py
"""
import gzip
import json
import os
import subprocess
import tempfile
import wave

import numpy as np
from scipy.signal import resample_poly

from turn_bound import auc
from turn_train import FEATURES, FRAME, ROOT

SOUNDS, TRANSCRIPT = "/usr/share/asterisk/sounds/en", "/usr/share/doc/asterisk-core-sounds-en/core-sounds-en.txt.gz"
AT_MS = 200


def prompts():
    """Names of the prompts that go on after a pause, as RealPrompts.withPauses (Swift) picks them."""
    out = []
    for line in gzip.open(TRANSCRIPT, "rt", errors="replace").read().splitlines():
        name, _, text = line.partition(":")
        name, text = name.strip(), text.strip()
        if not name or " " in name or text.startswith("...") or text.endswith("...") or not text or text[-1] not in ".?!":
            continue
        inner = text[:-1]
        if any(a in ",;:.?!" and b == " " for a, b in zip(inner, inner[1:])) and os.path.exists(f"{SOUNDS}/{name}.wav"):
            out.append(name)
    return out


def main():
    if not os.path.exists(TRANSCRIPT):
        raise SystemExit("turn_real.py: no asterisk prompts; apt-get install asterisk-core-sounds-en asterisk-core-sounds-en-wav")
    bench = os.path.join(ROOT, ".build", "release", "clawvoice-bench")
    rng, ends = np.random.default_rng(1), {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in prompts():
            with wave.open(f"{SOUNDS}/{name}.wav") as w:
                x = resample_poly(np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(float), 16000, w.getframerate())
            level = np.sqrt(np.convolve(x ** 2, np.ones(160) / 160, "same"))
            on = np.flatnonzero(level > level.max() / 100)
            x = np.concatenate([np.zeros(12800), x[on[0]:on[-1]], np.zeros(48000)])      # 800 ms before, 3 s after
            path = os.path.join(tmp, name.replace("/", "_") + ".wav")
            with wave.open(path, "w") as w:
                w.setnchannels(1), w.setsampwidth(2), w.setframerate(16000)
                w.writeframes(np.clip(x + rng.standard_normal(len(x)) * 3, -32768, 32767).astype(np.int16).tobytes())
            ends[path] = 12800 + on[-1] - on[0]
        lst = os.path.join(tmp, "list.txt")
        open(lst, "w").write("\n".join(ends) + "\n")
        out = subprocess.run([bench, "--turn-features", lst], capture_output=True, text=True, check=True).stdout
    X, Y = [], []
    for line in out.splitlines():
        o = json.loads(line)
        r = np.array(o["rows"], dtype=float).reshape(-1, 1 + len(FEATURES))
        for row in r[np.abs(r[:, 1] - AT_MS) < FRAME / 32]:      # the frame AT_MS into each pause
            X.append(row[1:])
            Y.append(float((row[0] + 1) * FRAME > ends[o["file"]]))
    X, Y = np.array(X), np.array(Y)
    print(f"{len(ends)} prompts: {int(Y.sum())} ends and {int((1 - Y).sum())} pauses inside that reach {AT_MS} ms")
    for j, f in enumerate(FEATURES):
        print(f"  {f:13s} AUC {auc(Y, X[:, j]):.3f}   end {X[Y == 1, j].mean():9.2f}, inside {X[Y == 0, j].mean():9.2f}")
    model = os.path.join(ROOT, "models", "turn.json")
    if os.path.exists(model):
        m = json.load(open(model))
        z = ((X - np.array(m["mean"])) / np.array(m["scale"])) @ np.array(m["weights"]) + m["bias"]
        print(f"  models/turn.json's score: AUC {auc(Y, z):.3f}")


if __name__ == "__main__":
    main()
