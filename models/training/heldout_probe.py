"""Two probes on the flite held-out set itself (models/README.md, "What is left"): upper bounds that
train and choose nothing, since they read their best case off the set the figures are reported on.

    .venv/bin/python heldout_probe.py rules [TRIGGER ...]   # other firing rules on the shipped heads' scores
    .venv/bin/python heldout_probe.py norm                  # speaker mean normalisation for enrollment

rules: 1-3 steps in a row, or the mean of 2-6 steps over a bar (microWakeWord's rule), every bar
from 0.50 to 0.99; for each, the fewest misses (of 200 events) with at most K false wakes in the
2.06 h of negatives. norm: every window of the stand-in user's audio shifted by a * (ref - user),
ref the mean embedding of the node's espeak-ng speech (200 everyday sentences), user that of the
user reading enroll_verifier's prompts ("cmvn": their spread matched too); shipped thresholds.
Both need enroll_eval.py's cache of the set's embeddings (run `make wake-eval-enroll` once).
"""
import json
import os
import sys

import numpy as np

import enroll_eval as E
import frontend

CACHE = os.path.join(E.HERE, ".cache", "enroll")


def setup():
    meta = json.load(open(os.path.join(E.HERE, "eval-flite", "meta.json")))
    fe = frontend.FrontEnd(E.MODELS)
    zero = fe.embed_mels(np.repeat(fe.zero_mel[None], frontend.EMB_FRAMES, axis=0))[0]
    names = ["negatives", "near-misses"] + [f"positives-{t}" for t in E.TRIGGERS]
    emb = {}
    for n in names:
        path = os.path.join(CACHE, n + ".npy")
        if not os.path.exists(path):
            raise SystemExit(f"heldout_probe.py: {path} is missing; run `make wake-eval-enroll` once to embed the set")
        emb[n] = np.load(path)
    return meta, fe, zero, emb


def missed(wakes, ends):
    return sum(not any(e - 500 <= m <= e + 1000 for m in wakes) for e in ends)


def wakes(scores, thr, rule, n):
    """The detector's rule (2 s refractory) on n steps in a row, or on the mean of the last n steps."""
    if rule == "mean":
        return E.replay(np.convolve(scores, np.ones(n) / n)[:len(scores)], None, thr, None, None, 1)
    return E.replay(scores, None, thr, None, None, n)


def rules(triggers):
    meta, _, zero, emb = setup()
    for t in triggers:
        h = E.Head(t)
        sc = {n: h.scores(E.windows(emb[n], zero, h.window)) for n in ("negatives", "near-misses", f"positives-{t}")}
        ends = meta[f"positives-{t}"]["ends_ms"]
        print(f"{t}: shipped {h.threshold}, {h.steps} steps in a row")
        for rule, n in [("run", 1), ("run", 2), ("run", 3)] + [("mean", k) for k in range(2, 7)]:
            rows = [(len(wakes(sc["negatives"], thr, rule, n)), missed(wakes(sc[f"positives-{t}"], thr, rule, n), ends),
                     len(wakes(sc["near-misses"], thr, rule, n)), round(thr, 2)) for thr in np.arange(0.5, 0.995, 0.01)]
            cells = []
            for k in (0, 1, 2, 4, 6):
                ok = [r for r in rows if r[0] <= k]
                best = min(ok, key=lambda r: (r[1], -r[3])) if ok else None
                cells.append(f"fw<={k}: " + (f"{best[1]} missed (bar {best[3]}, near-miss wakes {best[2]})" if best else "-"))
            print(f"  {rule} {n}: " + "; ".join(cells), flush=True)


def norm():
    import enroll_verifier
    import evaluate
    import speech
    import voices
    meta, fe, zero, emb = setup()
    path = os.path.join(CACHE, "probe-espeak-ref.npy")
    if not os.path.exists(path):
        eng, g = voices.EspeakEngine(), np.random.default_rng(99)
        out = []
        for text in speech.everyday_sentences(g, 200):
            x = eng.render(text, g).astype(float)
            out.append(fe.embed(x / (np.max(np.abs(x)) + 1e-9) * 8000))
        np.save(path, np.vstack(out))
    ref = np.load(path)
    rm, rs = ref.mean(0), ref.std(0) + 1e-6
    flite, rng = evaluate.Flite(), np.random.default_rng(4242)
    for v in E.VOICES:
        user = np.vstack([fe.embed(s) for s in enroll_verifier.user_speech(flite, v, rng)])
        um, us = user.mean(0), user.std(0) + 1e-6
        for mode, a in [("none", 0), ("mean", 0.5), ("mean", 1.0), ("cmvn", 0.5), ("cmvn", 1.0)]:
            def shift(e):
                if mode == "mean":
                    return e + a * (rm - um)
                return e if mode == "none" else (1 - a) * e + a * ((e - um) / us * rs + rm)
            cells = []
            for t in E.TRIGGERS:
                h, ev = E.Head(t), meta[f"positives-{t}"]
                run = lambda n: E.replay(h.scores(E.windows(shift(emb[n]), zero, h.window)), None, h.threshold, None, None, h.steps)
                mine = [e for e, x in zip(ev["ends_ms"], ev["events"]) if x["voice"] == v]
                cells.append(f"{t} missed {missed(run(f'positives-{t}'), mine)}/{len(mine)}, false wakes {len(run('negatives'))}, "
                             f"near-miss wakes {len(run('near-misses'))}")
            print(f"{v} {mode} {a}: " + " | ".join(cells), flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in ("rules", "norm"):
        raise SystemExit(__doc__)
    rules(sys.argv[2:] or E.TRIGGERS) if sys.argv[1] == "rules" else norm()
