"""Threshold rule v4 (RULE-V16.md): a head's rule-v2 threshold raised, on rule v2's grid, until the
head alone wakes not once over the training half of the voice prompts (prompts.py: recorded human
speech no head trains on; the evaluation half stays held out for real_negatives.py --half eval).
The release detector scores the joined prompts once per head (`wake detect --scores`); its per-step
scores are replayed with the head's steps in a row and the detector's 2 s refractory.

    .venv/bin/python prompt_threshold.py --models DIR alexa jarvis            (prints, changes nothing)
    .venv/bin/python prompt_threshold.py --models DIR alexa jarvis --apply    (writes DIR/<stem>.json)

Needs the prompts (apt-get install asterisk-core-sounds-{en,es,fr,it,ru}{,-wav}) and a release build.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

import prompts
import real_negatives
from head import detections
from threshold import THRESHOLD_GRID

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
ALLOWED_WAKES = 0


def training_half_stream(out_dir):
    """The training half of every prompt set joined into one WAV (built once); its path and hours."""
    os.makedirs(out_dir, exist_ok=True)
    wav = os.path.join(out_dir, "prompts-train-half.wav")
    files = [f for key in prompts.SETS for f in prompts.prompts(key, "train")[0]]
    meta = wav + ".json"
    if not (os.path.exists(wav) and os.path.exists(meta) and json.load(open(meta))["prompts"] == len(files)):
        _, seconds, skipped = real_negatives.join_prompts(files, wav)
        json.dump({"prompts": len(files), "seconds": seconds, "skipped": len(skipped)}, open(meta, "w"))
    return wav, json.load(open(meta))["seconds"] / 3600


def scores(binary, wav, models_dir, stem):
    cmd = [binary, "wake", "detect", "--input", wav, "--phrases", stem, "--models", models_dir, "--scores"]
    with tempfile.TemporaryDirectory() as state:      # the head alone: no household enrollment applies
        run = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, CLAWVOICE_STATE_DIR=state))
    if run.returncode != 0:
        sys.exit(f"prompt_threshold.py: {' '.join(cmd)} failed ({run.returncode}): {run.stderr.strip()}")
    steps = [json.loads(line) for line in run.stdout.splitlines() if line.startswith('{"ms"')]
    return np.array([st["scores"][stem] for st in steps], np.float32)


def rule_v4(s, t_v2, k):
    """The lowest grid threshold >= t_v2 with at most ALLOWED_WAKES wakes on the scores s (head.detections:
    k steps in a row, the detector's 2 s refractory)."""
    return next((float(t) for t in THRESHOLD_GRID if t >= t_v2 - 1e-9 and detections(s, t, k=k) <= ALLOWED_WAKES), 0.999)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("stems", nargs="+")
    ap.add_argument("--models", required=True, help="directory with <stem>.json (rule v2's threshold) and the front end")
    ap.add_argument("--bin", default=os.path.join(ROOT, ".build", "release", "clawvoice"))
    ap.add_argument("--out", default="/tmp/clawvoice-asterisk-prompts", help="where the joined prompts are kept")
    ap.add_argument("--apply", action="store_true", help="write rule v4's threshold into each <stem>.json")
    args = ap.parse_args()
    if not os.access(args.bin, os.X_OK):
        sys.exit(f"prompt_threshold.py: {args.bin} not found; build it with: swift build -c release --product clawvoice")
    wav, hours = training_half_stream(args.out)
    print(f"prompt_threshold.py: the prompts' training half, {hours:.2f} h ({wav})", flush=True)
    for stem in args.stems:
        path = os.path.join(args.models, f"{stem}.json")
        man = json.load(open(path))
        tr = man.get("training", {})
        t_v2 = float(tr.get("ruleV2Threshold", man["threshold"]))     # applied once already: start from rule v2's
        k = int(man.get("consecutiveSteps", 1))
        s = scores(args.bin, wav, args.models, stem)
        t = rule_v4(s, t_v2, k)
        left = detections(s, t, k=k)
        print(f"  {stem}: rule v2 {t_v2:.3f} ({detections(s, t_v2, k=k)} wakes on the prompts) -> "
              f"rule v4 {t:.3f} ({left} wakes; {k} steps in a row)", flush=True)
        if left > ALLOWED_WAKES:
            print(f"    no threshold on the grid keeps {stem} from waking on the prompts ({left} wakes at {t:.3f})", flush=True)
        if args.apply:
            tr["ruleV2Threshold"] = round(t_v2, 4)
            if "validation" in tr:            # its figures are rule v2's threshold's
                tr["ruleV2Validation"] = tr.pop("validation")
            tr["thresholdRule"] = "prompts (RULE-V16's rule v4)"
            tr["thresholdSetBy"] = (f"models/training/prompt_threshold.py {stem} --apply (rule v2, then the lowest threshold "
                                    f"with {left} wakes in {hours:.2f} h of the voice prompts' training half)")
            man["threshold"], man["training"] = round(t, 4), tr
            with open(path, "w") as f:
                json.dump(man, f, indent=2)
                f.write("\n")
            print(f"    wrote {path}: threshold {t:.3f}", flush=True)


if __name__ == "__main__":
    main()
