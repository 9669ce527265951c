"""A probe, not a candidate (issue 22, item 6; it chooses nothing): how the shipped stop head scores
"stop" said alone, in silence, by each voice it trained on (espeak-ng, Piper, Pico), by RHVoice (one
stop candidate's voices, not the shipped head's) and by the two held-out flite voices. The
head misses every "stop" of flite's rms over the node's speech (EVALUATION-stop.md); this asks whether
that is the noise or the voice: it prints each voice's best score (the detector's `--scores`, the max
over the clip) for N renderings with that voice's own speaker draws, and how many of them the detector
wakes on at the node's sensitivity (talk.stopWordSensitivity 0.7: its own threshold and steps in a row).

    .venv/bin/python stop_voices_probe.py [--models DIR] [-n 6]     (after swift build -c release)

Training engines as training draws them (voices.py, RHVoice when its wheels and engine are there);
flite awb / rms once at its own default speaker and then as evaluate.py draws held-out speakers. Each
voice draws from its own generator (the seed and the voice's name), so leaving one out moves no other;
Piper also draws noise of its own, so its row differs a little from run to run.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zlib

import numpy as np

import eval_set
import voices

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
SR = 16000
SENSITIVITY = 0.7           # the node's talk.stopWordSensitivity


def best_score(binary, models, clip):
    """(best 80 ms score, woke at the node's sensitivity) for a clip with 1 s of silence either side."""
    x = np.concatenate([np.zeros(SR), np.asarray(clip, float), np.zeros(SR)])
    x = x / (np.max(np.abs(x)) + 1e-9) * 16000
    with tempfile.TemporaryDirectory() as tmp:
        wav = os.path.join(tmp, "stop.wav")
        eval_set.write_wav(wav, x)
        r = subprocess.run([binary, "wake", "detect", "--input", wav, "--phrases", "stop", "--models", models,
                            "--sensitivity", f"{SENSITIVITY:g}", "--scores"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"stop_voices_probe.py: {binary} wake detect failed: {r.stderr.strip()}")
    out = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    best = max((o["scores"].get("stop", 0.0) for o in out if "scores" in o), default=0.0)
    return best, any(o.get("phrase") == "stop" for o in out)


def rng_for(seed, name):
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def line(name, results, prefix=""):
    return (f"{name:14s} {prefix}" + " ".join(f"{s:.2f}" for s, _ in results) +
            f"   (over 0.5: {sum(s >= 0.5 for s, _ in results)}; woken at sensitivity {SENSITIVITY:g}: "
            f"{sum(w for _, w in results)} of {len(results)})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=os.path.join(REPO, "models"), help="directory with frontend.json and stop.json")
    ap.add_argument("--bin", default=os.path.join(REPO, ".build", "release", "clawvoice"))
    ap.add_argument("-n", type=int, default=6, help="renderings per voice")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if not os.path.exists(args.bin):
        sys.exit(f"stop_voices_probe.py: no {args.bin}; build it with: swift build -c release")
    if not shutil.which("flite"):
        sys.exit("stop_voices_probe.py: no flite command; install it with: apt-get install flite")
    try:
        engines = voices.engines()
    except ImportError as e:
        sys.exit(f"stop_voices_probe.py: a training voice is not installed in this venv ({e}); "
                 "bash train.sh sets them up")
    try:
        import rhvoice
        engines.append(rhvoice.RHVoiceEngine())
    except (ImportError, OSError, SystemExit) as e:
        print(f"(RHVoice left out: {e})")
    for e in engines:
        rng = rng_for(args.seed, e.name)
        print(line(e.name, [best_score(args.bin, args.models, e.render("stop", rng)) for _ in range(args.n)]))
    flite = eval_set.Flite()
    for voice in eval_set.EVAL_VOICES:
        rng = rng_for(args.seed, "flite-" + voice)
        default, _ = best_score(args.bin, args.models, flite.synth("stop", voice=voice))
        drawn = [best_score(args.bin, args.models, flite.synth("stop", **eval_set.test_speaker(rng, voice)))
                 for _ in range(args.n)]
        print(line(f"flite {voice}", drawn, f"default {default:.2f}; held-out speakers "))


if __name__ == "__main__":
    main()
