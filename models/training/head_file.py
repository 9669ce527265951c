"""The head's files, models/<stem>.json + .bin: written after training with the input normalisation
folded into the first layer (the manifest records the recipe, data and validation), and read
back with it unfolded for --rescore."""
import hashlib
import json
import os
import re
import shlex
import time

import numpy as np

import frontend
import render
import voices
from train_args import DEFAULT_SEED, recipe_name, split_seed

log = render.log


def this_head(args, trigger, wide_changed):
    """'; this head: bash models/training/train.sh TRIGGER FLAGS' when the head was trained with flags
    make wake-model does not give (a candidate recipe's, another seed, a negatives scale), so the
    manifest says how to train it again; else nothing."""
    flags = re.findall(r"\((--[^)]*)\)", recipe_name(args, wide_changed))
    if not render.own_recipe(trigger):   # what make wake-model adds for a new phrase (WAKE_RECIPE v16, v17)
        flags = [f for f in flags if not f.startswith(("--phonetic-near 40", "--phonetic-common 40"))]
    if args.negatives_scale != 1:
        flags.append(f"--negatives-scale {args.negatives_scale:g}")
    if args.seed != DEFAULT_SEED:
        flags.append(f"--seed {args.seed}")
    if getattr(args, "split_seed", None) is not None:
        flags.append(f"--split-seed {args.split_seed}")
    return f"; this head: bash models/training/train.sh {shlex.quote(trigger)} {' '.join(flags)}" if flags else ""


def new_phrase_v4(args, trigger):
    """' WAKE_RECIPE=v4' for a new phrase trained without recipe v16's near misses (make wake-model's
    default for a new phrase is v16 since RULE-V21), ' WAKE_RECIPE=v17' with candidate v17's common
    words, so the recorded command names the base recipe (a candidate's flags, such as v13's --rhvoice
    or v18's --members 5, are in training.recipe)."""
    if render.own_recipe(trigger):
        return ""
    if getattr(args, "phonetic_common", 0):
        return " WAKE_RECIPE=v17"
    return "" if getattr(args, "phonetic_near", 0) else " WAKE_RECIPE=v4"


def member_prefix(mi):
    """Tensor names of an ensemble's member mi start with this (member 0: none, as a single head)."""
    return "" if mi == 0 else f"member{mi}."


def read_members(models_dir, stem):
    """A head's manifest and, per ensemble member, its tensors {name without prefix: array}, as stored
    (normalisation folded in)."""
    man = json.load(open(os.path.join(models_dir, f"{stem}.json")))
    wts = np.fromfile(os.path.join(models_dir, man["weights"]), "<f4")
    ten = {e["name"]: wts[e["offset"]:e["offset"] + int(np.prod(e["shape"]))].reshape(e["shape"]) for e in man["tensors"]}
    members = []
    for mi in range(man["network"].get("members", 1)):
        pre = member_prefix(mi)
        members.append({n[len(pre):]: a for n, a in ten.items() if n.startswith(pre) and (pre or not n.startswith("member"))})
    return man, members


def tensor_blob(tensors):
    """The .bin bytes of [(name, array)] (little-endian float32, in order) and the manifest's entries."""
    blob = b"".join(np.asarray(a).astype("<f4").tobytes() for _, a in tensors)
    entries, off = [], 0
    for name, a in tensors:
        entries.append({"name": name, "shape": list(np.shape(a)), "offset": off})
        off += int(np.size(a))
    return blob, entries


def read_head(models_dir, stem, mean_w, std_w):
    """The existing head's parameters in training's normalised inputs: one head, or a list of an
    ensemble's members (each unfolded on its own, so members trained with other normalisations,
    as merge_heads.py puts together, score exactly as the detector scores them)."""
    man, stored = read_members(models_dir, stem)
    members = []
    for t in stored:
        w0 = t["dense0.weight"].astype(np.float64) * std_w[None, :]      # unfold the normalisation
        members.append({"w0": w0.astype(np.float32), "b0": (t["dense0.bias"] + w0 @ (mean_w / std_w)).astype(np.float32),
                        "w1": t["dense1.weight"], "b1": t["dense1.bias"], "w2": t["dense2.weight"], "b2": t["dense2.bias"]})
    log(f"rescoring the existing head {os.path.join(models_dir, stem)}.json ({len(members)} member(s), threshold {man['threshold']})")
    return members[0] if len(members) == 1 else members


def write_head(args, trigger, stem, seed, params, mean_w, std_w, chosen, k, recall, stream_fw, v_seconds, fe_sha,
               E, Y, mined_total, wtag, t_start, others_rendered=()):
    """models/<stem>.bin (every tensor as little-endian float32) and its manifest models/<stem>.json."""
    sc = args.scale
    tensors = []
    for mi, pm in enumerate(params if isinstance(params, list) else [params]):
        pre = member_prefix(mi)
        w0 = np.asarray(pm["w0"], np.float64)
        b0 = np.asarray(pm["b0"], np.float64) - w0 @ (mean_w / std_w)
        w0 = w0 / std_w[None, :]
        tensors += [(pre + "dense0.weight", w0), (pre + "dense0.bias", b0), (pre + "dense1.weight", np.asarray(pm["w1"])),
                    (pre + "dense1.bias", np.asarray(pm["b1"])), (pre + "dense2.weight", np.asarray(pm["w2"])),
                    (pre + "dense2.bias", np.asarray(pm["b2"]))]
    blob, entries = tensor_blob(tensors)
    import jax
    import jaxlib
    manifest = {
        "format": "clawvoice-wake", "version": 2, "phrase": trigger, "weights": f"{stem}.bin",
        "weightsBytes": len(blob), "weightsSHA256": hashlib.sha256(blob).hexdigest(), "threshold": round(chosen, 4),
        "consecutiveSteps": k,
        "frontEnd": {"manifest": "frontend.json", "weightsSHA256": fe_sha},
        "network": {"type": "embedding-mlp", "windowEmbeddings": args.window, "embeddingSize": frontend.EMB_DIM,
                    "hidden": [args.hidden, args.hidden], "activation": "relu", "output": "sigmoid",
                    "stepMilliseconds": 80, **({"members": len(params)} if isinstance(params, list) else {})},
        "tensors": entries,
        "training": {
            "recipe": recipe_name(args, bool(wtag)),
            "command": f'make wake-model TRIGGER="{trigger}"' + new_phrase_v4(args, trigger) + this_head(args, trigger, bool(wtag)), "seed": seed,
            **({"splitSeed": split_seed(args, seed)} if getattr(args, "split_seed", None) is not None else {}),
            "framework": f"jax {jax.__version__} / jaxlib {jaxlib.__version__}, CPU",
            "engines": voices.TRAIN_ENGINES + (["kokoro"] if args.kokoro else []) + (["rhvoice"] if args.rhvoice else []), "heldOut": "flite (awb, rms evaluated; kal, kal16, slt never used)",
            "canvases": int(len(E)) - int(getattr(args, "near_val", 0) * sc), "triggerCanvases": int((Y == 1).any(axis=1).sum()), "epochs": args.stop_after or args.epochs,
            "epochSchedule": args.epochs, "inputDropout": args.dropout, "inputNoise": args.noise,
            "canvasShift": args.shift, "weightDecay": args.l2,
            "seconds": round(time.time() - t_start),
            "hardNegatives": {"mineHours": args.mine_hours, "threshold": args.mine_threshold, "weight": args.mine_weight,
                              "rounds": args.mine_rounds if args.mine_hours > 0 else 0, "insetWeight": args.mine_inset_weight, "source": args.mine_source, "minedWindows": mined_total},
            "thresholdRule": args.rule, **({"nearValidationCanvases": int(args.near_val * sc)} if getattr(args, "near_val", 0) else {}), "wideTriggerCanvases": int(args.wide * sc), "hardTriggerCanvases": int(args.hard * sc), "humanCanvases": int(args.human * sc), **({"realNegativeCanvases": int(args.real_negatives * sc)} if args.real_negatives else {}), **({"promptNegativeCanvases": int(args.prompt_negatives * sc)} if args.prompt_negatives else {}), **({"stampNegativeCanvases": int(args.stamp_negatives * sc)} if getattr(args, "stamp_negatives", 0) else {}), **({"gameNegativeCanvases": int(args.game_negatives * sc)} if getattr(args, "game_negatives", 0) else {}), "kokoroTriggerCanvases": int(args.kokoro * sc), **({"rhvoiceTriggerCanvases": int(args.rhvoice * sc)} if args.rhvoice else {}),
            "othersRendered": sorted(others_rendered),
            "validation": {"recall": round(recall, 4), "streamMinutes": round(v_seconds / 60, 1),
                           "streamFalseWakes": stream_fw},
        },
    }
    with open(os.path.join(args.models_dir, f"{stem}.bin"), "wb") as f:
        f.write(blob)
    with open(os.path.join(args.models_dir, f"{stem}.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    out = os.path.join(args.models_dir, stem)
    log(f"wrote {out}.json + {out}.bin ({len(blob) / 1024:.0f} KiB) in {(time.time() - t_start) / 60:.1f} min")
