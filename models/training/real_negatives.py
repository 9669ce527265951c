"""False wakes on recorded human speech from a Debian package (issue 22, item 3): the shipped
heads over the 568 voice prompts of `asterisk-core-sounds-en-wav` (one professional speaker,
Allison, 8 kHz, CC-BY-SA; no prompt holds a trigger word, by the package's own transcript list).
Training never used them, so they are held out; one speaker and 25 minutes of speech cannot resolve
0.5 false wakes per hour, so this is a real-voice check beside the flite streams, not a bar.

    make wake-eval-real-negatives      (installs the package, builds, runs this with --report), or:
    apt-get install asterisk-core-sounds-en-wav      (18 MB; make test does not need it)
    swift build -c release --product clawvoice
    python3 models/training/real_negatives.py [--bin .build/release/clawvoice] [--models models]
        [--sounds DIR] [--out FILE.wav] [--sensitivity 0.5] [--stop-sensitivity 0.7] [--report models/EVALUATION.md]

The prompts are joined in name order with 300 ms of silence between them into one WAV (the
stream the detector sees, as it would hear a voice menu), and `clawvoice wake detect` runs over
it once with every default trigger at the node's sensitivity and once with the stop word at its own;
each detection is a false wake. Standard library only.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import wave

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SOUNDS = "/usr/share/asterisk/sounds/en_US_f_Allison"
TRIGGERS = ["openclaw", "claude", "computer"]
HEADING = "## Real negatives: recorded voice prompts"


def join_prompts(sounds, out, gap_ms=300):
    """Writes the prompts (8 kHz mono 16-bit) one after another; returns (spans, seconds, skipped),
    spans: (start s, end s, name) of each prompt in the stream."""
    files = sorted(glob.glob(os.path.join(sounds, "**", "*.wav"), recursive=True))
    if not files:
        sys.exit(f"real_negatives: no prompts under {sounds}; install them with: apt-get install asterisk-core-sounds-en-wav")
    rate = 8000
    gap = b"\x00\x00" * (rate * gap_ms // 1000)
    spans, frames, skipped = [], 0, []
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        for f in files:
            with wave.open(f, "rb") as r:
                if (r.getnchannels(), r.getsampwidth(), r.getframerate()) != (1, 2, rate):
                    skipped.append(os.path.relpath(f, sounds))
                    continue
                data = r.readframes(r.getnframes())
            w.writeframes(data + gap)
            name = os.path.splitext(os.path.relpath(f, sounds))[0]
            spans.append((frames / rate, (frames + len(data) // 2) / rate, name))
            frames += len(data) // 2 + len(gap) // 2
    return spans, frames / rate, skipped


def prompt_at(spans, s):
    """The prompt being said at s seconds, or heard last before it (a wake lands at a word's end)."""
    last = "?"
    for a, _, name in spans:
        if a > s:
            break
        last = name
    return last


def detect(args, wav, triggers, sensitivity):
    cmd = [args.bin, "wake", "detect", "--input", wav, "--phrases", ",".join(triggers),
           "--models", args.models, "--sensitivity", str(sensitivity)]
    with tempfile.TemporaryDirectory() as state:  # the heads alone: no household enrollment (`wake enroll`) applies
        run = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, CLAWVOICE_STATE_DIR=state))
    if run.returncode != 0:
        sys.exit(f"real_negatives: {' '.join(cmd)} failed ({run.returncode}): {run.stderr.strip()}")
    return [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]


def splice(path, section):
    """Replaces (or appends) this script's section of a report, leaving the rest as it is."""
    lines = open(path).read().rstrip("\n").split("\n") if os.path.exists(path) else []
    start = next((i for i, l in enumerate(lines) if l.startswith(HEADING)), None)
    if start is None:
        lines += [""] + section
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        lines = lines[:start] + section + ([""] if end < len(lines) else []) + lines[end:]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, ".build", "release", "clawvoice"))
    ap.add_argument("--models", default=os.path.join(ROOT, "models"))
    ap.add_argument("--sounds", default=SOUNDS)
    ap.add_argument("--out", default="/tmp/clawvoice-asterisk-prompts.wav")
    ap.add_argument("--sensitivity", type=float, default=0.5, help="the wake heads' (the node's default: 0.5)")
    ap.add_argument("--stop-sensitivity", type=float, default=0.7, help="the stop word's (talk.stopWordSensitivity: 0.7)")
    ap.add_argument("--report", help="also write the section into this report (models/EVALUATION.md)")
    args = ap.parse_args()
    if not os.access(args.bin, os.X_OK):
        sys.exit(f"real_negatives: {args.bin} not found; build it with: swift build -c release --product clawvoice")
    spans, seconds, skipped = join_prompts(args.sounds, args.out)
    print(f"real_negatives: {len(spans)} prompts, {seconds / 60:.1f} min of stream ({args.out})"
          + (f"; skipped {len(skipped)} not 8 kHz mono 16-bit: {', '.join(skipped[:5])}" if skipped else ""), flush=True)
    wakes = detect(args, args.out, TRIGGERS, args.sensitivity)  # the three heads loaded together, as the node runs them
    rows = [(t, args.sensitivity, wakes) for t in TRIGGERS]
    rows.append(("stop", args.stop_sensitivity, detect(args, args.out, ["stop"], args.stop_sensitivity)))
    hours = seconds / 3600
    section = [HEADING, "",
               f"The shipped heads over recorded human speech that training never heard: the {len(spans)} voice prompts of "
               "Debian's `asterisk-core-sounds-en-wav` (one professional speaker, Allison, 8 kHz; no prompt holds a "
               f"trigger word), joined with 300 ms gaps into {seconds / 60:.1f} min, through the release Swift detector. "
               "Every detection is a false wake (for the stop word: a reply cut short by someone talking while the node "
               "speaks). One speaker and half an hour cannot resolve 0.5 per hour; it is a real-voice check beside the "
               "flite streams. Regenerate with:", "",
               "```", "make wake-eval-real-negatives", "```", "",
               "(= `apt-get install asterisk-core-sounds-en-wav`, `swift build -c release --product clawvoice` and "
               "`python3 models/training/real_negatives.py --report models/EVALUATION.md`; `make wake-eval` runs it last.)", "",
               f"| head | sensitivity | false wakes in {seconds / 60:.1f} min | per hour | where: s into the stream (prompt, score) |",
               "|---|---|---|---|---|"]
    for t, sens, found in rows:
        at = [f"{d['ms'] / 1000:.1f} ({prompt_at(spans, d['ms'] / 1000)}, {d['score']:.2f})" for d in found if d["phrase"] == t]
        section.append(f"| {t} | {sens} | {len(at)} | **{len(at) / hours:.2f}** | {', '.join(at) or '-'} |")
    print("\n".join(section))
    if args.report:
        splice(args.report, section)
        print(f"real_negatives: wrote the section into {args.report}")


if __name__ == "__main__":
    main()
