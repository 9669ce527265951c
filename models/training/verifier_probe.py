"""Would a second stage trained on real speech rescue the heads on unseen voices? A probe, not
part of any recipe: it trains and chooses nothing.

The heads fire at a low threshold (2 steps in a row), and each candidate wake is checked by
PocketSphinx's keyword spotter (its en-us acoustic model was trained on many real speakers; the
`pocketsphinx` wheel ships it). The verifier's score for a candidate is the strictest KWS
threshold, 1e-E for E on a grid of 3, at which it still finds the trigger in the 2.2 s before
and around the wake (lower E is stricter). The table shows, for every verifier cut, what would be
left on `make wake-eval`'s flite set: missed wakes, false wakes per hour, near-miss wakes. Reading
it is an upper bound: the cut here is picked after seeing the held-out figures, which a shipped
verifier could not do.

    .venv/bin/pip install pocketsphinx==5.1.1       # the probe's one extra wheel (model inside)
    .venv/bin/python verifier_probe.py [--low 0.5] [--eval-dir eval-flite]

Needs `make wake-eval` to have built the held-out set, and a release build.
"""
import argparse
import json
import os
import sys
import wave

import numpy as np

import evaluate as ev

HERE = os.path.dirname(os.path.abspath(__file__))
KEYPHRASE = {"openclaw": "open claw", "claude": "claude", "computer": "computer"}
EXPONENTS = list(range(-60, 61, 3))
CUTS = [None, 30, 21, 15, 9, 3, 0, -3, -9, -15, -21, -27]


class Spotter:
    """PocketSphinx KWS, one decoder per (keyphrase, threshold)."""

    def __init__(self):
        try:
            from pocketsphinx import Decoder
        except ImportError:
            sys.exit("verifier_probe.py: needs the pocketsphinx wheel: .venv/bin/pip install pocketsphinx==5.1.1")
        self.Decoder, self.decoders = Decoder, {}

    def finds(self, phrase, e, x):
        d = self.decoders.get((phrase, e))
        if d is None:
            d = self.decoders[(phrase, e)] = self.Decoder(keyphrase=phrase, kws_threshold=10.0 ** (-e), loglevel="FATAL")
        d.start_utt()
        d.process_raw(x.tobytes(), full_utt=True)
        d.end_utt()
        return d.hyp() is not None

    def score(self, phrase, x):
        """The smallest exponent on the grid at which the phrase is found (99: not at all);
        detection is monotone in the threshold, so a bisection."""
        lo, hi = 0, len(EXPONENTS) - 1
        if not self.finds(phrase, EXPONENTS[hi], x):
            return 99
        while lo < hi:
            mid = (lo + hi) // 2
            if self.finds(phrase, EXPONENTS[mid], x):
                hi = mid
            else:
                lo = mid + 1
        return EXPONENTS[lo]


def read_wav(path):
    with wave.open(path) as w:
        return np.frombuffer(w.readframes(w.getnframes()), np.int16)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--low", type=float, default=0.5, help="the heads' threshold before the verifier")
    ap.add_argument("--eval-dir", default=os.path.join(HERE, "eval-flite"))
    ap.add_argument("--clawvoice", default=os.path.join(ev.REPO, ".build", "release", "clawvoice"))
    args = ap.parse_args()
    meta_path = os.path.join(args.eval_dir, "meta.json")
    if not os.path.exists(meta_path):
        sys.exit(f"verifier_probe.py: no held-out set in {args.eval_dir}; run make wake-eval first")
    meta = json.load(open(meta_path))
    spotter = Spotter()
    names = [f"positives-{t}" for t in ev.TRIGGERS] + ["negatives", "near-misses"]
    steps, audio = {}, {}
    for name in names:
        wav = os.path.join(args.eval_dir, name + ".wav")
        lines, _ = ev.detect(args.clawvoice, wav, ["--scores"])
        steps[name], audio[name] = [l for l in lines if "scores" in l], read_wav(wav)
        ev.log(f"{name}: {len(steps[name])} steps")
    pad = np.zeros(3200, np.int16)
    print(f"\nheads at {args.low} (2 steps in a row), then the KWS cut: missed / false wakes per hour / near-miss wakes\n")
    print("| KWS cut | " + " | ".join(ev.TRIGGERS) + " |")
    print("|---|" + "---|" * len(ev.TRIGGERS))
    cells = {}
    for t in ev.TRIGGERS:
        cands = {n: ev.replay(steps[n], {t: args.low}, consecutive={t: 2}) for n in names}
        for n, ds in cands.items():
            for d in ds:
                a = audio[n][max(0, (d["ms"] - 1800) * 16):(d["ms"] + 400) * 16]
                d["kws"] = spotter.score(KEYPHRASE[t], np.concatenate([pad, a, pad]))
        ev.log(f"{t}: {sum(map(len, cands.values()))} candidates verified")
        for cut in CUTS:
            kept = {n: [d for d in ds if cut is None or d["kws"] <= cut] for n, ds in cands.items()}
            sm = ev.summarize(meta, kept)
            r = sm["triggers"][t]
            near = sum(1 for p, _ in sm["nearWakes"] if p == t)
            cells[(t, cut)] = f"{ev.pct(r['missed'], r['events'])} / {sm['falseWakes'][t] / sm['negHours']:.2f} / {near}"
    for cut in CUTS:
        print(f"| {'none' if cut is None else f'1e{-cut:+d}'} | " + " | ".join(cells[(t, cut)] for t in ev.TRIGGERS) + " |")


if __name__ == "__main__":
    main()
