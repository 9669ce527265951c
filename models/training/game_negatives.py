"""False wakes on recorded English speech (issue 22, item 3): the shipped heads over the voice acting
of Flight of the Amazon Queen (game_speech.py: `flight-of-the-amazon-queen`, about 6,700 lines by
the game's cast, 11 kHz MP3, about 5 h). The stamps and the voice prompts are mostly other
languages and read speech; this is English said as people say it to each other (acted), and the
first hours of it here. The claude heads shipped since stop 51 learned from crops of the training
half (`train_head.py --game-negatives`, candidate recipe v20), so --half eval, the other half, is
what the report holds; --half all scores every line.

    make wake-eval-game-speech      (installs the package, builds, runs this with --report), or:
    apt-get install flight-of-the-amazon-queen ffmpeg     (about 35 MB; make test does not need it)
    swift build -c release --product clawvoice
    python3 models/training/game_negatives.py [--bin .build/release/clawvoice] [--models models]
        [--half eval|all] [--out DIR] [--sensitivity 0.5] [--report models/EVALUATION.md]
    (--half eval, the default, is the half no head trained on and the one --report writes.)

The lines are joined in name order with 300 ms of silence between them into streams of up to 600
lines each (16 kHz WAVs, kept in --out and reused; decoding takes a few minutes the first time),
and `clawvoice wake detect` runs over each with every default trigger at the node's sensitivity.
The game's text never says a trigger (checked on every run), so every detection is a false wake.
34 of its text lines say "stop" (three of them "stopped"), and which spoken line does is not known
here, so the stop word is not scored.
Standard library and ffmpeg.
"""
import argparse
import os
import sys

import game_speech
from real_negatives import TRIGGERS, common_args, detect, prompt_at, publish, where
from stamp_negatives import joined

HEADING = "## Real negatives: a game's voice acting (English)"
PER_STREAM = 600


def streams(lines, out, prefix, read, decoder, who):
    """The lines [(name, where)] joined into WAVs of up to PER_STREAM lines each (built once in out,
    then reused), one at a time: (stream name, wav, spans, seconds)."""
    for k in range(0, len(lines), PER_STREAM):
        name = f"{prefix}-{k // PER_STREAM + 1:02d}"
        wav = os.path.join(out, name + ".wav")
        spans, seconds = joined(lines[k:k + PER_STREAM], wav, read=read, decoder=decoder)
        print(f"{who}: {name}: {len(spans)} lines, {seconds / 60:.1f} min of stream ({wav})", flush=True)
        yield name, wav, spans, seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args = common_args(ap, "game_negatives", "/tmp/clawvoice-game-speech", report_half="eval", stop=False)
    os.makedirs(args.out, exist_ok=True)
    if game_speech.trigger_in_text():
        sys.exit("game_negatives: the game's text says a trigger, so its lines are not all negatives; "
                 "this script assumes they are (see game_speech.TRIGGER_TEXT)")
    lines = game_speech.negatives(args.half)
    found = {h: [] for h in TRIGGERS}   # (stream, s into it, line, score)
    seconds = 0.0
    for name, wav, spans, s in streams(lines, args.out, args.half, game_speech.read, game_speech.DECODER, "game_negatives"):
        seconds += s
        for d in detect(args, wav, TRIGGERS, args.sensitivity):
            found[d["phrase"]].append((name, d["ms"] / 1000, prompt_at(spans, d["ms"] / 1000), d["score"]))
    hours = seconds / 3600
    which = {"all": "every line", "eval": "the evaluation half of the lines"}[args.half]
    section = [HEADING, "",
               f"The shipped heads over recorded English speech: {which} ({len(lines)}) of the voice acting of *Flight "
               "of the Amazon Queen* (Debian's `flight-of-the-amazon-queen`, the talkie ScummVM released as freeware: a cast of "
               "professional actors, 11 kHz MP3, here at 16 kHz), joined with 300 ms gaps into streams of up to "
               f"{PER_STREAM} lines, through the release Swift detector: **{hours:.2f} h**. Conversation, acted, in the language "
               "the heads are for. The lines fall by name into a training half and an evaluation half (lines, not actors or "
               "scenes: the evaluation half is other lines by the same cast); the claude heads shipped since stop 51 learned "
               "from crops of the training half (`train_head.py --game-negatives`), and no head from the other "
               "(`game_negatives.py --half all` scores both). The game's text never says a trigger, so every detection is "
               "a false wake; 34 of its text lines say \"stop\", and which spoken line does is not known here, so the "
               "stop word is not scored. Regenerate with:", "", "```", "make wake-eval-game-speech", "```", "",
               "(= `apt-get install flight-of-the-amazon-queen ffmpeg`, `swift build -c release --product clawvoice` and "
               f"`python3 models/training/game_negatives.py --half {args.half} --report models/EVALUATION.md`; "
               "the first run decodes the lines, a few minutes.)", "",
               f"| head | sensitivity | false wakes in {hours:.2f} h | per hour |", "|---|---|---|---|"]
    for h in TRIGGERS:
        section.append(f"| {h} | {args.sensitivity} | {len(found[h])} | **{len(found[h]) / hours:.2f}** |")
    section += where(found, TRIGGERS, "stream, seconds into it, line")
    publish(args, section, "game_negatives", HEADING)


if __name__ == "__main__":
    main()
