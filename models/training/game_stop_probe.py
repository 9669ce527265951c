"""A probe, not a candidate (issue 22, item 6; it chooses nothing): where Flight of the Amazon Queen's
actors say "stop" (game_speech.py's lines; its text holds the word in 34 lines, and which spoken line
says it is not known). Real people saying the word would be what the stop head has never had, as
positives for training (the training half) and as a real-speech check (the evaluation half).

Two passes of PocketSphinx (the en-us model, trained on many real speakers): its keyword spotter for
"stop" over every line (kws_threshold 1e-10), then a full decode of each line it flags, kept only
when the decode also has a word starting "stop". Prints each kept line's name, half (0: training,
1: evaluation), the word's time and the decode, then the counts.

    .venv/bin/python game_stop_probe.py        (about 15 min: 11 for the spotter, 4 for the decodes)

Needs the game (apt-get install flight-of-the-amazon-queen), ffmpeg and the pocketsphinx wheel
(`.venv/bin/pip install pocketsphinx==5.1.1`, as verifier_probe.py).
"""
import re
import sys

import game_speech

FRAME_S = 0.01          # PocketSphinx's frames
BATCH = 200             # lines decoded from MP3 at a time


def main():
    try:
        from pocketsphinx import Decoder
    except ImportError:
        sys.exit("game_stop_probe.py: needs the pocketsphinx wheel: .venv/bin/pip install pocketsphinx==5.1.1")
    lines = game_speech.lines()
    spot = Decoder(keyphrase="stop", kws_threshold=1e-10, loglevel="FATAL")
    flagged = []
    for i in range(0, len(lines), BATCH):
        chunk = lines[i:i + BATCH]
        for (name, o, s), raw in zip(chunk, game_speech.read_many([(o, s) for _, o, s in chunk])):
            spot.start_utt()
            spot.process_raw(raw, full_utt=True)
            spot.end_utt()
            if spot.seg():
                flagged.append((name, (o, s)))
        print(f"  spotter: {i + len(chunk)}/{len(lines)} lines, {len(flagged)} flagged", file=sys.stderr, flush=True)
    full = Decoder(loglevel="FATAL")
    kept = []
    for (name, where), raw in zip(flagged, game_speech.read_many([w for _, w in flagged])):
        full.start_utt()
        full.process_raw(raw, full_utt=True)
        full.end_utt()
        words = [s for s in (full.seg() or []) if re.match(r"stop", s.word)]
        if words:
            w = words[0]
            kept.append(name)
            print(f"{name}  half {game_speech.half(name)}  {w.word} {w.start_frame * FRAME_S:.2f}-"
                  f"{w.end_frame * FRAME_S:.2f} s  | {full.hyp().hypstr}", flush=True)
    halves = [game_speech.half(n) for n in kept]
    print(f"{len(lines)} lines; the spotter flagged {len(flagged)}; the full decode kept {len(kept)} "
          f"({halves.count(0)} in the training half, {halves.count(1)} in the evaluation half)")


if __name__ == "__main__":
    main()
