"""The leave-one-engine-out table: for each head trained with `train_head.py --hold-out ENGINE
--tag loeo-<engine>-<recipe>`, the recall on the held-out engine's trigger canvases at rule v2's
threshold (2 steps in a row; the threshold from the usual validation stream and canvases), and
at 0.5. Training engines only: the held-out voices of `make wake-eval` play no part.

    .venv/bin/python loeo_table.py            (reads .cache/valscores-*-loeo-*.npz)
"""
import glob
import os
import sys

import numpy as np

import train_head as th

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    cache = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, ".cache")
    rows = []
    for p in sorted(glob.glob(os.path.join(cache, "valscores-*-loeo-*.npz"))):
        stem, rest = os.path.basename(p)[len("valscores-"):-len(".npz")].split("-loeo-")
        fold, recipe = rest.split("-", 1)
        v = th.Validation(dict(np.load(p)))
        t = th.choose_threshold(v, "v2", 2)
        rows.append((stem, fold, recipe, v.recall(t, 2), t, v.stream_wakes(t, 2), v.recall(0.5, 2), len(v.pos)))
    print("| head | held-out engine | recipe | recall at rule v2 (threshold, stream wakes in 2 h) | recall at 0.5 | canvases |")
    print("|---|---|---|---|---|---|")
    for stem, fold, recipe, r, t, w, r5, n in rows:
        print(f"| {stem} | {fold} | {recipe} | {r * 100:.1f} % ({t:.2f}, {w}) | {r5 * 100:.1f} % | {n} |")


if __name__ == "__main__":
    main()
