"""Candidate recipe v15 (RULE-V15.md): one head from the members of several heads of the same
trigger, logits averaged as the detector averages an ensemble's, with its threshold chosen by a
rule on training-engine validation only. The heads must share the front end, the network's shape
and the training seed (so their validation split is the same); each member keeps its own folded
normalisation, so the merged head scores exactly as its members would together.

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
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from head_file import member_prefix, read_members, tensor_blob  # noqa: E402
MAX_MEMBERS = 8          # WakeModel.swift refuses more
SAME = ("windowEmbeddings", "embeddingSize", "hidden", "activation", "output", "stepMilliseconds")


def merge(stem, sources, out):
    """Writes out/<stem>.json + .bin; returns the manifest (its threshold not chosen yet)."""
    loaded = [read_members(d, stem) for d in sources]
    first = loaded[0][0]
    for d, (man, _) in zip(sources, loaded):
        for key in SAME:
            if man["network"][key] != first["network"][key]:
                sys.exit(f"merge_heads.py: {d}/{stem}.json has network {key} {man['network'][key]}, "
                         f"not {first['network'][key]} as {sources[0]}: only heads of one shape can be merged")
        if man["frontEnd"]["weightsSHA256"] != first["frontEnd"]["weightsSHA256"]:
            sys.exit(f"merge_heads.py: {d}/{stem}.json sits on another front end; retrain it on the shipped one")
        if man["training"]["seed"] != first["training"]["seed"]:
            sys.exit(f"merge_heads.py: {d}/{stem}.json was trained with seed {man['training']['seed']}, "
                     f"{sources[0]} with {first['training']['seed']}: their validation splits differ")
    rendered = {tuple(m["training"]["othersRendered"]) for m, _ in loaded if "othersRendered" in m["training"]}
    if len(rendered) > 1 or (rendered and not all("othersRendered" in m["training"] for m, _ in loaded)):
        sys.exit(f"merge_heads.py: the heads were trained on different splits (othersRendered {sorted(rendered)}); "
                 "train one again with train.sh --others-rendered as the other's manifest says")
    members = [m for _, ms in loaded for m in ms]
    if len(members) > MAX_MEMBERS:
        sys.exit(f"merge_heads.py: {len(members)} members; the detector takes at most {MAX_MEMBERS}")
    tensors = [(member_prefix(mi) + name, a) for mi, m in enumerate(members) for name, a in m.items()]
    blob, entries = tensor_blob(tensors)
    man = json.loads(json.dumps(first))
    man.update(weights=f"{stem}.bin", weightsBytes=len(blob), weightsSHA256=hashlib.sha256(blob).hexdigest(), tensors=entries)
    man["network"]["members"] = len(members)
    recipes = [m["training"]["recipe"].replace("models/training/train_head.py ", "") for m, _ in loaded]
    man["training"] = {"recipe": "v15: the members of " + " and ".join(recipes) + " (merge_heads.py)",
                       "command": f"models/training/merge_heads.py --stem {stem} --from " + " ".join(sources),
                       "seed": first["training"]["seed"],
                       **({"othersRendered": list(next(iter(rendered)))} if rendered else {}),
                       "mergedFrom": [{"recipe": m["training"]["recipe"], "members": m["network"].get("members", 1),
                                       "threshold": m["threshold"], "weightsSHA256": m["weightsSHA256"],
                                       "engines": m["training"].get("engines")} for m, _ in loaded]}
    os.makedirs(out, exist_ok=True)
    for f in ("frontend.json", "frontend.bin"):
        if not os.path.exists(os.path.join(out, f)):
            shutil.copy2(os.path.join(sources[0], f), out)
    with open(os.path.join(out, f"{stem}.bin"), "wb") as f:
        f.write(blob)
    with open(os.path.join(out, f"{stem}.json"), "w") as f:
        json.dump(man, f, indent=2)
        f.write("\n")
    print(f"merge_heads.py: {out}/{stem}.json: {len(members)} members from " + ", ".join(sources), flush=True)
    return man


def gone(args):
    """Removes a merged head whose threshold was never chosen (it carries a source's)."""
    for ext in ("json", "bin"):
        try:
            os.remove(os.path.join(args.out, f"{args.stem}.{ext}"))
        except FileNotFoundError:
            pass


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
    man = merge(args.stem, [os.path.abspath(s) for s in args.sources], os.path.abspath(args.out))
    base_seed = man["training"]["seed"] - zlib.crc32(args.stem.encode()) % 100000
    extra = [a for a in args.rest if a != "--"]
    recorded = ["othersRendered" in json.load(open(os.path.join(d, f"{args.stem}.json")))["training"] for d in args.sources]
    explicit = any(a.startswith("--others-rendered") for a in extra)
    if not all(recorded) and not explicit and not args.check:
        gone(args)
        sys.exit("merge_heads.py: a source head does not record its split (othersRendered: trained before 2026-12-05); "
                 "give it after -- (--others-rendered=... ) and --check the sources' validation scores")
    # The rescore: train_head.py builds recipe v4's canvases and split from the cache and scores them
    # with the merged head; nothing is trained.
    cmd = ["bash", os.path.join(HERE, "train.sh"), man["phrase"], "--rescore", "--models-dir", os.path.abspath(args.out),
           f"--tag={args.tag}", "--seed", str(base_seed), "--rule", args.rule, "--consecutive", str(args.consecutive), *extra]
    print("merge_heads.py: scoring the validation: " + " ".join(cmd[2:]), flush=True)
    if subprocess.run(cmd).returncode != 0:
        gone(args)
        sys.exit("merge_heads.py: the rescore failed (above); no head written")

    import threshold
    import val_rules
    path = os.path.join(HERE, ".cache", f"valscores-{args.stem}-{args.tag}.npz")
    z = dict(np.load(path))
    for c in args.check:
        other = np.load(c)
        for key in ("labels", "kinds", "mask"):
            if not np.array_equal(other[key], z[key]):
                gone(args)
                sys.exit(f"merge_heads.py: {c} has other validation {key} than the rescore: not the same split, no threshold set")
        if not np.isclose(float(other["stream_seconds"]), float(z["stream_seconds"])):
            gone(args)
            sys.exit(f"merge_heads.py: {c}'s validation stream is {other['stream_seconds']} s, the rescore's {z['stream_seconds']} s")
        print(f"merge_heads.py: {c}: the same validation canvases and stream", flush=True)
    v = threshold.Validation(z)
    t = threshold.choose_threshold(v, args.rule, args.consecutive)
    set_by = f"models/training/merge_heads.py --stem {args.stem} (rule {args.rule}, {args.consecutive} steps in a row)"
    val_rules.write_threshold(os.path.abspath(args.out), args.stem, v, round(t, 4), args.consecutive, args.rule, set_by)
    print(f"merge_heads.py: threshold {t:.3f} (rule {args.rule}, {args.consecutive} in a row): validation recall "
          f"{v.recall(t, args.consecutive) * 100:.1f} %, stream wakes {v.stream_wakes(t, args.consecutive)} in "
          f"{v.hours * 60:.0f} min; sources: " + ", ".join(f"{m['threshold']}" for m in man["training"]["mergedFrom"]))


if __name__ == "__main__":
    main()
