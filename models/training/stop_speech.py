"""The stop word where it listens: "stop" said over the node's own speech, as the echo canceller
leaves it (issue 22, item 6; models/training/RULE-STOP-V2.md). Builds the held-out set once, runs
the release Swift detector (`clawvoice wake detect`, the stop head alone) and writes the section
"## Over the node's speech" of models/EVALUATION-stop.md (evaluate.py keeps it).

    models/training/.venv/bin/python models/training/stop_speech.py [--models DIR --label NAME]

  the user    flite awb / rms only (held out), a new speaker per event, a test room on a third
  the node    held-out docstring sentences by espeak-ng (the node's own synthesiser; its training
              voices at 140-210 wpm), through a loudspeaker band and a test room: the residual
              echo, with the word 5 / 10 / 15 / 20 dB above it
  false stops 0.5 h of that node speech alone (and evaluate.py's flite speech, reported there)
Each --label's figures are kept in eval-stop-speech/result-<label>.json; the section lists them all.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
from scipy.signal import butter, lfilter

import augment
import evaluate
import speech

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
SR = 16000
RATIOS = [5, 10, 15, 20]                  # dB of the word over the residual echo
SENSITIVITIES = [0.7, 0.5]                # the node's default first
SECTION = "## Over the node's speech"
log = evaluate.log


class NodeVoice:
    """The node's speech: espeak-ng, its own synthesiser (the training voices, 140-210 wpm)."""

    def __init__(self):
        self.espeak = speech.Espeak()

    def say(self, rng, text):
        a = self.espeak.synth(text, voice=str(rng.choice(speech.TRAIN_VOICES)), rate=int(rng.uniform(140, 210)))
        return a.astype(float), "espeak-ng"


def echo_path(rng, x):
    """A loudspeaker's band and a test room (augment.test_rir: a room model training never used)."""
    b, a = butter(2, [200 / 8000, 7000 / 8000], "band")
    return augment.reverberate(lfilter(b, a, x), augment.test_rir(rng))[:len(x)]


def node_played(rng, node, sentences, seconds):
    """`seconds` of the node's speech as it plays it (sentences with short pauses), and its engines."""
    parts, engines, n = [], set(), int(seconds * SR)
    while sum(map(len, parts)) < n:
        a, eng = node.say(rng, sentences[rng.integers(len(sentences))])
        parts += [a, np.zeros(int(rng.uniform(0.1, 0.6) * SR))]
        engines.add(eng)
    return np.concatenate(parts)[:n], "+".join(sorted(engines))


def node_stretch(rng, node, sentences, seconds):
    """The same, as the microphone hears it: through echo_path."""
    played, engines = node_played(rng, node, sentences, seconds)
    return echo_path(rng, played), engines


def active_power(x):
    act = np.abs(x) > 1e-3 * (np.max(np.abs(x)) + 1e-9)
    return float(np.mean(x[act] ** 2)) if act.any() else 1e-9


def level(rng, x):
    return x / (np.max(np.abs(x)) + 1e-9) * 32767 * 10 ** (rng.uniform(-20, -4) / 20)


def build(out, rng, events, hours):
    flite, node = evaluate.Flite(), NodeVoice()
    sentences = [s for s in speech.docstring_sentences("test") if not speech.contains_trigger(s, ["stop"])]
    log(f"{len(sentences)} held-out sentences; the user: flite {evaluate.EVAL_VOICES}; the node: espeak-ng")
    parts, ends, infos, t = [], [], [], 0
    for k in range(events):
        bg, eng = node_stretch(rng, node, sentences, rng.uniform(6, 9))
        spk = evaluate.test_speaker(rng)
        clip = flite.synth(str(rng.choice(speech.trigger_spellings("stop"))), **spk).astype(float)
        _, e = speech.speech_bounds(clip.astype(np.int16))
        end = int(rng.uniform(2, 4) * SR)
        room = rng.random() < 1 / 3
        w = augment.reverberate(clip, augment.test_rir(rng))[:len(clip) + SR // 2] if room else clip
        word = np.zeros(len(bg))
        a = end - e
        word[a:a + len(w)] = w[:len(bg) - a]
        ratio = RATIOS[k % len(RATIOS)]
        p_w = active_power(clip)
        x = word + bg * np.sqrt(p_w / (active_power(bg) * 10 ** (ratio / 10)))
        x = x + augment.coloured_noise(rng, len(x), 1.0) * np.sqrt(p_w / 10 ** 3.5)
        parts.append(level(rng, x))
        ends.append(int((t + end) * 1000 / SR))
        infos.append(dict(spk, ratio=f"{ratio} dB", node=eng, room=bool(room)))
        t += len(x)
        if (k + 1) % 50 == 0:
            log(f"  events: {k + 1}/{events}")
    dur = evaluate.write_wav(os.path.join(out, "over-speech.wav"), np.concatenate(parts))
    meta = {"over-speech": {"ends_ms": ends, "events": infos, "seconds": dur}}
    log(f"over-speech.wav: {events} events, {dur / 60:.1f} min")
    parts, total = [], 0.0
    while total < hours * 3600:
        bg, _ = node_stretch(rng, node, sentences, rng.uniform(20, 40))
        bg = bg + augment.coloured_noise(rng, len(bg), 1.0) * np.sqrt(active_power(bg) / 10 ** 3.5)
        parts.append(level(rng, bg))
        total += len(bg) / SR
        if len(parts) % 20 == 0:
            log(f"  node speech: {total / 60:.0f} min")
    dur = evaluate.write_wav(os.path.join(out, "node-speech.wav"), np.concatenate(parts))
    meta["node-speech"] = {"seconds": dur}
    log(f"node-speech.wav: {dur / 60:.1f} min")
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f)
    return meta


def detect(binary, models, wav, sensitivity, scores=False):
    r = subprocess.run([binary, "wake", "detect", "--input", wav, "--phrases", "stop", "--models", models,
                        "--sensitivity", f"{sensitivity:g}"] + (["--scores"] if scores else []), capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"stop_speech.py: {binary} wake detect failed: {r.stderr.strip()}")
    lines = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    return [l for l in lines if "phrase" in l], [l for l in lines if "scores" in l]


def score(meta, dets):
    m = meta["over-speech"]
    hit = [any(d["phrase"] == "stop" and e - 500 <= d["ms"] <= e + 1000 for d in dets) for e in m["ends_ms"]]
    by = {}
    for key in ("ratio", "voice", "node"):
        for info, h in zip(m["events"], hit):
            c = by.setdefault(key, {}).setdefault(info[key], [0, 0])
            c[0] += not h
            c[1] += 1
    return {"events": len(hit), "missed": sum(not h for h in hit), "by": by}


def pct(m, n):
    return f"{m / n * 100:.1f} %" if n else "–"


def section(out):
    meta = json.load(open(os.path.join(out, "meta.json")))
    hours = meta["node-speech"]["seconds"] / 3600
    rows = []
    for f in sorted(os.listdir(out)):
        if f.startswith("result-") and f.endswith(".json"):
            rows.append(json.load(open(os.path.join(out, f))))
    rows.sort(key=lambda r: (r.get("order", 9), r["label"]))
    L = [SECTION, "",
         "The condition the stop word is for (issue 22, item 6; the rules: models/training/RULE-STOP-V2.md, V3 and V4): \"stop\" said",
         "over the node's own speech as the echo canceller leaves it. Regenerate with (in models/training, after `swift build -c release`;",
         "the set is built once into eval-stop-speech/, about a minute; each label's row is kept there and listed here):",
         "", "```", ".venv/bin/python stop_speech.py --label \"shipped: recipe v1, --negatives-scale 0.4\" --order 1   # the head in models/",
         ".venv/bin/python stop_speech.py --models DIR --label NAME                                  # DIR: frontend.json and stop.json", "```", "",
         f"- the user: flite `awb` / `rms` only, {meta['over-speech']['events'].__len__()} \"stop\"s, a new speaker each "
         "(duration 0.8–1.3, pitch ×0.8–1.3), a test room on a third",
         "- the node: held-out docstring sentences by espeak-ng (the node's own synthesiser; its six training voices at "
         "140–210 wpm), through a loudspeaker band (200–7000 Hz) and a test room; the word **5, 10, 15 "
         "or 20 dB above that residual echo** in equal shares (the linear canceller's measured ERLE is 24–42 dB: 5 dB is a "
         "user about 20 dB quieter than the echo at the microphone); pink room noise 35 dB below the word",
         f"- false stops: **{hours:.2f} h of the node's speech alone**, the same echo path, at speaking level (peak −20…−4 dBFS: "
         "a residual as loud as speech, the pessimistic case)",
         "- detected: a stop from 0.5 s before to 1 s after the end of the word; the release Swift detector, the stop head "
         "alone; the node runs it at `talk.stopWordSensitivity` **0.7**", "",
         "| head | sensitivity (threshold) | missed | 5 dB | 10 dB | 15 dB | 20 dB | awb | rms | false stops / h of node speech |",
         "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        for s in SENSITIVITIES:
            c = r["at"][f"{s:g}"]
            by = c["by"]
            cell = lambda d, k: pct(*d.get(k, [0, 0]))
            L.append(f"| {r['label']} | {s:g} ({c['threshold']:.3f}) | **{pct(c['missed'], c['events'])}** ({c['missed']}/{c['events']}) | "
                     + " | ".join(cell(by["ratio"], f"{q} dB") for q in RATIOS) + " | "
                     + " | ".join(cell(by["voice"], v) for v in evaluate.EVAL_VOICES)
                     + f" | **{c['false'] / hours:.2f}** ({c['false']}) |")
    L += ["", "Threshold sweep (the detector's rule replayed on its scores, each threshold directly): missed / false stops per hour "
          "of node speech.", "", "| head | " + " | ".join(f"{t:g}" for t in SWEEP) + " |", "|---|" + "---|" * len(SWEEP)]
    for r in rows:
        L.append(f"| {r['label']} | " + " | ".join(f"{pct(m, r['events'])} / {fa / hours:.2f}" for m, fa in r["sweep"]) + " |")
    return L + [""]


SWEEP = [0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.98]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clawvoice", default=os.path.join(REPO, ".build", "release", "clawvoice"))
    ap.add_argument("--models", default=os.path.join(REPO, "models"))
    ap.add_argument("--label", default="shipped")
    ap.add_argument("--order", type=int, default=5, help="row order in the section (lower first)")
    ap.add_argument("--out", default=os.path.join(HERE, "eval-stop-speech"))
    ap.add_argument("--seed", type=int, default=2233)
    ap.add_argument("--events", type=int, default=200)
    ap.add_argument("--hours", type=float, default=0.5)
    ap.add_argument("--report", default=os.path.join(REPO, "models", "EVALUATION-stop.md"))
    ap.add_argument("--build-only", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    mp = os.path.join(args.out, "meta.json")
    meta = json.load(open(mp)) if os.path.exists(mp) else build(args.out, np.random.default_rng(args.seed), args.events, args.hours)
    if args.build_only:
        return
    man = json.load(open(os.path.join(args.models, "stop.json")))
    k = man.get("consecutiveSteps", 1)
    res = {"label": args.label, "order": args.order, "events": len(meta["over-speech"]["ends_ms"]), "at": {},
           "manifest": {"threshold": man["threshold"], "recipe": man.get("recipe", "")}}
    t0 = time.time()
    for s in SENSITIVITIES:
        wav = lambda n: os.path.join(args.out, n + ".wav")
        d_pos, st_pos = detect(args.clawvoice, args.models, wav("over-speech"), s, scores=(s == 0.5))
        d_neg, st_neg = detect(args.clawvoice, args.models, wav("node-speech"), s, scores=(s == 0.5))
        c = score(meta, d_pos)
        shift = 4 * (s - 0.5)
        lg = np.log(man["threshold"] / (1 - man["threshold"])) - shift
        c.update(false=len(d_neg), threshold=float(1 / (1 + np.exp(-lg))))
        res["at"][f"{s:g}"] = c
        log(f"{args.label} at {s:g}: missed {c['missed']}/{c['events']}, {len(d_neg)} false stops ({time.time() - t0:.0f} s)")
        if s == 0.5:
            res["sweep"] = []
            for thr in SWEEP:
                one = {"stop": thr}
                sp = score(meta, evaluate.replay(st_pos, one, consecutive={"stop": k}))
                res["sweep"].append((sp["missed"], len(evaluate.replay(st_neg, one, consecutive={"stop": k}))))
    with open(os.path.join(args.out, f"result-{args.label}.json"), "w") as f:
        json.dump(res, f)
    lines = section(args.out)
    prev = open(args.report).read().split("\n") if os.path.exists(args.report) else []
    if SECTION in prev:
        i = prev.index(SECTION)
        j = next((q for q in range(i + 1, len(prev)) if prev[q].startswith("## ")), len(prev))
        prev = prev[:i] + prev[j:]
    while prev and prev[-1] == "":
        prev.pop()
    with open(args.report, "w") as f:
        f.write("\n".join(prev + [""] + lines))
    log(f"wrote {args.report}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
