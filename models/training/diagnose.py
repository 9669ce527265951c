"""Where the wake heads stand, in two tables and an optional third (nothing here trains or chooses anything).

1. Which part of rule v2 sets each head's threshold, from its saved validation scores (training
   engines only): the lowest threshold each constraint alone allows, with 2 steps in a row.
   With --resample N: how far its near-miss limit moves when those canvases are drawn again.
2. How near the held-out trigger events come to the threshold: per flite voice and SNR, the
   median over events of the best score held for 2 steps in a row within 0.5 s before to 1 s
   after the spoken trigger, and how many stay under 0.5 and under the head's threshold. It runs
   `clawvoice wake detect --scores` over `make wake-eval`'s positives (built by evaluate.py).

    .venv/bin/python diagnose.py [--tag -v4] [--models ../../models] [--clawvoice ../../.build/release/clawvoice]
    .venv/bin/python diagnose.py --stems claude --tag=--c26s1 --binding-only   (table 1 alone; a tag starting with - as --tag=)
    .venv/bin/python diagnose.py --stems claude --tag=--c35claude-s1 --binding-only --resample 500   (and how far the near-miss limit moves)
"""
import argparse
import json
import os
import subprocess

import numpy as np

import train_head as th

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
TRIGGERS = ["openclaw", "claude", "computer"]


def binding(tag, stems=TRIGGERS, k=2):
    r = th.RULES["v2"]
    print(f"| head (valscores{tag}) | stream ≤ {r['stream']}/h | plain speech, noise ≤ {r['speech'] * 100:g} % | "
          f"near miss, other trigger, cut short ≤ {r['near'] * 100:g} % | validation recall there |")
    print("|---|---|---|---|---|")
    for stem in stems:
        path = os.path.join(HERE, ".cache", f"valscores-{stem}{tag}.npz")
        if not os.path.exists(path):
            raise SystemExit(f"diagnose.py: {path} is missing; train with --tag {tag.lstrip('-')} first")
        v = th.Validation(dict(np.load(path)))
        checks = th.rule_checks(v, "v2", k)
        s, sp, nr = (next((float(t) for t in th.THRESHOLD_GRID if checks[name](t)), 0.999) for name in ("stream", "speech", "near"))
        t = max(s, sp, nr)
        mark = lambda x: f"**{x:.2f}**" if x == t else f"{x:.2f}"
        print(f"| {stem} | {mark(s)} | {mark(sp)} | {mark(nr)} | {v.recall(t, k) * 100:.1f} % |")


def resample(tag, stems, draws, k=2):
    """How far the near-miss limit moves when its canvases are drawn again (a bootstrap over the
    validation's near-miss, other-trigger and cut-short canvases, the only ones that limit reads):
    the 10th, 50th and 90th percentiles of the lowest threshold that limit alone allows, each a
    threshold of the grid. Every head gets the same draws, whichever heads come before it."""
    print(f"\n| head (valscores{tag}) | near-miss canvases | limit | over {draws} resamplings: 10th / 50th / 90th percentile |")
    print("|---|---|---|---|")
    for stem in stems:
        rng = np.random.default_rng(0)
        z = dict(np.load(os.path.join(HERE, ".cache", f"valscores-{stem}{tag}.npz")))
        near = np.flatnonzero(np.isin(z["kinds"], [1, 2, 5]) & ~(z["labels"] == 1).any(axis=1))

        def limit(idx):       # rule v2's near-miss limit alone, on these canvases only
            v = th.Validation({**z, **{key: z[key][idx] for key in ("canvas", "labels", "mask", "kinds")}})
            return next((float(t) for t in th.THRESHOLD_GRID if th.rule_checks(v, "v2", k)["near"](t)), 0.999)
        got = [limit(near[rng.integers(0, len(near), len(near))]) for _ in range(draws)]
        q = np.percentile(got, [10, 50, 90], method="nearest")
        print(f"| {stem} | {len(near)} | {limit(near):.2f} | {q[0]:.2f} / {q[1]:.2f} / {q[2]:.2f} |")


def margins(models, clawvoice, out):
    meta = json.load(open(os.path.join(out, "meta.json")))
    print("\n| head | voice | SNR | events | median best score | under 0.5 | under the threshold |")
    print("|---|---|---|---|---|---|---|")
    for t in TRIGGERS:
        thr = json.load(open(os.path.join(models, f"{t}.json")))["threshold"]
        r = subprocess.run([clawvoice, "wake", "detect", "--input", os.path.join(out, f"positives-{t}.wav"),
                            "--models", models, "--phrases", t, "--scores"], capture_output=True, text=True, check=True)
        steps = [json.loads(l) for l in r.stdout.splitlines() if '"scores"' in l]
        ms = np.array([s["ms"] for s in steps])
        sc = np.array([s["scores"][t] for s in steps])
        cells = {}
        for e, info in zip(meta[f"positives-{t}"]["ends_ms"], meta[f"positives-{t}"]["events"]):
            w = sc[(ms >= e - 500) & (ms <= e + 1000)]
            cells.setdefault((info["voice"], info["snr"]), []).append(float(np.minimum(w[:-1], w[1:]).max()))
        for (voice, snr), v in sorted(cells.items()):
            v = np.array(v)
            print(f"| {t} ({thr:g}) | {voice} | {snr} | {len(v)} | {np.median(v):.2f} | {(v < 0.5).sum()} | {(v < thr).sum()} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tag", default="-v4", help="validation scores of these heads (.cache/valscores-<stem><tag>.npz)")
    ap.add_argument("--models", default=os.path.join(REPO, "models"))
    ap.add_argument("--clawvoice", default=os.path.join(REPO, ".build", "release", "clawvoice"))
    ap.add_argument("--out", default=os.path.join(HERE, "eval-flite"), help="make wake-eval's held-out set")
    ap.add_argument("--stems", default=",".join(TRIGGERS), help="table 1's heads, comma-separated")
    ap.add_argument("--binding-only", action="store_true", help="table 1 alone (validation only, no held-out audio)")
    ap.add_argument("--resample", type=int, default=0, metavar="N", help="also N bootstrap draws of the near-miss "
                    "limit's canvases (how far that limit moves with the canvases it is read on)")
    args = ap.parse_args()
    binding(args.tag, args.stems.split(","))
    if args.resample:
        resample(args.tag, args.stems.split(","), args.resample)
    if not args.binding_only:
        margins(args.models, args.clawvoice, args.out)


if __name__ == "__main__":
    main()
