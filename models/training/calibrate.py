"""Rule v3: a threshold calibrated on how an engine the head never heard behaves, from training
engines only. For each leave-one-engine-out fold trained with `train_head.py --hold-out ENGINE
--hold-out-negatives --members 1 --tag loeo-<fold>-whole` (the engine's triggers AND negatives
kept out of training), rule v2's limits are applied twice on that fold's head:

  t_unseen  on the held-out engine's negatives only: its share of the 2-hour validation stream
            (<= 0.5 false wakes per hour, 2 steps in a row), its plain-speech canvases (<= 0.5 %)
            and its near-miss, other-trigger and cut-short canvases (<= 3 %);
  t_seen    on the training engines' validation negatives, with the same limits; their stream
            share is cut into blocks as long as the held-out share (the stream limit then allows
            the same number of wakes), and t_seen is the median over the blocks.

offset = logit(t_unseen) - logit(t_seen): how much higher (or lower) a new voice's non-trigger
speech scores than the voices the head was trained on, at the same false-wake limits. The
shipped threshold is sigmoid(logit(t_v2) + the mean offset of the Piper and Pico folds), t_v2
being rule v2 on the full head's own validation (.cache/valscores-<stem>-<tag>.npz). A trigger
keeps rule v2 if a fold gives no threshold under 0.999. The held-out voices of `make
wake-eval` play no part.

    .venv/bin/python calibrate.py openclaw claude computer --full-tag v4 [--apply --models-dir ../]
"""
import argparse
import json
import os

import numpy as np

import train_head as th
import val_rules

HERE = os.path.dirname(os.path.abspath(__file__))
FOLDS = ("piper", "pico")            # the folds the rule uses (espeak is printed when present)
LIMITS = th.RULES["v2"]
K = 2


def logit(p):
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return float(np.log(p / (1 - p)))


def sigmoid(x):
    return float(1 / (1 + np.exp(-x)))


def wake_steps(scores, t, k=K, refractory=25):
    out, last = [], -10 ** 9
    for s in np.flatnonzero(th.confirmed(scores, t, k)):
        if s - last >= refractory:
            out.append(s)
            last = s
    return np.asarray(out, int)


def canvas_over(S, ok, t, k=K):
    return (th.confirmed(S, t, k) & ok).any(axis=1)


def threshold(S, ok, kinds, stream, sel, k=K, parts="stream speech near"):
    """Rule v2's limits on the canvases (S, ok, kinds) and the stream steps where sel is true
    (parts: which of the three limits apply; all of them for the rule)."""
    hours = sel.sum() * th.STEP_S / 3600
    speech = np.isin(kinds, [3, 4]) & ("speech" in parts)
    near = np.isin(kinds, [1, 2, 5]) & ("near" in parts)
    for t in th.THRESHOLD_GRID:
        w = wake_steps(stream, t, k)
        if "stream" in parts and sel[w].sum() / hours > LIMITS["stream"]:
            continue
        over = canvas_over(S, ok, t, k)
        if speech.any() and over[speech].mean() > LIMITS["speech"]:
            continue
        if near.any() and over[near].mean() > LIMITS["near"]:
            continue
        return float(t)
    return 0.999


def fold(path):
    z = dict(np.load(path))
    v = th.Validation(z)
    is_pos = (z["labels"] == 1).any(axis=1)
    eng = z["engines"][~is_pos]
    held = np.isin(eng, z["held_out"])
    s_held = np.isin(z["stream_engines"], z["held_out"])
    t_unseen = threshold(v.neg[held], v.neg_ok[held], v.kinds[held], v.stream, s_held)
    by_part = {q: threshold(v.neg[held], v.neg_ok[held], v.kinds[held], v.stream, s_held, parts=q)
               for q in ("stream", "speech", "near")}
    seen_steps = np.flatnonzero(~s_held)
    n_blocks = max(1, int(round(len(seen_steps) / s_held.sum())))
    ts = []
    for b in np.array_split(seen_steps, n_blocks):
        sel = np.zeros(len(v.stream), bool)
        sel[b] = True
        ts.append(threshold(v.neg[~held], v.neg_ok[~held], v.kinds[~held], v.stream, sel))
    t_seen = float(np.median(ts))
    over_h = canvas_over(v.neg[held], v.neg_ok[held], t_seen)
    kinds_h = v.kinds[held]
    return dict(t_unseen=t_unseen, t_seen=t_seen, by_part=by_part, blocks=ts, offset=logit(t_unseen) - logit(t_seen),
                recall_seen=v.recall(t_seen, K), recall_unseen=v.recall(t_unseen, K), n_pos=len(v.pos),
                held_minutes=s_held.sum() * th.STEP_S / 60,
                held_wakes_at_seen=int(s_held[wake_steps(v.stream, t_seen)].sum()),
                held_fa_at_seen={th.KINDS[q]: float(over_h[kinds_h == q].mean()) for q in np.unique(kinds_h)},
                n_held={th.KINDS[q]: int((kinds_h == q).sum()) for q in np.unique(kinds_h)})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("stems", nargs="+")
    ap.add_argument("--full-tag", default="v4", help="valscores tag of the full head (rule v2's threshold)")
    ap.add_argument("--fold-tag", default="whole", help="recipe part of the folds' tags: loeo-<fold>-<this>")
    ap.add_argument("--cache-dir", default=os.path.join(HERE, ".cache"))
    ap.add_argument("--apply", action="store_true", help="write the calibrated threshold into models/<stem>.json")
    ap.add_argument("--models-dir", default=os.path.join(HERE, ".."))
    args = ap.parse_args()
    print("| head | fold | held-out stream (min) | t_seen (blocks) | t_unseen (stream/speech/near limits alone) | offset (logit) | held-out recall at t_seen / t_unseen "
          "| held-out stream wakes at t_seen | held-out canvases over at t_seen |")
    print("|---|---|---|---|---|---|---|---|---|")
    for stem in args.stems:
        offs = []
        for f in ("espeak",) + FOLDS:
            p = os.path.join(args.cache_dir, f"valscores-{stem}-loeo-{f}-{args.fold_tag}.npz")
            if not os.path.exists(p):
                if f in FOLDS:
                    raise SystemExit(f"calibrate: {p} is missing; train it with train.sh {stem} --members 1 --hold-out {f} "
                                     f"--hold-out-negatives --tag loeo-{f}-{args.fold_tag}")
                continue
            r = fold(p)
            if f in FOLDS:
                offs.append(None if max(r["t_unseen"], r["t_seen"]) >= 0.999 else r["offset"])
            fa = ", ".join(f"{k} {v * 100:.1f} % of {r['n_held'][k]}" for k, v in r["held_fa_at_seen"].items())
            print(f"| {stem} | {f}{'' if f in FOLDS else ' (not used)'} | {r['held_minutes']:.1f} | {r['t_seen']:.2f} "
                  f"({'/'.join(f'{b:.2f}' for b in r['blocks'])}) | {r['t_unseen']:.2f} ({'/'.join(f'{x:.2f}' for x in r['by_part'].values())}) | {r['offset']:+.2f} | "
                  f"{r['recall_seen'] * 100:.1f} / {r['recall_unseen'] * 100:.1f} % of {r['n_pos']} | {r['held_wakes_at_seen']} | {fa} |")
        v = th.Validation(dict(np.load(os.path.join(args.cache_dir, f"valscores-{stem}-{args.full_tag}.npz"))))
        t_v2 = th.choose_threshold(v, "v2", K)
        if any(o is None for o in offs):
            print(f"  {stem}: a fold gives no threshold under 0.999; rule v2 stays at {t_v2:.2f}")
            continue
        off = float(np.mean(offs))
        t = round(min(0.99, sigmoid(logit(t_v2) + off)), 2)
        print(f"  {stem}: rule v2 {t_v2:.2f}, mean offset {off:+.2f} -> rule v3 threshold {t:.2f} "
              f"(full validation: recall {v.recall(t, K) * 100:.1f} % against {v.recall(t_v2, K) * 100:.1f} %, "
              f"stream wakes {v.stream_wakes(t, K)} against {v.stream_wakes(t_v2, K)} in {v.hours * 60:.0f} min)")
        if args.apply:
            set_by = (f"models/training/calibrate.py {stem} --full-tag {args.full_tag} --apply "
                      f"(rule v2 {t_v2:.2f}, unseen-engine offset {off:+.2f} in logits, folds {'+'.join(FOLDS)})")
            path = val_rules.write_threshold(args.models_dir, stem, v, t, K, "v3", set_by)
            print(f"  wrote {path}: threshold {t:.2f}, {K} steps in a row")


if __name__ == "__main__":
    main()
