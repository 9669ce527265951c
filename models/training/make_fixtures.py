"""Writes the front-end fixture for Tests/WakeWordTests: a fixed espeak-ng clip with seeded noise
that starts at the first sample (frontend-input.wav, 16 kHz) and, per 80 ms chunk, the embedding
the ORIGINAL TFLite networks give (run by the TFLite library inside the pyopen-wakeword wheel on
the framing frontend.py defines) and the one frontend.py gives. EmbeddingFrontEnd.swift must
match the TFLite values within the tolerance the test states.

    models/training/.venv/bin/python models/training/make_fixtures.py
"""
import json
import os
import wave

import numpy as np

import frontend
import speech
import tflite_ref

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
FIX = os.path.join(REPO, "Tests", "WakeWordTests", "Fixtures")


def fixture_audio():
    eng = speech.Espeak()
    clip = eng.synth("Openclaw, lights on.", "en-us", None, rate=175)
    rng = np.random.default_rng(5)
    x = np.concatenate([clip.astype(np.float64), np.zeros(6000)])
    x = x + rng.normal(0, 30, len(x))
    x[9000:9400] = 0                                  # digital silence inside a chunk (the dB floor)
    return np.clip(np.round(x), -32768, 32767).astype(np.int16)


def tflite_embeddings(ref, fe, x):
    """Per chunk k: TFLite mel on [1280k - 480, 1280k + 1280), TFLite embedding on the last 76
    frames (silence frames before the stream)."""
    xs = np.concatenate([np.zeros(frontend.CONTEXT), x.astype(np.float32)])
    mels = [np.repeat(fe.zero_mel[None], frontend.EMB_FRAMES, axis=0)]
    out = []
    for k in range(len(x) // frontend.CHUNK):
        mels.append(ref.mel_chunk(xs[frontend.CHUNK * k:frontend.CHUNK * k + 1760]))
        m = np.concatenate(mels)[-frontend.EMB_FRAMES:]
        out.append(ref.embedding(m))
    return np.array(out)


def main():
    fe = frontend.FrontEnd(os.path.join(REPO, "models"))
    x = fixture_audio()
    with wave.open(os.path.join(FIX, "frontend-input.wav"), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(x.tobytes())
    ref = tflite_embeddings(tflite_ref.TFLiteFrontEnd(), fe, x)
    ours = fe.embed(x)
    print(f"{len(ref)} chunks; numpy vs TFLite: largest difference {np.abs(ref - ours).max():.2e} "
          f"(largest value {np.abs(ref).max():.1f})")
    with open(os.path.join(FIX, "frontend-golden.json"), "w") as f:
        f.write('{"samples": %d,\n"tflite": [\n' % len(x))
        f.write(",\n".join("[" + ",".join("%.6g" % v for v in row) + "]" for row in ref))
        f.write("]}\n")
    # Each shipped head's logits on the same audio (numpy, from the TFLite embeddings), the
    # numbers WakeDetector's scores must reproduce.
    zero = fe.embed_mels(np.repeat(fe.zero_mel[None], frontend.EMB_FRAMES, axis=0))[0]
    heads = {}
    for stem in ("openclaw", "claude", "computer"):
        path = os.path.join(REPO, "models", stem + ".json")
        if not os.path.exists(path):
            continue
        man = json.load(open(path))
        flat = np.fromfile(os.path.join(REPO, "models", man["weights"]), "<f4")
        T = {t["name"]: flat[t["offset"]:t["offset"] + int(np.prod(t["shape"]))].reshape(t["shape"]) for t in man["tensors"]}
        w = man["network"]["windowEmbeddings"]
        hist = np.concatenate([np.repeat(zero[None], w - 1, axis=0), ref])
        members = man["network"].get("members", 1)       # an ensemble: the mean of its members' logits
        n_layers = len([t for t in T if t.startswith("dense") and t.endswith(".weight")])
        logits = []
        for k in range(len(ref)):
            total = 0.0
            for mi in range(members):
                pre = "" if mi == 0 else f"member{mi}."
                h = hist[k:k + w].reshape(-1).astype(np.float64)
                for i in range(n_layers):
                    h = T[f"{pre}dense{i}.weight"].astype(np.float64) @ h + T[f"{pre}dense{i}.bias"]
                    if i < n_layers - 1:
                        h = np.maximum(h, 0)
                total += float(h[0])
            logits.append(total / members)
        heads[stem] = logits
    with open(os.path.join(FIX, "heads-golden.json"), "w") as f:
        json.dump(heads, f)
    print(f"head logits for {sorted(heads)}")


if __name__ == "__main__":
    main()
