"""Threshold rules on training-engine validation only: reads the validation scores train_head.py
saves (.cache/valscores-<stem>[-tag].npz) and prints, for each rule and each number of
consecutive steps over the threshold, the threshold it picks, the validation recall there and
the false wakes of the validation stream and canvases. Never reads held-out audio.

    .venv/bin/python val_rules.py openclaw claude computer [--tag old]
    .venv/bin/python val_rules.py openclaw claude computer --tag old --apply v2 --consecutive 2 --models-dir ../
        (sets each head's threshold and consecutiveSteps by that rule, on validation only)
"""
import argparse
import json
import os

import numpy as np

import train_head as th

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("stems", nargs="+")
    ap.add_argument("--tag", default="")
    ap.add_argument("--cache-dir", default=os.path.join(HERE, ".cache"))
    ap.add_argument("--apply", choices=sorted(th.RULES), help="write this rule's threshold into each head's manifest")
    ap.add_argument("--consecutive", type=int, default=2)
    ap.add_argument("--models-dir", default=os.path.join(HERE, ".."))
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
                if rule == args.apply and k == args.consecutive:
                    apply(args, stem, v, t, k, w)
                print(f"   {rule:12s}  {k}  {t:9.3f}  {v.recall(t, k) * 100:5.1f}%  {w:3d} ({w / v.hours:5.2f})        "
                      + "/".join(f"{fa.get(kk, 0) * 100:.1f}" for kk in (1, 2, 5, 3)))


def apply(args, stem, v, t, k, w):
    set_by = (f"models/training/val_rules.py {stem} --tag {args.tag} --apply {args.apply} --consecutive {k}"
              if args.tag else f"models/training/val_rules.py {stem} --apply {args.apply} --consecutive {k}")
    path = write_threshold(args.models_dir, stem, v, round(t, 4), k, args.apply, set_by)
    print(f"   wrote {path}: threshold {t:.3f}, {k} steps in a row")


def write_threshold(models_dir, stem, v, t, k, rule, set_by):
    """Writes a threshold and how it was set into models/<stem>.json, with its validation figures."""
    path = os.path.join(models_dir, f"{stem}.json")
    m = json.load(open(path))
    m["threshold"], m["consecutiveSteps"] = t, k
    tr = m.setdefault("training", {})
    tr["thresholdRule"] = rule
    for stale in ("ruleV2Threshold", "ruleV2Validation"):     # prompt_threshold.py's, for another threshold
        tr.pop(stale, None)
    tr["thresholdSetBy"] = set_by
    tr["validation"] = {"recall": round(v.recall(t, k), 4), "streamMinutes": round(v.hours * 60, 1),
                        "streamFalseWakes": v.stream_wakes(t, k)}
    with open(path, "w") as f:
        json.dump(m, f, indent=2)
        f.write("\n")
    return path

if __name__ == "__main__":
    main()
