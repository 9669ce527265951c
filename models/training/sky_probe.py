"""A probe, not a rule (issue 22, item 3; it chooses nothing): false wakes on a second game's English
voice acting (sky_speech.py: Beneath a Steel Sky, a cast no head has heard, about 1.9 h), for the
openclaw and claude heads and for any earlier claude head taken from git, to see whether what a
head learned from Flight of the Amazon Queen's lines (RULE-V34) carries over to other actors.
computer is not scored: the game's text is not read, and a science-fiction game may well say it.

    apt-get install beneath-a-steel-sky sox
    swift build -c release --product clawvoice
    python3 models/training/sky_probe.py [--claude-from 85f9856] [--out DIR]

The lines are joined in file order with 300 ms gaps into streams of up to 600 lines (kept in --out
and reused), and `clawvoice wake detect` runs over each at the node's sensitivity, as
game_negatives.py does.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import sky_speech
from real_negatives import ROOT, detect, prompt_at
from game_negatives import streams


def head_from_git(rev, into):
    """models/ at rev's claude head beside today's front end, in `into`."""
    for name in ("claude.json", "claude.bin"):
        blob = subprocess.run(["git", "-C", ROOT, "show", f"{rev}:models/{name}"], capture_output=True)
        if blob.returncode != 0:
            sys.exit(f"sky_probe: git show {rev}:models/{name} failed: {blob.stderr.decode().strip()}")
        with open(os.path.join(into, name), "wb") as f:
            f.write(blob.stdout)
    for name in ("frontend.json", "frontend.bin"):
        os.symlink(os.path.join(ROOT, "models", name), os.path.join(into, name))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, ".build", "release", "clawvoice"))
    ap.add_argument("--claude-from", default="85f9856", help="a git revision whose claude head is scored beside today's")
    ap.add_argument("--out", default="/tmp/clawvoice-sky-speech")
    ap.add_argument("--sensitivity", type=float, default=0.5)
    args = ap.parse_args()
    if not os.access(args.bin, os.X_OK):
        sys.exit(f"sky_probe: {args.bin} not found; build it with: swift build -c release --product clawvoice")
    os.makedirs(args.out, exist_ok=True)
    lines = sky_speech.lines()
    old = tempfile.mkdtemp(prefix="sky-probe-")
    head_from_git(args.claude_from, old)
    runs = [("openclaw", os.path.join(ROOT, "models"), "openclaw (today's)"),
            ("claude", os.path.join(ROOT, "models"), "claude (today's)"),
            ("claude", old, f"claude at {args.claude_from}")]
    found = {label: [] for _, _, label in runs}
    seconds = 0.0
    for name, wav, spans, s in streams(lines, args.out, "sky", sky_speech.read, ["sky_speech", "sox -D"], "sky_probe"):
        seconds += s
        for phrase, models, label in runs:
            a = argparse.Namespace(bin=args.bin, models=models)
            for d in detect(a, wav, [phrase], args.sensitivity):
                found[label].append((name, d["ms"] / 1000, prompt_at(spans, d["ms"] / 1000), d["score"]))
    hours = seconds / 3600
    print(f"\n{len(lines)} lines of Beneath a Steel Sky, {hours:.2f} h of stream, sensitivity {args.sensitivity}:\n")
    print(f"| head | false wakes in {hours:.2f} h | per hour |\n|---|---|---|")
    for _, _, label in runs:
        print(f"| {label} | {len(found[label])} | {len(found[label]) / hours:.2f} |")
    for _, _, label in runs:
        print(f"- {label}: " + ", ".join(f"{n} {t:.1f} (line {p}, {sc:.2f})" for n, t, p, sc in found[label]))


if __name__ == "__main__":
    main()
