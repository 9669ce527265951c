"""The leave-one-engine-out table: for each head trained with `train_head.py --hold-out ENGINE
--tag loeo-<engine>-<recipe>`, the recall on the held-out engine's trigger canvases at rule v2's
threshold (2 steps in a row; the threshold from the usual validation stream and canvases), and
at 0.5. Training engines only: the held-out voices of `make wake-eval` play no part.
Ensembles: runs tagged `loeo-<engine>-<recipe>m<k>` (`train_head.py --member k`: the same data and
validation split, another initialisation, dropout and batch order) are averaged in logits with
`loeo-<engine>-<recipe>` (member 0), as the detector averages an ensemble's members.

    .venv/bin/python loeo_table.py            (reads .cache/valscores-*-loeo-*.npz)
"""
import glob
import os
import sys

import numpy as np

import train_head as th

HERE = os.path.dirname(os.path.abspath(__file__))


def logit(p):
    p = np.clip(np.asarray(p, np.float64), 1e-7, 1 - 1e-7)
    return np.log(p / (1 - p))


def ensemble(paths):
    zs = [dict(np.load(p)) for p in paths]
    for z in zs[1:]:
        if not (np.array_equal(z["labels"], zs[0]["labels"]) and np.array_equal(z["kinds"], zs[0]["kinds"])):
            raise SystemExit(f"{paths}: members were validated on different canvases")
    z = dict(zs[0])
    for key in ("canvas", "stream"):
        z[key] = 1 / (1 + np.exp(-np.mean([logit(q[key]) for q in zs], axis=0)))
    return z


def main():
    cache = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, ".cache")
    rows, runs = [], {}
    for p in sorted(glob.glob(os.path.join(cache, "valscores-*-loeo-*.npz"))):
        stem, rest = os.path.basename(p)[len("valscores-"):-len(".npz")].split("-loeo-")
        fold, recipe = rest.split("-", 1)
        runs[(stem, fold, recipe)] = p
    groups = {}
    for (stem, fold, recipe), p in runs.items():
        base, sep, k = recipe.rpartition("m")
        if sep and k.isdigit() and (stem, fold, base) in runs:
            groups.setdefault((stem, fold, base), [runs[(stem, fold, base)]]).append(p)
    items = [(key, dict(np.load(p))) for key, p in sorted(runs.items())]
    items += [((stem, fold, f"{base} x{len(ps)} (ensemble)"), ensemble(ps)) for (stem, fold, base), ps in sorted(groups.items())]
    for (stem, fold, recipe), z in items:
        v = th.Validation(z)
        t = th.choose_threshold(v, "v2", 2)
        rows.append((stem, fold, recipe, v.recall(t, 2), t, v.stream_wakes(t, 2), v.recall(0.5, 2), len(v.pos)))
    print("| head | held-out engine | recipe | recall at rule v2 (threshold, stream wakes in 2 h) | recall at 0.5 | canvases |")
    print("|---|---|---|---|---|---|")
    for stem, fold, recipe, r, t, w, r5, n in rows:
        print(f"| {stem} | {fold} | {recipe} | {r * 100:.1f} % ({t:.2f}, {w}) | {r5 * 100:.1f} % | {n} |")


if __name__ == "__main__":
    main()
