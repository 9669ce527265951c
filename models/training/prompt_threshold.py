"""Threshold rules that raise rule v2's threshold on a stream no head trains on:

  rule v4 (RULE-V16.md, --stream prompts): until the head alone wakes not once over the training
    half of the voice prompts (prompts.py: recorded human speech; the evaluation half stays held
    out for real_negatives.py --half eval);
  rule v5 (RULE-V19.md, --stream unseen): until it wakes at most 0.5 times per hour over the
    unseen-voice validation stream (unseen_stream.py: RHVoice and Kokoro reading the validation
    sentences); a head that trained on either engine, or whose phrase those sentences say, is refused;
  rule v5b (RULE-V21.md, --stream unseen-rhvoice): rule v5 on that stream's RHVoice part alone (its
    first 2.27 h, bit for bit; about 4 minutes to build where rule v5's takes 25);
  rule v5c (RULE-V24.md, --stream unseen-rhvoice --fine): rule v5b on a grid of 0.001 from 0.90 up,
    where the usual grid steps by 0.01 below 0.98 (a grid step there costs real people 1-2 points).

The release detector scores the stream once per head (`wake detect --scores`); its per-step
scores are replayed with the head's steps in a row and the detector's 2 s refractory. Rule v2's
threshold is kept in the manifest (training.ruleV2Threshold), so a head can be raised again.

    .venv/bin/python prompt_threshold.py --models DIR alexa jarvis [--stream unseen]           (prints, changes nothing)
    .venv/bin/python prompt_threshold.py --models DIR alexa jarvis [--stream unseen] --apply   (writes DIR/<stem>.json)
    .venv/bin/python prompt_threshold.py --models DIR alexa --stream unseen-rhvoice --fine --apply   (rule v5c: train.sh's)
    .venv/bin/python prompt_threshold.py --models DIR alexa --stream unseen --sweep 0.8,0.9,0.95  (wakes at each, per engine)
    .venv/bin/python prompt_threshold.py --models DIR alexa --stream unseen-rhvoice --where 0.9   (where it wakes, and
        what PocketSphinx hears in the 2.5 s before each wake, with the pocketsphinx wheel: a look, no figure)

Needs a release build (not --refusal-only); --stream prompts needs the prompts (apt-get install
asterisk-core-sounds-{en,es,fr,it,ru}{,-wav}), --stream unseen builds its stream once (~25 min).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

import prompts
import real_negatives
from head import detections, wake_steps
from threshold import FINE_GRID, THRESHOLD_GRID

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
# Per stream: what it is called in a manifest, the rule, and how many wakes per hour it allows
# (rule v4 allows none at all).
STREAMS = {"prompts": dict(name="the voice prompts' training half", rule="prompts (RULE-V16's rule v4)", per_hour=0.0),
           "unseen": dict(name="the unseen-voice validation stream", rule="unseen voices (RULE-V19's rule v5)", per_hour=0.5,
                          engines=("rhvoice", "kokoro")),
           "unseen-rhvoice": dict(name="the unseen-voice validation stream's RHVoice part",
                                  rule="unseen voices, RHVoice (RULE-V21's rule v5b)", per_hour=0.5, engines=("rhvoice",))}


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


def scores(binary, wav, models_dir, phrase):
    """The head's score at every step; the detector keys them by the manifest's phrase ("hey claw"),
    not by the file's stem ("hey-claw")."""
    cmd = [binary, "wake", "detect", "--input", wav, "--phrases", phrase, "--models", models_dir, "--scores"]
    with tempfile.TemporaryDirectory() as state:      # the head alone: no household enrollment applies
        run = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, CLAWVOICE_STATE_DIR=state))
    if run.returncode != 0:
        sys.exit(f"prompt_threshold.py: {' '.join(cmd)} failed ({run.returncode}): {run.stderr.strip()}")
    steps = [json.loads(line) for line in run.stdout.splitlines() if line.startswith('{"ms"')]
    return np.array([st["scores"][phrase] for st in steps], np.float32)


def raised(s, t_v2, k, allowed, grid=THRESHOLD_GRID):
    """The lowest grid threshold >= t_v2 with at most `allowed` wakes on the scores s (head.detections:
    k steps in a row, the detector's 2 s refractory)."""
    return next((float(t) for t in grid if t >= t_v2 - 1e-9 and detections(s, t, k=k) <= allowed), 0.999)


def not_unseen(man, engines):
    """Why the unseen stream of these engines is no validation for this head, or None: it trained on
    one of them, or the sentences they read say its phrase."""
    import speech
    import unseen_stream as u
    tr = man.get("training", {})
    used = sorted((set(tr.get("engines", [])) | {e for e in engines if tr.get(f"{e}TriggerCanvases", 0)}) & set(engines))
    if used:
        return f"it trained on {', '.join(used)}"
    said = [t for e, texts in u.texts().items() if e in engines for t in texts
            if speech.contains_trigger(t, [man["phrase"]])]
    return f"the stream's sentences say {man['phrase']!r} ({len(said)} clips)" if said else None


def rule_v2_threshold(man, path):
    """Rule v2's threshold: kept aside once a rule here raised it, else the manifest's (which must be rule v2's)."""
    tr = man.get("training", {})
    if "ruleV2Threshold" in tr:
        return float(tr["ruleV2Threshold"])
    if tr.get("thresholdRule", "v2") != "v2":
        sys.exit(f"prompt_threshold.py: {path} has a rule-{tr['thresholdRule']} threshold, not rule v2's; "
                 f"rescore it with train_head.py --rescore --rule v2 first")
    return float(man["threshold"])


def engine_spans(meta, n_steps):
    """(engine, first step, end step) of each engine's part of the unseen stream (its parts come in order)."""
    out, at = [], 0
    for e, h in meta["hoursByEngine"].items():
        n = int(round(h * 3600 / 0.08))
        out.append((e, at, min(at + n, n_steps)))
        at += n
    return out


def where(wav, s, t, k, stem):
    """Each wake at t (time in the stream, peak score) and PocketSphinx's words for the 2.5 s before it."""
    try:
        from pocketsphinx import Decoder
    except ImportError:
        Decoder = None
        print("  (no pocketsphinx wheel: times only; .venv/bin/pip install pocketsphinx==5.1.1)", flush=True)
    import wave
    with wave.open(wav) as r:
        for step in wake_steps(s, t, k=k):
            ms = (step + 1) * 80
            heard = ""
            if Decoder:
                r.setpos(max(0, (ms - 2500) * 16))
                d = Decoder(loglevel="FATAL")
                d.start_utt()
                d.process_raw(r.readframes(16 * 3000), False, True)
                d.end_utt()
                heard = d.hyp().hypstr if d.hyp() else ""
            print(f"  {stem} at {ms / 1000:8.1f} s, peak {s[max(0, step - 3):step + 1].max():.3f}: {heard}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("stems", nargs="+")
    ap.add_argument("--models", required=True, help="directory with <stem>.json (rule v2's threshold) and the front end")
    ap.add_argument("--stream", choices=sorted(STREAMS), default="prompts",
                    help="prompts: rule v4 (no wake); unseen: rule v5 (<= 0.5 wakes per hour); "
                         "unseen-rhvoice: rule v5b (rule v5 on the stream's RHVoice part; with --fine rule v5c)")
    ap.add_argument("--bin", default=os.path.join(ROOT, ".build", "release", "clawvoice"))
    ap.add_argument("--out", default=None, help="where the stream is kept (prompts: /tmp/clawvoice-asterisk-prompts; "
                                                "unseen: models/training/.cache/unseen)")
    ap.add_argument("--apply", action="store_true", help="write the rule's threshold into each <stem>.json")
    ap.add_argument("--keep-if-refused", action="store_true", help="when the stream is no validation for a head, "
                    "say so and keep its rule-v2 threshold (exit 0; what train.sh asks for)")
    ap.add_argument("--sweep", default="", help="comma-separated thresholds: print the wakes at each (per engine "
                    "for --stream unseen) instead of choosing one")
    ap.add_argument("--where", type=float, default=None, metavar="T",
                    help="list each wake at threshold T with what PocketSphinx hears before it, instead of choosing one")
    ap.add_argument("--fine", action="store_true", help="rule v5c with --stream unseen-rhvoice: a grid of 0.001 "
                    "from 0.90 up (RULE-V24; what train.sh applies; --sweep and --where take their own thresholds)")
    ap.add_argument("--refusal-only", action="store_true", help="say which heads an unseen-voice stream refuses "
                    "(implies --keep-if-refused) and exit 3 if it refuses all, 0 if any is left to score (no detector "
                    "needed: train.sh asks before it builds one)")
    args = ap.parse_args()
    spec = dict(STREAMS[args.stream])
    if args.fine:
        if args.stream != "unseen-rhvoice":
            ap.error("--fine is rule v5c: rule v5b's stream, --stream unseen-rhvoice")
        spec["rule"] = "unseen voices, RHVoice, fine grid (RULE-V24's rule v5c)"
    if args.refusal_only:
        if not args.stream.startswith("unseen"):
            ap.error("--refusal-only: only an unseen-voice stream refuses heads")
        args.keep_if_refused = True
    missing = [s for s in args.stems if not os.path.exists(os.path.join(args.models, f"{s}.json"))]
    if missing:
        sys.exit(f"prompt_threshold.py: no {', '.join(m + '.json' for m in missing)} in {args.models}; train it first "
                 f"(bash models/training/train.sh WORD --models-dir {args.models})")
    mans = {stem: json.load(open(os.path.join(args.models, f"{stem}.json"))) for stem in args.stems}
    meta = None
    if args.stream.startswith("unseen"):
        import unseen_stream as u
        bad = {stem: why for stem, m in mans.items() if (why := not_unseen(m, spec["engines"]))}
        if bad and args.keep_if_refused:
            for stem, why in bad.items():
                print(f"prompt_threshold.py: {stem}: {why}, so {spec['name']} is no validation for it; "
                      f"it keeps rule v2's threshold {float(mans[stem]['threshold']):.3f}", flush=True)
                del mans[stem]
            if not mans:
                sys.exit(3 if args.refusal_only else 0)
        elif bad:
            sys.exit("prompt_threshold.py: " + "; ".join(f"{s}: {why}" for s, why in bad.items())
                     + ": the unseen-voice stream is no validation for it; use --stream prompts or another head")
    if args.refusal_only:
        return
    if not os.access(args.bin, os.X_OK):
        sys.exit(f"prompt_threshold.py: {args.bin} not found; build it with: swift build -c release --product clawvoice")
    if args.stream.startswith("unseen"):
        wav, meta = u.build(args.out or u.DEFAULT_OUT, spec["engines"])
        hours = meta["hours"]
    else:
        wav, hours = training_half_stream(args.out or "/tmp/clawvoice-asterisk-prompts")
    allowed = math.floor(spec["per_hour"] * hours + 1e-9)
    print(f"prompt_threshold.py: {spec['name']}, {hours:.2f} h ({wav}); at most {allowed} wakes", flush=True)
    for stem, man in mans.items():
        path = os.path.join(args.models, f"{stem}.json")
        tr = man.get("training", {})
        t_v2 = rule_v2_threshold(man, path)
        k = int(man.get("consecutiveSteps", 1))
        s = scores(args.bin, wav, args.models, man["phrase"])
        if args.where is not None:
            where(wav, s, args.where, k, stem)
            continue
        if args.sweep:
            parts = engine_spans(meta, len(s)) if meta else [(spec["name"], 0, len(s))]
            for t in [float(x) for x in args.sweep.split(",")]:
                print(f"  {stem} at {t:.3f}: {detections(s, t, k=k)} wakes (" + ", ".join(
                    f"{e} {detections(s[a:b], t, k=k)}" for e, a, b in parts) + f"; {k} steps in a row)", flush=True)
            continue
        t = raised(s, t_v2, k, allowed, FINE_GRID if args.fine else THRESHOLD_GRID)
        left = detections(s, t, k=k)
        print(f"  {stem}: rule v2 {t_v2:.3f} ({detections(s, t_v2, k=k)} wakes) -> {t:.3f} ({left} wakes; "
              f"{k} steps in a row)", flush=True)
        if left > allowed:
            print(f"    no threshold on the grid keeps {stem} to {allowed} wakes ({left} at {t:.3f}): left as it is", flush=True)
            continue
        if args.apply:
            tr["ruleV2Threshold"] = round(t_v2, 4)
            if "validation" in tr:            # its figures are rule v2's threshold's
                tr["ruleV2Validation"] = tr.pop("validation")
            tr["thresholdRule"] = spec["rule"]
            tr["thresholdSetBy"] = f"models/training/prompt_threshold.py {stem} --stream {args.stream}{' --fine' if args.fine else ''} --apply"
            tr["thresholdStream"] = {"stream": spec["name"], "file": os.path.basename(wav), "hours": round(hours, 3),
                                     "allowedWakes": allowed, "wakes": left}
            man["threshold"], man["training"] = round(t, 4), tr
            with open(path, "w") as f:
                json.dump(man, f, indent=2)
                f.write("\n")
            print(f"    wrote {path}: threshold {t:.3f}", flush=True)


if __name__ == "__main__":
    main()
