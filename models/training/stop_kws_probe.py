"""A probe, not a candidate (issue 22, item 6; it chooses nothing): PocketSphinx's keyword spotter
for "stop" on stop_speech.py's set (flite's "stop"s over the node's espeak-ng speech, and 0.51 h of
that speech alone), scored as stop_speech.py scores the head (a detection from 0.5 s before to 1 s
after the word's end; the detector's 2 s refractory). Its en-us acoustic model learned from many
real speakers, which the heads never had; the question is whether it hears the "stop"s the head misses, and at what cost.

    .venv/bin/python stop_kws_probe.py [--exponents 20,10,2]     (kws_threshold 1e-20, 1e-10, 1e-2)

Needs stop_speech.py's set (eval-stop-speech/, built by its first run) and the pocketsphinx wheel
(`.venv/bin/pip install pocketsphinx==5.1.1`, as verifier_probe.py). About 1.5 min per threshold.
"""
import argparse
import json
import os
import sys
import wave

import stop_speech

HERE = os.path.dirname(os.path.abspath(__file__))
STEP = 1600                 # 100 ms of 16 kHz audio per call: a detection is timed at its chunk's end
REFRACTORY_MS = 2000        # the detector's: nothing counts within 2 s of the last detection kept


def spot(raw, exponent):
    """Detections [{"phrase", "ms"}] of "stop" in 16-bit mono PCM, with the detector's 2 s refractory."""
    from pocketsphinx import Decoder
    d = Decoder(keyphrase="stop", kws_threshold=10.0 ** (-exponent), loglevel="FATAL")
    d.start_utt()
    out, last = [], -10 ** 9
    for i in range(0, len(raw), 2 * STEP):
        d.process_raw(raw[i:i + 2 * STEP], False, False)
        if d.hyp() is not None:
            ms = (i + 2 * STEP) // 32
            if ms - last >= REFRACTORY_MS:
                out.append({"phrase": "stop", "ms": ms})
                last = ms
            d.end_utt()
            d.start_utt()
    d.end_utt()
    return out


def read(path):
    with wave.open(path) as w:
        return w.readframes(w.getnframes())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", default=os.path.join(HERE, "eval-stop-speech"))
    ap.add_argument("--exponents", default="20,10,2", help="kws_threshold = 1e-N for each N")
    args = ap.parse_args()
    try:
        import pocketsphinx  # noqa: F401
    except ImportError:
        sys.exit("stop_kws_probe.py: needs the pocketsphinx wheel: .venv/bin/pip install pocketsphinx==5.1.1")
    meta_path = os.path.join(args.set, "meta.json")
    if not os.path.exists(meta_path):
        sys.exit(f"stop_kws_probe.py: no set in {args.set}; build it with: .venv/bin/python stop_speech.py")
    meta = json.load(open(meta_path))
    pos, neg = read(os.path.join(args.set, "over-speech.wav")), read(os.path.join(args.set, "node-speech.wav"))
    hours = meta["node-speech"]["seconds"] / 3600
    for e in [float(x) for x in args.exponents.split(",")]:
        r = stop_speech.score(meta, spot(pos, e))
        false = len(spot(neg, e))
        voice = ", ".join(f"{v} {stop_speech.pct(*c)}" for v, c in sorted(r["by"]["voice"].items()))
        ratio = ", ".join(f"{k} {stop_speech.pct(*c)}" for k, c in sorted(r["by"]["ratio"].items(), key=lambda kv: int(kv[0].split()[0])))
        print(f"kws_threshold 1e-{e:g}: missed {stop_speech.pct(r['missed'], r['events'])} ({voice}; {ratio}); "
              f"false stops {false / hours:.2f} per hour of node speech ({false} in {hours:.2f} h)", flush=True)


if __name__ == "__main__":
    main()
