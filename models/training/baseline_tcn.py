"""The "before" figures: the log-mel TCN models shipped at 4b15d8b (trained on espeak-ng only)
on make wake-eval's flite set, same detection rule as the Swift detector of that commit (model
thresholds, 0.5 s warm-up, 2 s refractory, 90 ms decision window). Their code and models are
read from git, their forward pass is numpy (the old Swift golden tests held it to 1e-4 of this
arithmetic). Writes eval-flite/baseline-tcn.json, which evaluate.py puts in models/EVALUATION.md.

    models/training/.venv/bin/python models/training/baseline_tcn.py     (after make wake-eval built the set)
"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import wave

import numpy as np

import evaluate

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
REV = "4b15d8b"


def git_show(path):
    return subprocess.run(["git", "-C", REPO, "show", f"{REV}:{path}"], check=True, capture_output=True).stdout


def load_model(stem):
    man = json.loads(git_show(f"models/{stem}.json"))
    flat = np.frombuffer(git_show(f"models/{stem}.bin"), "<f4")
    T = {t["name"]: flat[t["offset"]:t["offset"] + int(np.prod(t["shape"]))].reshape(t["shape"]) for t in man["tensors"]}
    return man, T


def tcn_scores(man, T, feats):
    """Per-step sigmoid scores of the TCN over a whole stream of log-mel frames."""
    n = man["network"]
    K, S_ = n["inputKernelFrames"], n["strideFrames"]
    x = (feats - T["norm.mean"]) * T["norm.invStd"]
    steps = 0 if len(x) < 3 else (len(x) - 3) // S_ + 1
    xp = np.concatenate([np.zeros((K - S_, x.shape[1]), np.float32), x])
    win = np.concatenate([xp[k::S_][:steps] for k in range(K)], axis=1)
    h = np.maximum(win @ T["input.weight"].T + T["input.bias"], 0)
    for i, b in enumerate(n["blocks"]):
        d = b["dilation"]
        dw = T[f"block{i}.depthwise.weight"]
        hp = np.concatenate([np.zeros((2 * d, h.shape[1]), np.float32), h])
        y = dw[:, 0] * hp[0:steps] + dw[:, 1] * hp[d:d + steps] + dw[:, 2] * hp[2 * d:2 * d + steps]
        y = np.maximum(y + T[f"block{i}.depthwise.bias"], 0)
        h = h + np.maximum(y @ T[f"block{i}.pointwise.weight"].T + T[f"block{i}.pointwise.bias"], 0)
    logits = h @ T["head.weight"] + T["head.bias"][0]
    return 1 / (1 + np.exp(-logits)), steps


def main():
    tmp = tempfile.mkdtemp()
    with open(os.path.join(tmp, "oldfeatures.py"), "wb") as f:
        f.write(git_show("models/training/features.py"))
    spec = importlib.util.spec_from_file_location("oldfeatures", os.path.join(tmp, "oldfeatures.py"))
    feat = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(feat)
    out = os.path.join(HERE, "eval-flite")
    meta = json.load(open(os.path.join(out, "meta.json")))
    models = {t: load_model(t) for t in evaluate.TRIGGERS}
    thresholds = {t: m[0]["threshold"] for t, m in models.items()}
    dets = {}
    for name in [f"positives-{t}" for t in evaluate.TRIGGERS] + ["negatives", "near-misses"]:
        with wave.open(os.path.join(out, name + ".wav")) as w:
            x = np.frombuffer(w.readframes(w.getnframes()), np.int16)
        n = feat.frame_count(len(x))
        f = np.concatenate([feat.logmel(x[a * 160:(min(a + 30000, n) - 1) * 160 + 400]) for a in range(0, n, 30000)]).astype(np.float32)
        per = {t: tcn_scores(m[0], m[1], f) for t, m in models.items()}
        S = min(s for _, s in per.values())
        steps = [{"ms": ((3 * s + 2) * 160 + 400) * 1000 // 16000, "scores": {t: float(per[t][0][s]) for t in per}} for s in range(S)]
        dets[name] = evaluate.replay(steps, thresholds, warmup_ms=500, decision_ms=90)
        print(f"{name}: {len(dets[name])} wakes", flush=True)
    summary = evaluate.summarize(meta, dets)
    with open(os.path.join(out, "baseline-tcn.json"), "w") as fh:
        json.dump({"summary": summary, "thresholds": thresholds, "rev": REV}, fh)
    print("\n".join(evaluate.results_table(summary, thresholds)))


if __name__ == "__main__":
    sys.exit(main())
