"""Scoring for evaluate.py: the Swift detector over a WAV (`clawvoice wake detect`), the
detector's rule replayed in Python, and the figures and table of the report."""
import json
import os
import subprocess
import sys
import time

import numpy as np

import eval_set
from eval_set import EVAL_VOICES, REPO, SNRS

# The models the detector loads; evaluate.py --models replaces it. eval_set.TRIGGERS is read at
# call time, not imported, because evaluate.py --triggers replaces it too.
MODELS = os.path.join(REPO, "models")


def detect(binary, wav, extra=()):
    env = dict(os.environ, CLAWVOICE_MODELS_DIR=MODELS)
    t0 = time.time()
    r = subprocess.run([binary, "wake", "detect", "--input", wav, "--phrases", ",".join(eval_set.TRIGGERS), *extra],
                       capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"evaluate.py: {binary} wake detect failed: {r.stderr.strip()}")
    lines = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    return lines, time.time() - t0


def sweep(steps, threshold, refractory_ms=2000, only=None):
    """Replays the detector's rule (without the 90 ms decision window) on --scores output at one
    common threshold; `only` restricts it to one model."""
    out, last = [], -10 ** 9
    for st in steps:
        best, bs = None, 0.0
        for p, s in st["scores"].items():
            if only and p != only:
                continue
            if st["ms"] >= 500 and s >= threshold and (best is None or s > bs):
                best, bs = p, s
        if best and st["ms"] - last >= refractory_ms:
            out.append({"phrase": best, "ms": st["ms"], "score": bs})
            last = st["ms"]
    return out


def score_positives(dets, ends, trig):
    hits, wrong = 0, 0
    used = set()
    for e in ends:
        win = [d for d in dets if e - 500 <= d["ms"] <= e + 1000]
        if any(d["phrase"] == trig for d in win):
            hits += 1
        elif win:
            wrong += 1
        used |= {id(d) for d in win}
    stray = sum(1 for d in dets if id(d) not in used)
    return hits, wrong, stray


def replay(steps, thresholds, refractory_ms=2000, warmup_ms=0, decision_ms=0, consecutive=None):
    """The detector's rule on per-step scores ({"ms", "scores": {phrase: score}}), per-model
    thresholds: of the models over threshold for `consecutive[phrase]` steps in a row (1 when
    not given) the one furthest over (logits) bids; a pending wake is decided after
    decision_ms; 2 s refractory."""
    consecutive = consecutive or {}
    runs = {p: 0 for p in thresholds}
    def logit(p):
        p = min(max(p, 1e-7), 1 - 1e-7)
        return np.log(p / (1 - p))
    out, last, pending = [], -10 ** 9, None
    for st in steps:
        ms = st["ms"]
        if pending and ms - pending[0] >= decision_ms:
            out.append({"phrase": pending[1], "ms": pending[0], "score": pending[3]})
            last, pending = pending[0], None
        best, margin = None, 0.0
        for p, sc in st["scores"].items():
            if p not in thresholds:
                continue
            runs[p] = runs[p] + 1 if sc >= thresholds[p] else 0
            if runs[p] >= consecutive.get(p, 1):
                m = logit(sc) - logit(thresholds[p])
                if best is None or m > margin:
                    best, margin, bs = p, m, sc
        if best is None or ms < warmup_ms:
            continue
        if pending:
            if margin > pending[2]:
                pending = (pending[0], best, margin, bs)
        elif ms - last >= refractory_ms:
            pending = (ms, best, margin, bs)
    if pending:
        out.append({"phrase": pending[1], "ms": pending[0], "score": pending[3]})
    return out


def summarize(meta, dets):
    """Figures from detections per file: per trigger missed (overall, by SNR, by voice, by
    noise, by room), wrong phrase, false wakes per hour, near-miss wakes."""
    out = {"triggers": {}}
    for t in eval_set.TRIGGERS:
        m = meta[f"positives-{t}"]
        ends, events = m["ends_ms"], m["events"]
        d = dets[f"positives-{t}"]
        hit = [any(x["phrase"] == t and e - 500 <= x["ms"] <= e + 1000 for x in d) for e in ends]
        wrong = sum(1 for e, h in zip(ends, hit) if not h and any(e - 500 <= x["ms"] <= e + 1000 for x in d))
        by = {}
        for key, fn in (("snr", lambda i: i["snr"]), ("voice", lambda i: i["voice"]), ("noise", lambda i: i["noise"]),
                        ("room", lambda i: "reverberant" if i["room"] else "dry")):
            cells = {}
            for info, h in zip(events, hit):
                c = cells.setdefault(fn(info), [0, 0])
                c[0] += not h
                c[1] += 1
            by[key] = cells
        out["triggers"][t] = {"events": len(ends), "missed": sum(not h for h in hit), "wrong": wrong, "by": by}
    hours = meta["negatives"]["seconds"] / 3600
    neg = dets["negatives"]
    out["negHours"] = hours
    out["falseWakes"] = {t: sum(1 for x in neg if x["phrase"] == t) for t in eval_set.TRIGGERS}
    near = meta["near-misses"]["utterances"]

    def near_text(ms):
        for u in near:
            if u["start_ms"] <= ms < u["end_ms"]:
                return u["text"]
        return "?"
    out["nearUtterances"] = len(near)
    out["nearWakes"] = [(x["phrase"], near_text(x["ms"])) for x in dets["near-misses"]]
    return out


def pct(m, n):
    return f"{m / n * 100:.1f} %" if n else "–"


def results_table(summary, thresholds):
    lines = ["| trigger | threshold | missed | clean | 20 dB | 10 dB | 5 dB | awb | rms | wrong phrase | false wakes / h | near-miss wakes |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    h = summary["negHours"]
    for t in eval_set.TRIGGERS:
        r = summary["triggers"][t]
        snr, voice = r["by"]["snr"], r["by"]["voice"]
        cell = lambda d, k: pct(*d.get(k, [0, 0]))
        nw = sum(1 for p, _ in summary["nearWakes"] if p == t)
        lines.append(f"| {t} | {thresholds.get(t, float('nan')):g} | **{pct(r['missed'], r['events'])}** ({r['missed']}/{r['events']}) | "
                     + " | ".join(cell(snr, k) for k in SNRS) + " | " + " | ".join(cell(voice, v) for v in EVAL_VOICES)
                     + f" | {r['wrong']} | **{summary['falseWakes'][t] / h:.2f}** ({summary['falseWakes'][t]}) | {nw} |")
    return lines
