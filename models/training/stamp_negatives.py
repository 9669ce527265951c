"""False wakes on more recorded human speech (issue 22, item 3): the shipped heads over Tux Paint's
spoken stamp descriptions (stamps.py: `tuxpaint-stamps-default`, volunteers reading short
sentences in about a dozen languages, 44.1 kHz), and the stop word on the descriptions that say
"stop", the real "stop"s at hand (issue 22, item 6). A head trained with `train_head.py
--stamp-negatives` (claude since stop 49, openclaw since stop 50) learned from crops of the training half: --half eval
scores the other half alone (other sentences by the same volunteers).

    make wake-eval-stamps      (installs the package, builds, runs this with --report), or:
    apt-get install tuxpaint-stamps-default sox     (about 160 MB; make test does not need it)
    swift build -c release --product clawvoice
    python3 models/training/stamp_negatives.py [--bin .build/release/clawvoice] [--models models]
        [--half all|eval] [--out DIR] [--sensitivity 0.5] [--stop-sensitivity 0.7] [--report models/EVALUATION.md]

Each language's descriptions are joined in name order with 300 ms of silence between them into one
16 kHz WAV (kept in --out and reused), and `clawvoice wake detect` runs over it once with every
default trigger at the node's sensitivity and once with the stop word at its own. A description whose
text holds a trigger or "stop", even inside a word, is left out; every other detection is a false
wake. Each description that says "stop" is then scored alone, after and before 1 s of silence.
Standard library and sox.
"""
import argparse
import json
import os
import sys
import wave
from concurrent.futures import ThreadPoolExecutor

import stamps
from real_negatives import TRIGGERS, common_args, detect, prompt_at, publish, where

HEADING = "## Real negatives: spoken stamp descriptions"
GAP_MS = 300


def write_wav(path, data):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(stamps.RATE)
        w.writeframes(data)


def joined(files, wav, read=stamps.read, decoder=stamps.DECODER):
    """The clips [(name, where)] one after another in wav, read(where) giving each one's 16 kHz
    samples (built once, then reused while the names and the decoder are the same; two decoders at
    a time); returns (spans, seconds), spans: (start s, end s, name)."""
    index = wav + ".json"
    if os.path.exists(wav) and os.path.exists(index):
        with open(index) as f:
            z = json.load(f)
        if z["names"] == [n for n, _ in files] and z.get("decoder") == decoder:
            return [tuple(s) for s in z["spans"]], z["seconds"]
    gap = b"\x00\x00" * (stamps.RATE * GAP_MS // 1000)
    spans, parts, frames = [], [], 0
    pool = ThreadPoolExecutor(2)
    try:
        for i, ((name, _), data) in enumerate(zip(files, pool.map(read, [w for _, w in files]))):
            spans.append((frames / stamps.RATE, (frames + len(data) // 2) / stamps.RATE, name))
            parts += [data, gap]
            frames += (len(data) + len(gap)) // 2
            if (i + 1) % 500 == 0:
                print(f"  decoded {i + 1} of {len(files)} clips into {os.path.basename(wav)}", flush=True)
    finally:   # a reader that exits stops the clips not begun, instead of waiting for them all
        pool.shutdown(cancel_futures=True)
    write_wav(wav, b"".join(parts))
    with open(index, "w") as f:
        json.dump({"names": [n for n, _ in files], "decoder": decoder, "spans": spans, "seconds": frames / stamps.RATE}, f)
    return spans, frames / stamps.RATE


def real_stops(args):
    """[(name, text, best stop score, detected)] over each description that says "stop", alone."""
    out = []
    silence = b"\x00\x00" * stamps.RATE
    for name, path, text in stamps.stops():
        wav = os.path.join(args.out, "stop-" + name.replace("/", "-") + ".wav")
        write_wav(wav, silence + stamps.read(path) + silence)
        scores = detect(args, wav, ["stop"], args.stop_sensitivity, extra=["--scores"])
        best = max((d["scores"]["stop"] for d in scores if "scores" in d), default=0.0)
        out.append((name, text, best, any(d.get("phrase") == "stop" for d in scores)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args = common_args(ap, "stamp_negatives", "/tmp/clawvoice-tuxpaint-stamps")
    os.makedirs(args.out, exist_ok=True)
    by_lang, left = stamps.negatives(args.half)
    heads = TRIGGERS + ["stop"]
    found = {h: [] for h in heads}          # (lang, s into its stream, description, score)
    rows = {}                                # lang -> (descriptions, seconds, {head: count})
    for lang in sorted(by_lang, key=lambda k: -len(by_lang[k])):
        wav = os.path.join(args.out, f"{lang}{'' if args.half == 'all' else '-' + args.half}.wav")
        spans, seconds = joined(by_lang[lang], wav)
        print(f"stamp_negatives: {lang}: {len(spans)} descriptions, {seconds / 60:.1f} min of stream ({wav})", flush=True)
        wakes = detect(args, wav, TRIGGERS, args.sensitivity) + detect(args, wav, ["stop"], args.stop_sensitivity)
        counts = {h: 0 for h in heads}
        for d in wakes:
            counts[d["phrase"]] += 1
            found[d["phrase"]].append((lang, d["ms"] / 1000, prompt_at(spans, d["ms"] / 1000), d["score"]))
        rows[lang] = (len(spans), seconds, counts)
    hours = sum(r[1] for r in rows.values()) / 3600
    stops = real_stops(args)
    n_desc = sum(r[0] for r in rows.values())
    section = [HEADING, "",
               f"The shipped heads over more recorded human speech: {n_desc} spoken descriptions "
               "of Tux Paint's stamps (Debian's `tuxpaint-stamps-default`: short sentences read by volunteers, one or a few "
               f"per language, {len(rows)} languages, 44.1 kHz, here at 16 kHz), each language joined with {GAP_MS} ms gaps, "
               f"through the release Swift detector: {hours:.2f} h of stream. Training never heard them, except a head "
               "trained with `--stamp-negatives` (claude since stop 49, openclaw since stop 50): it learned from crops of the training half, and "
               "`stamp_negatives.py --half eval` scores the other half alone. Left out because the text says a trigger or "
               f"\"stop\", inside a word too: {len(left)} descriptions. Every other detection is a false wake. Regenerate with:",
               "", "```", "make wake-eval-stamps", "```", "",
               "(= `apt-get install tuxpaint-stamps-default sox`, `swift build -c release --product clawvoice` and "
               "`python3 models/training/stamp_negatives.py --report models/EVALUATION.md`.)", "",
               "| head | sensitivity | " + " | ".join(rows) + f" | false wakes in {hours:.2f} h | per hour |",
               "|---|---|" + "---|" * len(rows) + "---|---|"]
    for h in heads:
        sens = args.stop_sensitivity if h == "stop" else args.sensitivity
        section.append(f"| {h} | {sens} | " + " | ".join(str(r[2][h]) for r in rows.values())
                       + f" | {len(found[h])} | **{len(found[h]) / hours:.2f}** |")
    section.append("| minutes | | " + " | ".join(f"{r[1] / 60:.1f}" for r in rows.values()) + f" | {hours * 60:.1f} | |")
    section += where(found, heads, "language, seconds into its stream, description")
    heard = sum(1 for s in stops if s[3])
    section += ["", f"**Real \"stop\"s.** The descriptions that say \"stop\" as a word of its own (eight stop signs, a Danish "
                "stoplight), each said by that language's volunteer: the stop "
                f"word at sensitivity {args.stop_sensitivity} alone, the clip between 1 s of silence (not over the node's "
                f"speech): **{heard} of {len(stops)} heard**. Too few to be a rate; the first real recordings of the word here.", "",
                "| description | text | best stop score | heard |", "|---|---|---|---|"]
    section += [f"| {n} | {t} | {b:.2f} | {'yes' if d else 'no'} |" for n, t, b, d in stops]
    publish(args, section, "stamp_negatives", HEADING)


if __name__ == "__main__":
    main()
