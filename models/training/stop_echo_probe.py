"""A probe, not a candidate (issue 22, item 6; it chooses nothing): would the node's own playback
tell the stop head's false stops apart? While it speaks, the node knows what it plays (the echo
canceller's reference), so it could run the stop head on that too and drop a stop heard in the
microphone whenever its own speech scored "stop" nearby. That only helps if the false stops on its
speech are where its speech, as played, sounds like "stop".

Node speech alone, as stop_speech.py makes it (espeak-ng, the training sentences, so nothing here
is held out; its own seed), once through the loudspeaker band and a test room (the microphone) and
once as played (the reference); the release Swift detector's stop scores on both; false stops at
several thresholds, without the gate and with it (a microphone stop dropped when the reference scored
at least V from W1 ms before to W2 ms after it), and the share of the time each gate closes, which a
real "stop" said then would lose.

    .venv/bin/python stop_echo_probe.py [--hours 0.5 --seed 4455 --out /tmp/stop-echo-probe]
"""
import argparse
import json
import os
import subprocess

import numpy as np

import augment
import speech
import stop_speech as ss
from eval_score import replay
from eval_set import write_wav

HERE = os.path.dirname(os.path.abspath(__file__))
SR = 16000
THRESHOLDS = [0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9]
GATES = [(v, w) for v in (0.01, 0.03, 0.1, 0.3) for w in ((400, 400), (1200, 600))]


def build(out, rng, hours):
    node = ss.NodeVoice()
    sentences = [s for s in speech.docstring_sentences("train") if not speech.contains_trigger(s, ["stop"])]
    mic, ref, total = [], [], 0.0
    while total < hours * 3600:
        played, _ = ss.node_played(rng, node, sentences, rng.uniform(20, 40))
        n = len(played)
        heard = ss.echo_path(rng, played)
        heard = heard + augment.coloured_noise(rng, n, 1.0) * np.sqrt(ss.active_power(heard) / 10 ** 3.5)
        mic.append(ss.level(rng, heard))
        ref.append(played)
        total += n / SR
    write_wav(os.path.join(out, "mic.wav"), np.concatenate(mic))
    write_wav(os.path.join(out, "ref.wav"), np.concatenate(ref))
    return total / 3600


def scores(binary, models, wav):
    r = subprocess.run([binary, "wake", "detect", "--input", wav, "--phrases", "stop", "--models", models, "--scores"],
                       capture_output=True, text=True, check=True)
    return [s for s in map(json.loads, (l for l in r.stdout.splitlines() if l.startswith("{"))) if "scores" in s]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clawvoice", default=os.path.join(ss.REPO, ".build", "release", "clawvoice"))
    ap.add_argument("--models", default=os.path.join(ss.REPO, "models"))
    ap.add_argument("--out", default="/tmp/stop-echo-probe")
    ap.add_argument("--seed", type=int, default=4455)
    ap.add_argument("--hours", type=float, default=0.5)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    hours = build(args.out, np.random.default_rng(args.seed), args.hours)
    k = json.load(open(os.path.join(args.models, "stop.json"))).get("consecutiveSteps", 1)
    mic = scores(args.clawvoice, args.models, os.path.join(args.out, "mic.wav"))
    ref = scores(args.clawvoice, args.models, os.path.join(args.out, "ref.wav"))
    ms = np.array([s["ms"] for s in ref])
    r = np.array([s["scores"]["stop"] for s in ref])
    dets = {t: replay(mic, {"stop": t}, refractory_ms=1000, consecutive={"stop": k}) for t in THRESHOLDS}
    print(f"{hours:.2f} h of node speech; false stops per hour at each threshold, without the gate and with it\n")
    print("| gate: reference at least V, from W1 before to W2 after | time the gate is closed | "
          + " | ".join(f"{t:g}" for t in THRESHOLDS) + " |")
    print("|---|---|" + "---|" * len(THRESHOLDS))
    print("| none | 0 % | " + " | ".join(f"{len(dets[t]) / hours:.0f}" for t in THRESHOLDS) + " |")
    for v, (w1, w2) in GATES:
        closed = np.zeros(len(r), bool)
        for j in np.flatnonzero(r >= v):     # a reference step over V closes the gate around it
            closed[np.searchsorted(ms, ms[j] - w2):np.searchsorted(ms, ms[j] + w1, side="right")] = True
        kept = lambda ds: [d for d in ds if not closed[min(np.searchsorted(ms, d["ms"]), len(ms) - 1)]]
        print(f"| V {v:g}, W {w1} / {w2} ms | {closed.mean() * 100:.0f} % | "
              + " | ".join(f"{len(kept(dets[t])) / hours:.0f}" for t in THRESHOLDS) + " |")


if __name__ == "__main__":
    main()
