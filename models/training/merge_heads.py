"""Candidate recipe v15 (RULE-V15.md): one head from the members of several heads of the same
trigger, logits averaged as the detector averages an ensemble's, with its threshold chosen by a
rule on training-engine validation only. The heads must share the front end, the network's shape
and the validation split: the training seed, or one `train_head.py --split-seed` for heads of several
seeds (candidate recipe v23, RULE-V40). Every seed reads the same cached canvases but draws its own
split, starting weights, batch order and mined windows, so heads of several seeds can be joined only
when one split seed held out the same canvases from all of them. Each member keeps its own
folded normalisation, so the merged head scores exactly as its members would together.

    .venv/bin/python merge_heads.py --stem alexa --from DIR_V4 DIR_V13 --out DIR \\
        --check .cache/valscores-alexa-TAG_A.npz .cache/valscores-alexa-TAG_B.npz
        (writes DIR/alexa.json + .bin with all members, scores the validation with train_head.py
         --rescore and sets the threshold by rule v2, 2 steps in a row; --check: the sources' own
         validation scores, which must be of the same canvases)

Training arguments that change which canvases exist (not the voices trained on) go after `--`:
the rescore keeps the split the sources' manifests record (`othersRendered`); heads trained before
that record existed need it given by hand with --check (`-- --others-rendered=` for heads trained
with every other trigger cached, as the shipped ones; `-- --others-rendered openclaw,computer` for
recipe v13's seed-1 alexa); --check catches a wrong one.
"""
import argparse
import copy
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import threshold  # noqa: E402
import val_rules  # noqa: E402
from head_file import member_prefix, read_members, tensor_blob  # noqa: E402

MAX_MEMBERS = 16         # WakeModel.swift refuses more
SAME = ("windowEmbeddings", "embeddingSize", "hidden", "activation", "output", "stepMilliseconds")


def split_of(man):
    """The seed a head's validation split was drawn with (train_head.py --split-seed; else its seed)."""
    return man["training"].get("splitSeed", man["training"]["seed"])


def merged(stem, sources, split_given, extra=()):
    """The merged head's manifest (its threshold not chosen yet) and weights; exits, writing nothing,
    when the sources cannot share one validation. split_given: the rescore is told the split by hand;
    extra: the rescore's train_head.py arguments (the recorded command repeats them)."""
    loaded = [read_members(d, stem) for d in sources]
    first = loaded[0][0]
    for d, (man, _) in zip(sources, loaded):
        for key in SAME:
            if man["network"][key] != first["network"][key]:
                sys.exit(f"merge_heads.py: {d}/{stem}.json has network {key} {man['network'][key]}, "
                         f"not {first['network'][key]} as {sources[0]}: only heads of one shape can be merged")
        if man["frontEnd"]["weightsSHA256"] != first["frontEnd"]["weightsSHA256"]:
            sys.exit(f"merge_heads.py: {d}/{stem}.json sits on another front end; retrain it on the shipped one")
        if split_of(man) != split_of(first):
            sys.exit(f"merge_heads.py: {d}/{stem}.json holds out the split of seed {split_of(man)}, "
                     f"{sources[0]} that of {split_of(first)}: their validation splits differ "
                     "(train heads of several seeds with one --split-seed)")
    splits = [m["training"].get("othersRendered") for m, _ in loaded]
    if None in splits and not split_given:
        sys.exit("merge_heads.py: a source head does not record its split (othersRendered: trained before 2026-12-05); "
                 "give it after -- (--others-rendered=...) and --check the sources' validation scores")
    if len({tuple(x) for x in splits if x is not None}) > 1 or (None in splits and any(x is not None for x in splits)):
        sys.exit(f"merge_heads.py: the heads were trained on different splits (othersRendered {splits}); "
                 "train one again with train.sh --others-rendered as the other's manifest says")
    members = [m for _, ms in loaded for m in ms]
    if len(members) > MAX_MEMBERS:
        sys.exit(f"merge_heads.py: {len(members)} members; the detector takes at most {MAX_MEMBERS}")
    blob, entries = tensor_blob([(member_prefix(mi) + name, a) for mi, m in enumerate(members) for name, a in m.items()])
    man = copy.deepcopy(first)
    man.update(weights=f"{stem}.bin", weightsBytes=len(blob), weightsSHA256=hashlib.sha256(blob).hexdigest(), tensors=entries)
    man["network"]["members"] = len(members)
    recipes = [m["training"]["recipe"].replace("models/training/train_head.py ", "") for m, _ in loaded]
    seeds = [m["training"]["seed"] for m, _ in loaded]
    several = len(set(seeds)) > 1
    if several and len(set(recipes)) == 1:   # candidate recipe v23: one recipe's heads of several seeds
        recipe = f"v23: the members of {len(seeds)} heads of {recipes[0]}, each of its own seed, one split (merge_heads.py)"
    else:
        recipe = "v15: the members of " + " and ".join(recipes) + " (merge_heads.py)"
    # How to train it again: each source's own command (make wake-model's, and the flags it adds), then the join.
    theirs = [c.partition("; this head: ")[2] or c for c in (m["training"].get("command", "?") for m, _ in loaded)]
    command = (f'make wake-model TRIGGER="{first["phrase"]}"; this head: ' + " and ".join(f"`{c}`" for c in theirs)
               + f", each into its own directory, joined by `models/training/merge_heads.py --stem {stem} --from DIRS --out DIR"
               + (" -- " + shlex.join(extra) if extra else "") + "`")
    engines = [e for m, _ in loaded for e in m["training"].get("engines", [])]
    man["training"] = {"recipe": recipe, "command": command,
                       "seed": first["training"]["seed"],
                       **({"splitSeed": split_of(first)} if several or split_of(first) != seeds[0] else {}),
                       **({"seeds": seeds} if several else {}),
                       **({"engines": list(dict.fromkeys(engines))} if engines else {}),
                       **({"othersRendered": splits[0]} if splits[0] is not None else {}),
                       "mergedFrom": [{"recipe": m["training"]["recipe"], "members": m["network"].get("members", 1),
                                       "threshold": m["threshold"], "weightsSHA256": m["weightsSHA256"],
                                       "engines": m["training"].get("engines")} for m, _ in loaded]}
    return man, blob


def same_validation(z, checks, several_seeds=False):
    """Exits unless each source's saved validation scores are of the rescore's canvases and stream.
    several_seeds: the sources' masks differ (each seed draws which canvases also learn from the
    stream's first steps), so only the labels and kinds are compared."""
    for c in checks:
        other = np.load(c)
        for key in ("labels", "kinds") + (() if several_seeds else ("mask",)):
            if not np.array_equal(other[key], z[key]):
                sys.exit(f"merge_heads.py: {c} has other validation {key} than the rescore: not the same split, no head written")
        if not np.isclose(float(other["stream_seconds"]), float(z["stream_seconds"])):
            sys.exit(f"merge_heads.py: {c}'s validation stream is {other['stream_seconds']} s, the rescore's {z['stream_seconds']} s")
        print(f"merge_heads.py: {c}: the same validation canvases and stream", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stem", required=True, help="the trigger's file stem (models/<stem>.json)")
    ap.add_argument("--from", dest="sources", nargs="+", required=True, help="model directories holding <stem>.json")
    ap.add_argument("--out", required=True, help="directory for the merged head (created)")
    ap.add_argument("--tag", default="-v15", help="the rescore's validation-score file: .cache/valscores-<stem>-<tag>.npz")
    ap.add_argument("--check", nargs="*", default=[], help="validation scores saved by the source heads' training: "
                    "their labels and kinds must equal the rescore's (the same validation)")
    ap.add_argument("--rule", default="v2")
    ap.add_argument("--consecutive", type=int, default=2)
    ap.add_argument("rest", nargs=argparse.REMAINDER, help="after --: more train_head.py arguments")
    args = ap.parse_args()
    sources = [os.path.abspath(s) for s in args.sources]
    extra = [a for a in args.rest if a != "--"]
    man, blob = merged(args.stem, sources, bool(args.check) and any(a.startswith("--others-rendered") for a in extra), extra)
    offset = zlib.crc32(args.stem.encode()) % 100000
    base_seed = man["training"]["seed"] - offset
    # Heads of several seeds: the rescore draws the first source's canvases and the split they share.
    split_flag = ["--split-seed", str(man["training"]["splitSeed"] - offset)] if "splitSeed" in man["training"] else []
    out = os.path.abspath(args.out)
    with tempfile.TemporaryDirectory() as work:   # the head goes to --out only with its threshold chosen
        for f in ("frontend.json", "frontend.bin"):
            shutil.copy2(os.path.join(sources[0], f), work)
        with open(os.path.join(work, f"{args.stem}.bin"), "wb") as f:
            f.write(blob)
        with open(os.path.join(work, f"{args.stem}.json"), "w") as f:
            json.dump(man, f, indent=2)
            f.write("\n")
        print(f"merge_heads.py: {man['network']['members']} members from " + ", ".join(sources), flush=True)
        # The rescore: train_head.py builds recipe v4's canvases and split from the cache and scores them
        # with the merged head; nothing is trained.
        cmd = ["bash", os.path.join(HERE, "train.sh"), man["phrase"], "--rescore", "--models-dir", work,
               f"--tag={args.tag}", "--seed", str(base_seed), *split_flag, "--rule", args.rule, "--consecutive", str(args.consecutive), *extra]
        print("merge_heads.py: scoring the validation: " + " ".join(cmd[2:]), flush=True)
        # Recipe v4's canvases, as the sources (recipe v4 and v13) were trained: train.sh's default for a
        # new phrase is recipe v16, whose near misses found by sound would change the split.
        if subprocess.run(cmd, env=dict(os.environ, WAKE_RECIPE="v4")).returncode != 0:
            sys.exit("merge_heads.py: the rescore failed (above); no head written")
        z = dict(np.load(os.path.join(HERE, ".cache", f"valscores-{args.stem}-{args.tag}.npz")))
        same_validation(z, args.check, "seeds" in man["training"])
        v = threshold.Validation(z)
        t = threshold.choose_threshold(v, args.rule, args.consecutive)
        set_by = f"models/training/merge_heads.py --stem {args.stem} (rule {args.rule}, {args.consecutive} steps in a row)"
        val_rules.write_threshold(work, args.stem, v, round(t, 4), args.consecutive, args.rule, set_by)
        os.makedirs(out, exist_ok=True)
        for f in ("frontend.json", "frontend.bin", f"{args.stem}.json", f"{args.stem}.bin"):
            if f.startswith("frontend") and os.path.exists(os.path.join(out, f)):
                continue
            shutil.copy2(os.path.join(work, f), out)
    print(f"merge_heads.py: {out}/{args.stem}.json: threshold {t:.3f} (rule {args.rule}, {args.consecutive} in a row): "
          f"validation recall {v.recall(t, args.consecutive) * 100:.1f} %, stream wakes {v.stream_wakes(t, args.consecutive)} "
          f"in {v.hours * 60:.0f} min; sources: " + ", ".join(f"{m['threshold']}" for m in man["training"]["mergedFrom"]))


if __name__ == "__main__":
    main()
