"""A probe, not a rule (issue 22; it chooses nothing): where would a threshold set on real speech land
for heads whose rule-v2 threshold moved with the seed (the mined heads of RULE-V35 to V37)?

For each head: rule v2's threshold (its manifest), the threshold its canvas limits alone allow
(rule v2 without the 2-hour stream: near misses, other triggers and cut-short canvases <= 3 %, plain
speech and noise <= 0.5 %, on its saved validation scores), and the lowest threshold at or above that
with at most --allowed wakes over Beneath a Steel Sky's voice acting (sky_speech.py: a cast no head
trained on, mined or was decided on; sky_probe.py joins the streams). The head alone through the
release detector, 2 steps in a row, 2 s refractory.

    swift build -c release --product clawvoice
    python3 models/training/sky_probe.py            # joins the streams once, into /tmp/clawvoice-sky-speech
    .venv/bin/python sky_threshold_probe.py STEM:DIR:VALSCORES.npz [...]      (in models/training)

computer is refused: the game's text is not read, and it may say the word.
"""
import argparse
import glob
import json
import os
import sys
import wave

import numpy as np

import prompt_threshold
from head import detections
from threshold import THRESHOLD_GRID, Validation, rule_checks

HERE = os.path.dirname(os.path.abspath(__file__))


def canvas_threshold(v, k):
    """The lowest grid threshold meeting rule v2's canvas limits, the stream left out."""
    checks = rule_checks(v, "v2", k)
    return next((float(t) for t in THRESHOLD_GRID if checks["speech"](t) and checks["near"](t)), 0.999)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("heads", nargs="+", help="STEM:DIR:VALSCORES (a head's directory and its saved validation scores)")
    ap.add_argument("--streams", default="/tmp/clawvoice-sky-speech", help="sky_probe.py's joined streams")
    ap.add_argument("--bin", default=os.path.join(HERE, "..", "..", ".build", "release", "clawvoice"))
    ap.add_argument("--allowed", type=int, default=1, help="wakes allowed over the streams (1 in 2.22 h: 0.45 per hour)")
    args = ap.parse_args()
    wavs = sorted(glob.glob(os.path.join(args.streams, "sky-*.wav")))
    if not wavs:
        sys.exit(f"sky_threshold_probe.py: no streams in {args.streams}; run python3 models/training/sky_probe.py first")
    hours = 0.0
    for w in wavs:
        with wave.open(w) as r:
            hours += r.getnframes() / r.getframerate() / 3600
    print(f"{len(wavs)} streams, {hours:.2f} h; at most {args.allowed} wakes allowed", flush=True)
    print("| head | rule v2 | canvas limits alone | + at most {} sky wakes | sky wakes at rule v2 |".format(args.allowed))
    print("|---|---|---|---|---|")
    for spec in args.heads:
        stem, d, vpath = spec.split(":")
        if stem == "computer":
            sys.exit("sky_threshold_probe.py: computer is not scored (the game's text is not read)")
        man = json.load(open(os.path.join(d, f"{stem}.json")))
        k = int(man.get("consecutiveSteps", 2))
        s = [prompt_threshold.scores(args.bin, w, d, man["phrase"]) for w in wavs]
        wakes = lambda t: sum(detections(x, t, k=k) for x in s)
        t_c = canvas_threshold(Validation(dict(np.load(vpath))), k)
        t_sky = next((float(t) for t in THRESHOLD_GRID if t >= t_c - 1e-9 and wakes(t) <= args.allowed), 0.999)
        print(f"| {stem} {d} | {man['threshold']:.2f} | {t_c:.2f} | **{t_sky:.2f}** ({wakes(t_sky)}) | {wakes(man['threshold'])} |",
              flush=True)


if __name__ == "__main__":
    main()
