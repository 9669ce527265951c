"""False wakes on recorded human speech from Debian packages (issue 22, item 3): the shipped heads
over the voice prompts of `asterisk-core-sounds-{en,es,fr,it,ru}-wav` (four professional speakers,
five languages, 2.4 h joined, 8 kHz, CC-BY-SA). A prompt whose transcript (the package's
core-sounds-LANG.txt) holds a trigger word or "stop" is left out (Italian's echo-test prompt says
"computer"); every other detection is a false wake. Training never used them, but for heads trained
with `train_head.py --prompt-negatives` (claude since stop 49, openclaw since stop 50), which learned from the training half.
Other languages than English are speech the node will hear in many homes, and the heads must not
wake on it either; the table keeps English apart.

    make wake-eval-real-negatives      (installs the packages, builds, runs this with --report), or:
    apt-get install asterisk-core-sounds-{en,es,fr,it,ru}{,-wav}    (about 100 MB, the transcripts in the first; make test does not need them)
    swift build -c release --product clawvoice
    python3 models/training/real_negatives.py [--bin .build/release/clawvoice] [--models models]
        [--sets en,es,fr,it,ru] [--half all|eval] [--out DIR] [--sensitivity 0.5] [--stop-sensitivity 0.7]
        [--report models/EVALUATION.md]

--half eval scores only the prompts training never draws from (prompts.py's evaluation half), for
heads trained with `train_head.py --prompt-negatives`.

Each set's prompts are joined in name order with 300 ms of silence between them into one WAV (the
stream the detector sees, as it would hear a voice menu), and `clawvoice wake detect` runs over
it once with every default trigger at the node's sensitivity and once with the stop word at its own.
Standard library only.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import wave

import prompts
from prompts import SETS

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TRIGGERS = ["openclaw", "claude", "computer"]
HEADING = "## Real negatives: recorded voice prompts"


def join_prompts(files, out, gap_ms=300):
    """Writes the prompts [(name, path)] one after another (8 kHz mono 16-bit); returns (spans,
    seconds, skipped), spans: (start s, end s, name) of each prompt in the stream."""
    gap = b"\x00\x00" * (prompts.RATE * gap_ms // 1000)
    spans, frames, skipped = [], 0, []
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(prompts.RATE)
        for name, path in files:
            data = prompts.read(path)
            if data is None:
                skipped.append(name)
                continue
            w.writeframes(data + gap)
            spans.append((frames / prompts.RATE, (frames + len(data) // 2) / prompts.RATE, name))
            frames += len(data) // 2 + len(gap) // 2
    return spans, frames / prompts.RATE, skipped


def prompt_at(spans, s):
    """The prompt being said at s seconds, or heard last before it (a wake lands at a word's end)."""
    last = "?"
    for a, _, name in spans:
        if a > s:
            break
        last = name
    return last


def detect(args, wav, triggers, sensitivity, extra=()):
    cmd = [args.bin, "wake", "detect", "--input", wav, "--phrases", ",".join(triggers),
           "--models", args.models, "--sensitivity", str(sensitivity), *extra]
    with tempfile.TemporaryDirectory() as state:  # the heads alone: no household enrollment (`wake enroll`) applies
        run = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, CLAWVOICE_STATE_DIR=state))
    if run.returncode != 0:
        sys.exit(f"real_negatives: {' '.join(cmd)} failed ({run.returncode}): {run.stderr.strip()}")
    return [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]


def splice(path, section, heading=HEADING):
    """Replaces (or appends) a script's section of a report, leaving the rest as it is."""
    lines = open(path).read().rstrip("\n").split("\n") if os.path.exists(path) else []
    start = next((i for i, l in enumerate(lines) if l.startswith(heading)), None)
    if start is None:
        lines += [""] + section
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        lines = lines[:start] + section + ([""] if end < len(lines) else []) + lines[end:]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def where(found, heads, what):
    """The "Where" list of a real-negatives section: per head, its detections (place, s, clip, score)."""
    out = ["", f"Where ({what}, score):", ""]
    for h in heads:
        at = [f"{k} {t:.1f} ({p}, {sc:.2f})" for k, t, p, sc in found[h]]
        out.append(f"- {h}: {', '.join(at) if at else 'none'}")
    return out


def publish(args, section, who, heading=HEADING):
    """Prints the section, and splices it into --report when given."""
    print("\n".join(section))
    if args.report:
        splice(args.report, section, heading)
        print(f"{who}: wrote the section into {args.report}")


def common_args(ap, who, out, report_half="all", stop=True):
    """The options real_negatives.py, stamp_negatives.py and game_negatives.py share, parsed and
    checked; report_half: the half a --report section is made of (and --half's default); stop:
    whether the script scores the stop word."""
    ap.add_argument("--bin", default=os.path.join(ROOT, ".build", "release", "clawvoice"))
    ap.add_argument("--models", default=os.path.join(ROOT, "models"))
    ap.add_argument("--half", default=report_half, choices=["all", "eval"], help="eval: only the half training never draws from")
    ap.add_argument("--out", default=out, help="directory for the joined streams")
    ap.add_argument("--sensitivity", type=float, default=0.5, help="the wake heads' (the node's default: 0.5)")
    if stop:
        ap.add_argument("--stop-sensitivity", type=float, default=0.7, help="the stop word's (talk.stopWordSensitivity: 0.7)")
    ap.add_argument("--report", help="also write the section into this report (models/EVALUATION.md)")
    args = ap.parse_args()
    if not os.access(args.bin, os.X_OK):
        sys.exit(f"{who}: {args.bin} not found; build it with: swift build -c release --product clawvoice")
    if args.report and args.half != report_half:
        sys.exit(f"{who}: --report writes the --half {report_half} section; add --half {report_half} or drop --report")
    return args


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default=",".join(SETS), help=f"which prompt sets ({', '.join(SETS)})")
    args = common_args(ap, "real_negatives", "/tmp/clawvoice-asterisk-prompts")
    keys = [k.strip() for k in args.sets.split(",") if k.strip()]
    unknown = [k for k in keys if k not in SETS]
    if unknown or not keys:
        sys.exit(f"real_negatives: --sets takes some of {', '.join(SETS)}; got {args.sets!r}")
    os.makedirs(args.out, exist_ok=True)
    heads = TRIGGERS + ["stop"]
    found = {h: [] for h in heads}            # (set, s into its stream, prompt, score)
    per_set = {}                               # key -> (prompts, seconds, left out, {head: count})
    for key in keys:
        label = SETS[key][0]
        files, leave_out = prompts.prompts(key, args.half)
        wav = os.path.join(args.out, f"{key}{'' if args.half == 'all' else '-' + args.half}.wav")
        spans, seconds, skipped = join_prompts(files, wav)
        print(f"real_negatives: {label}: {len(spans)} prompts, {seconds / 60:.1f} min of stream ({wav})"
              + (f"; left out (the transcript says a trigger): {', '.join(sorted(leave_out))}" if leave_out else "")
              + (f"; skipped {len(skipped)} not 8 kHz mono 16-bit: {', '.join(skipped[:5])}" if skipped else ""), flush=True)
        wakes = detect(args, wav, TRIGGERS, args.sensitivity)  # the three heads loaded together, as the node runs them
        wakes += detect(args, wav, ["stop"], args.stop_sensitivity)
        counts = {h: 0 for h in heads}
        for d in wakes:
            counts[d["phrase"]] += 1
            found[d["phrase"]].append((key, d["ms"] / 1000, prompt_at(spans, d["ms"] / 1000), d["score"]))
        per_set[key] = (len(spans), seconds, sorted(leave_out), counts)
    hours = sum(v[1] for v in per_set.values()) / 3600
    en_hours = per_set["en"][1] / 3600 if "en" in per_set else 0
    n_prompts = sum(v[0] for v in per_set.values())
    sets_line = "; ".join(f"{SETS[k][0]}: {v[0]} prompts, {v[1] / 60:.1f} min" for k, v in per_set.items())
    left = [f"{k}/{n}" for k, v in per_set.items() for n in v[2]]
    section = [HEADING, "",
               f"The shipped heads over recorded human speech: {n_prompts} voice prompts of "
               "Debian's `asterisk-core-sounds-LANG-wav` packages, four professional speakers in five languages "
               f"({sets_line}; 8 kHz), each set joined with 300 ms gaps, through the release Swift detector. "
               "Training never heard them, except a head trained with `--prompt-negatives` (claude since stop 49, openclaw since stop 50): it "
               "learned from crops of the training half, and `real_negatives.py --half eval` scores the other half alone. "
               + (f"Left out because the package's transcript says a trigger word or \"stop\": {', '.join(left)}. " if left else "")
               + "Every other detection is a false wake (for the stop word: a reply cut short by someone talking while the "
               f"node speaks). Read speech, menus and numbers from {len({SETS[k][0].split(', ')[1] for k in per_set})} "
               f"speakers: {hours:.2f} h is a real-voice check beside the flite streams, not a household. Regenerate with:", "",
               "```", "make wake-eval-real-negatives", "```", "",
               "(= `apt-get install` the five packages, `swift build -c release --product clawvoice` and "
               "`python3 models/training/real_negatives.py --report models/EVALUATION.md`; `make wake-eval` runs it last.)", "",
               "| head | sensitivity | " + " | ".join(SETS[k][0] for k in per_set)
               + f" | false wakes in {hours:.2f} h | per hour, all | per hour, English |",
               "|---|---|" + "---|" * len(per_set) + "---|---|---|"]
    for h in heads:
        sens = args.stop_sensitivity if h == "stop" else args.sensitivity
        n = len(found[h])
        en = per_set["en"][3][h] if "en" in per_set else 0
        section.append(f"| {h} | {sens} | " + " | ".join(str(v[3][h]) for v in per_set.values())
                       + f" | {n} | **{n / hours:.2f}** | " + (f"{en / en_hours:.2f}" if en_hours else "-") + " |")
    section += where(found, heads, "set, seconds into its stream, prompt")
    publish(args, section, "real_negatives")


if __name__ == "__main__":
    main()
