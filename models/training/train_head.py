"""Train one wake head on the frozen speech-embedding front end (frontend.py): render the trigger,
near misses and ordinary speech with every training engine (voices.py), make more speakers by
tempo, vocal-tract-length warping, microphone colouring, rooms and noise, compute embeddings
once (cached), train a small MLP on 16 embeddings (1.28 s), choose the threshold on a
validation stream of training engines, export models/<stem>.json + .bin and the golden fixture.

    python train_head.py --trigger "hey claw"     (train.sh sets up the venv and calls this)

The stages live beside it: train_args.py (the command line), train_data.py (rendering, canvases,
split), near_val.py (--near-val's extra validation canvases, appended after the split), head.py (the
network), fit.py (training), threshold.py (the rules), head_file.py (export).
"""
import json
import os
import sys
import time
import zlib

import numpy as np

import frontend
import render
from canvas import KINDS, STEP_S
from fit import fit
from head import HEAD_WINDOW, HIDDEN, confirmed, detections, forward, init_params, windows
from head_file import write_head
from render import DEFAULT_TRIGGERS, file_stem
from threshold import RULES, THRESHOLD_GRID, Validation, choose_threshold, rule_checks
from train_args import HERE, RECIPE_VERSION, REPO, parser, recipe_name
from train_data import DATA_VERSION, examples, render_all, split

# calibrate.py, diagnose.py, loeo_table.py and val_rules.py read these as train_head.<name>
__all__ = ["DATA_VERSION", "HEAD_WINDOW", "HERE", "HIDDEN", "KINDS", "RECIPE_VERSION", "REPO", "RULES", "STEP_S",
           "THRESHOLD_GRID", "Validation", "choose_threshold", "confirmed", "detections", "forward", "init_params",
           "main", "recipe_name", "rule_checks", "windows"]

log = render.log


def main():
    args = parser().parse_args()

    import jax  # noqa: F401  (loaded before the long rendering, as always: a broken install fails at once)

    t_start = time.time()
    trigger = args.trigger.strip()
    stem = file_stem(trigger)
    seed = args.seed + zlib.crc32(stem.encode()) % 100000
    os.makedirs(args.models_dir, exist_ok=True)   # --models-dir may name a new directory
    args.others_rendered = others_rendered(args, stem)
    if (args.phonetic_near or args.phonetic_common) and trigger.lower() in DEFAULT_TRIGGERS:
        raise SystemExit(f"--phonetic-near/--phonetic-common: {trigger!r} is a default trigger and keeps its own near-miss list; "
                         "the flag is for a new phrase")
    if args.near_val and args.hold_out:
        raise SystemExit("--near-val: not with --hold-out (that validation is the held-out engine's); drop one of them")
    log(f"training wake head for {trigger!r} -> {os.path.join(args.models_dir, stem)}.json (seed {seed})")
    fe_path = os.path.join(args.models_dir, "frontend.json")
    if not os.path.exists(fe_path):
        frontend.export(args.models_dir)
        log(f"exported the front end to {fe_path} + frontend.bin")
    fe = frontend.FrontEnd(args.models_dir)
    fe_sha = json.load(open(fe_path))["weightsSHA256"]
    zero = fe.embed_mels(np.repeat(fe.zero_mel[None], frontend.EMB_FRAMES, axis=0))[0].astype(np.float16)

    # --- rendering and embeddings (cached) -----------------------------------------------------
    d = examples(args, fe, trigger, stem, seed, t_start, render_all(args, trigger))
    E, Y, K, engine_of, v_seconds = d.E, d.Y, d.K, d.engine_of, d.v_seconds

    # --- normalisation, split and training -------------------------------------------------------
    mean_w, std_w, rng, val_idx, tr_idx, step_ok, mask_all = split(args, seed, E, Y, K, engine_of, d.n_orig, d.held_ids,
                                                                    d.eng_names, d.whole)
    if d.xE is not None:     # --near-val: appended after the split, so training draws exactly what it would without them
        val_idx = np.concatenate([val_idx, np.arange(len(E), len(E) + len(d.xE))])
        E, Y, K = np.concatenate([E, d.xE]), np.concatenate([Y, d.xY]), np.concatenate([K, d.xK])
        mask_all = np.concatenate([mask_all, np.repeat(step_ok.astype(np.float32), len(d.xE), axis=0)])
    params, vcanvas, ss, E, Y, K, mask_all, mined_total = fit(args, stem, seed, zero, E, Y, K, mask_all, step_ok, tr_idx,
                                                              val_idx, mean_w, std_w, rng, d.vE, v_seconds, d.mE)

    # --- threshold: validation of training engines only --------------------------------------
    vpath = os.path.join(args.cache_dir, f"valscores-{stem}{'-' + args.tag if args.tag else ''}.npz")
    np.savez(vpath, canvas=vcanvas, labels=Y[val_idx], mask=mask_all[val_idx], kinds=K[val_idx],
             stream=ss, stream_seconds=v_seconds,
             **(dict(engines=engine_of[val_idx], stream_engines=d.stream_engine, held_out=np.array(d.held_ids)) if d.whole else {}))
    log(f"validation scores in {vpath}")
    if args.rescore or args.hold_out:
        if args.hold_out:
            v = Validation(dict(np.load(vpath)))
            k = args.consecutive
            thr = choose_threshold(v, args.rule, k)
            log(f"held-out {args.hold_out}: recall {v.recall(thr, k) * 100:.1f}% at rule {args.rule}'s threshold {thr:.3f} "
                f"(stream wakes {v.stream_wakes(thr, k)}); at 0.5: {v.recall(0.5, k) * 100:.1f}%")
        return 0
    v = Validation(dict(np.load(vpath)))
    k = args.consecutive
    chosen = choose_threshold(v, args.rule, k)
    recall = v.recall(chosen, k)
    stream_fw = v.stream_wakes(chosen, k)
    log(f"threshold {chosen:.3f} ({k} steps in a row, rule {args.rule}): validation recall {recall * 100:.1f}%, "
        f"false accepts {v.canvas_fa(chosen, k) * 100:.2f}% of other canvases, stream wakes {stream_fw} in {v_seconds / 60:.1f} min")

    # --- export (normalisation folded into the first layer) ----------------------------------
    write_head(args, trigger, stem, seed, params, mean_w, std_w, chosen, k, recall, stream_fw, v_seconds, fe_sha,
               E, Y, mined_total, d.wtag, t_start, d.others_rendered)


def others_rendered(args, stem):
    """The stems of the default triggers whose negatives this training renders itself (train_args: --others-rendered):
    all by default; a rescore keeps the split its head was trained on (its manifest's record; heads
    trained before the record existed took every cached trigger's canvases, so none)."""
    stems = [file_stem(t) for t in DEFAULT_TRIGGERS]
    if args.others_rendered is None:
        if not args.rescore:
            return stems
        man = json.load(open(os.path.join(args.models_dir, f"{stem}.json")))
        return list(man.get("training", {}).get("othersRendered", []))
    given = [w.strip() for w in args.others_rendered.split(",") if w.strip()]
    unknown = [w for w in given if w not in stems]
    if unknown:
        raise SystemExit(f"--others-rendered: {', '.join(unknown)} is not a default trigger ({', '.join(stems)})")
    return given


if __name__ == "__main__":
    sys.exit(main())
