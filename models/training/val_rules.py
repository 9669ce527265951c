"""Threshold rules on training-engine validation only: reads the validation scores train_head.py
saves (.cache/valscores-<stem>[-tag].npz) and prints, for each rule and each number of
consecutive steps over the threshold, the threshold it picks, the validation recall there and
the false wakes of the validation stream and canvases. Never reads held-out audio.

    .venv/bin/python val_rules.py openclaw claude computer [--tag old]
"""
import argparse
import os

import numpy as np

import train_head as th

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("stems", nargs="+")
    ap.add_argument("--tag", default="")
    ap.add_argument("--cache-dir", default=os.path.join(HERE, ".cache"))
    args = ap.parse_args()
    for stem in args.stems:
        path = os.path.join(args.cache_dir, f"valscores-{stem}{'-' + args.tag if args.tag else ''}.npz")
        z = dict(np.load(path))
        v = th.Validation(z)
        print(f"== {stem} ({path}; stream {v.hours * 60:.0f} min, {len(v.pos)} trigger canvases, "
              f"{len(v.neg)} other canvases)")
        print("   rule          k  threshold  recall  stream wakes (/h)  canvases over (near/other/cut/speech)")
        for rule in th.RULES:
            for k in (1, 2, 3):
                t = th.choose_threshold(v, rule, k)
                w = v.stream_wakes(t, k)
                fa = v.canvas_fa_by_kind(t, k)
                print(f"   {rule:12s}  {k}  {t:9.3f}  {v.recall(t, k) * 100:5.1f}%  {w:3d} ({w / v.hours:5.2f})        "
                      + "/".join(f"{fa.get(kk, 0) * 100:.1f}" for kk in (1, 2, 5, 3)))


if __name__ == "__main__":
    main()
