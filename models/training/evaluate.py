"""Held-out evaluation of the shipped wake models, run through OUR Swift detector
(`clawvoice wake detect`), written to models/EVALUATION.md.

    models/training/evaluate.sh            (builds the set, runs the release binary, writes the report)

The held-out set never overlaps training:
  voices    speech.TEST_VOICES (en-us-nyc, en-gb-x-gbcwmd) with speech.TEST_VARIANTS (every fifth
            espeak-ng variant); training used the other voices and variants
  text      docstring sentences from the 1-in-4 stdlib modules training never read (CRC split)
  rooms     augment.test_rir (sparse early reflections + tail), not the training room model
  noise     fan, music, test-voice babble (training: white, pink, brown, training-voice babble and,
            from recipe v5, augment.train_music, a different music generator)

Three kinds of audio, each one long 16 kHz WAV fed to the detector as a stream with all three
models loaded together (as the node runs them):
  positives-<trigger>.wav   N events: [sentence] pause trigger pause [command], then 2-4 s of room
  negatives.wav             >= 1 hour of continuous non-trigger speech
  near-misses.wav           near-miss words and the other triggers' near misses, alone and in carriers
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time
import wave

import numpy as np

import augment
import speech

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
TRIGGERS = ["openclaw", "claude", "computer"]
SR = 16000


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def test_speaker(rng):
    return dict(voice=str(rng.choice(speech.TEST_VOICES)),
                variant=None if rng.random() < 0.2 else str(rng.choice(speech.TEST_VARIANTS)),
                rate=int(rng.uniform(120, 240)), pitch=int(rng.uniform(20, 80)), pitch_range=int(rng.uniform(20, 90)))


def test_noise(rng, n, babble_pool):
    kind = rng.integers(3)
    if kind == 0:
        return augment.fan_noise(rng, n), "fan"
    if kind == 1:
        return augment.music_noise(rng, n), "music"
    return augment.babble(rng, n, babble_pool), "babble"


def condition(rng, x, babble_pool, snr=(5.0, 20.0), info=None):
    """Test room and noise for one segment; returns float audio at a speaking level."""
    room = rng.random() < 0.6
    if room:
        x = augment.reverberate(x, augment.test_rir(rng))
    noise, kind = test_noise(rng, len(x), babble_pool)
    db = rng.uniform(*snr)
    x = augment.mix_noise(x, noise, db)
    if info is not None:
        info.update(room=bool(room), noise=kind, snr=round(float(db), 1))
    return x / (np.max(np.abs(x)) + 1e-9) * 32767 * 10 ** (rng.uniform(-20, -4) / 20)


def write_wav(path, x):
    a = np.clip(np.round(x), -32768, 32767).astype(np.int16)
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes(a.tobytes())
    return len(a) / SR


def sil(seconds):
    return np.zeros(int(seconds * SR))


def build(out, eng, rng, sentences, positives, hours, near_per_trigger):
    babble_pool = [eng.synth(sentences[i], **test_speaker(rng)) for i in rng.integers(len(sentences), size=60)]
    meta = {}
    # Positives: every event's trigger end, in ms from the start of the file.
    for trig in TRIGGERS:
        parts, ends, infos, t = [], [], [], 0
        for _ in range(positives):
            seg = [sil(rng.uniform(0.3, 1.0))]
            if rng.random() < 0.5:
                seg += [eng.synth(sentences[rng.integers(len(sentences))], **test_speaker(rng)).astype(float), sil(rng.uniform(0.3, 0.8))]
            spk = test_speaker(rng)
            clip = eng.synth(str(rng.choice(speech.trigger_spellings(trig))), **spk).astype(float)
            _, e = speech.speech_bounds(clip.astype(np.int16))
            end_in_seg = sum(len(s) for s in seg) + e
            seg.append(clip)
            if rng.random() < 0.7:
                seg += [sil(rng.uniform(0.2, 0.6)), eng.synth(sentences[rng.integers(len(sentences))], **test_speaker(rng)).astype(float)]
            seg.append(sil(rng.uniform(2.0, 4.0)))
            info = dict(spk)
            x = condition(rng, np.concatenate(seg), babble_pool, info=info)
            infos.append(info)
            ends.append(int((t + end_in_seg) * 1000 / SR))
            parts.append(x)
            t += len(x)
        dur = write_wav(os.path.join(out, f"positives-{trig}.wav"), np.concatenate(parts))
        meta[f"positives-{trig}"] = {"ends_ms": ends, "seconds": dur, "events": infos}
        log(f"positives-{trig}.wav: {positives} events, {dur / 60:.1f} min")

    # Negatives: continuous speech, 20-40 s segments each in one room and noise.
    parts, total, n_utt = [], 0.0, 0
    while total < hours * 3600:
        seg = []
        while sum(map(len, seg)) < rng.uniform(20, 40) * SR:
            seg += [eng.synth(sentences[rng.integers(len(sentences))], **test_speaker(rng)).astype(float), sil(rng.uniform(0.15, 1.2))]
            n_utt += 1
        x = condition(rng, np.concatenate(seg), babble_pool, snr=(5.0, 25.0))
        parts.append(x)
        total += len(x) / SR
    dur = write_wav(os.path.join(out, "negatives.wav"), np.concatenate(parts))
    meta["negatives"] = {"seconds": dur, "utterances": n_utt}
    log(f"negatives.wav: {n_utt} utterances, {dur / 60:.1f} min")

    # Near misses: each word alone or in a carrier sentence, 3 s apart.
    carriers = ["{}", "{}", "I said {} yesterday.", "The {} was on the table.", "Please {} now.", "What about {}?"]
    parts, words, t = [], [], 0
    for trig in TRIGGERS:
        for _ in range(near_per_trigger):
            w = str(rng.choice(speech.NEAR_MISSES[trig]))
            text = str(rng.choice(carriers)).format(w)
            clip = eng.synth(text, **test_speaker(rng)).astype(float)
            x = condition(rng, np.concatenate([sil(0.5), clip, sil(2.5)]), babble_pool, snr=(10.0, 25.0))
            parts.append(x)
            words.append({"trigger": trig, "word": w, "text": text, "start_ms": int(t * 1000 / SR),
                          "end_ms": int((t + len(x)) * 1000 / SR)})
            t += len(x)
    dur = write_wav(os.path.join(out, "near-misses.wav"), np.concatenate(parts))
    meta["near-misses"] = {"seconds": dur, "utterances": words}
    log(f"near-misses.wav: {len(words)} utterances, {dur / 60:.1f} min")
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f)
    return meta


MODELS = os.path.join(REPO, "models")


def detect(binary, wav, extra=()):
    env = dict(os.environ, CLAWVOICE_MODELS_DIR=MODELS)
    t0 = time.time()
    r = subprocess.run([binary, "wake", "detect", "--input", wav, "--phrases", ",".join(TRIGGERS), *extra],
                       capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"evaluate.py: {binary} wake detect failed: {r.stderr.strip()}")
    lines = [json.loads(l) for l in r.stdout.splitlines() if l.startswith("{")]
    return lines, time.time() - t0


def sweep(steps, threshold, refractory_ms=2000, only=None):
    """Replays the detector's rule (without the 90 ms decision window) on --scores output at one
    common threshold; `only` restricts it to one model."""
    out, last = [], -10 ** 9
    for st in steps:
        best, bs = None, 0.0
        for p, s in st["scores"].items():
            if only and p != only:
                continue
            if st["ms"] >= 500 and s >= threshold and (best is None or s > bs):
                best, bs = p, s
        if best and st["ms"] - last >= refractory_ms:
            out.append({"phrase": best, "ms": st["ms"], "score": bs})
            last = st["ms"]
    return out


def score_positives(dets, ends, trig):
    hits, wrong = 0, 0
    used = set()
    for e in ends:
        win = [d for d in dets if e - 500 <= d["ms"] <= e + 1000]
        if any(d["phrase"] == trig for d in win):
            hits += 1
        elif win:
            wrong += 1
        used |= {id(d) for d in win}
    stray = sum(1 for d in dets if id(d) not in used)
    return hits, wrong, stray


def main():
    global MODELS
    ap = argparse.ArgumentParser()
    ap.add_argument("--clawvoice", default=os.path.join(REPO, ".build", "release", "clawvoice"))
    ap.add_argument("--out", default=os.path.join(HERE, "eval"))
    ap.add_argument("--seed", type=int, default=777)
    ap.add_argument("--positives", type=int, default=300)
    ap.add_argument("--hours", type=float, default=1.05)
    ap.add_argument("--near", type=int, default=200, help="near-miss utterances per trigger")
    ap.add_argument("--models", default=os.path.join(REPO, "models"))
    ap.add_argument("--note", default="", help="a line about how the binary was built, for the report")
    ap.add_argument("--build-only", action="store_true", help="make the held-out set and stop")
    ap.add_argument("--report", default=os.path.join(REPO, "models", "EVALUATION.md"))
    args = ap.parse_args()
    MODELS = args.models
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(args.seed)

    meta_path = os.path.join(args.out, "meta.json")
    if os.path.exists(meta_path) and os.path.exists(os.path.join(args.out, "negatives.wav")):
        meta = json.load(open(meta_path))
        log(f"reusing the held-out set in {args.out}")
    else:
        eng = speech.Espeak()
        sentences = [s for s in speech.docstring_sentences("test") if not speech.contains_trigger(s, TRIGGERS)]
        log(f"{len(sentences)} held-out sentences; voices {speech.TEST_VOICES}; {len(speech.TEST_VARIANTS)} variants")
        meta = build(args.out, eng, rng, sentences, args.positives, args.hours, args.near)
    if args.build_only:
        return

    results = {}
    cpu_audio, cpu_wall = 0.0, 0.0
    for name in [f"positives-{t}" for t in TRIGGERS] + ["negatives", "near-misses"]:
        wav = os.path.join(args.out, name + ".wav")
        lines, wall = detect(args.clawvoice, wav, ["--scores"])
        steps = [l for l in lines if "scores" in l]
        dets = [l for l in lines if "phrase" in l]
        results[name] = {"dets": dets, "steps": steps}
        cpu_audio += meta[name]["seconds"]
        cpu_wall += wall
        log(f"{name}: {len(dets)} wakes over {meta[name]['seconds'] / 60:.1f} min ({wall:.1f} s)")

    # CPU: the detector alone (no --scores printing) over the hour of speech, as child CPU time.
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    detect(args.clawvoice, os.path.join(args.out, "negatives.wav"))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    cpu_fraction = cpu_s / meta["negatives"]["seconds"]

    thresholds = {}
    for t in TRIGGERS:
        path = os.path.join(MODELS, f"{t}.json")
        thresholds[t] = json.load(open(path))["threshold"] if os.path.exists(path) else float("nan")

    rows = []
    for t in TRIGGERS:
        ends = meta[f"positives-{t}"]["ends_ms"]
        hits, wrong, stray = score_positives(results[f"positives-{t}"]["dets"], ends, t)
        rows.append((t, len(ends), hits, wrong, stray))
    present = [t for t in TRIGGERS if thresholds[t] == thresholds[t]]
    miss_notes = []
    for t in present:
        ev = meta[f"positives-{t}"].get("events")
        if not ev:
            continue
        dets = results[f"positives-{t}"]["dets"]
        for e, info in zip(meta[f"positives-{t}"]["ends_ms"], ev):
            info["hit"] = any(d["phrase"] == t and e - 500 <= d["ms"] <= e + 1000 for d in dets)
    def miss_rate(key, value):
        evs = [i for t in present for i in meta[f"positives-{t}"].get("events", []) if key(i) == value]
        return (sum(not i["hit"] for i in evs), len(evs))
    all_events = [i for t in present for i in meta[f"positives-{t}"].get("events", [])]
    if all_events:
        for label, key, values in [("noise", lambda i: i["noise"], ["fan", "music", "babble"]),
                                   ("SNR", lambda i: "5-10 dB" if i["snr"] < 10 else ("10-15 dB" if i["snr"] < 15 else "15-20 dB"),
                                    ["5-10 dB", "10-15 dB", "15-20 dB"]),
                                   ("room", lambda i: "reverberant" if i["room"] else "dry", ["dry", "reverberant"]),
                                   ("voice", lambda i: i["voice"], speech.TEST_VOICES),
                                   ("variant", lambda i: i["variant"] or "none", ["none"] + speech.TEST_VARIANTS)]:
            cells = []
            for v in values:
                m, n = miss_rate(key, v)
                if n:
                    cells.append(f"{v} {m / n * 100:.0f} % of {n}")
            miss_notes.append(f"- by {label}: " + ", ".join(cells))
    neg = results["negatives"]["dets"]
    neg_hours = meta["negatives"]["seconds"] / 3600
    near = meta["near-misses"]["utterances"]
    near_dets = results["near-misses"]["dets"]
    near_count = len(near_dets)

    def near_word(ms):
        for u in near:
            if u["start_ms"] <= ms < u["end_ms"]:
                return u["text"]
        return "?"

    # Sweep: one common threshold replayed on the per-step scores (the detector's own rule).
    sweep_rows = []
    for thr in [0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995]:
        cells = []
        for t in present:
            d = sweep(results[f"positives-{t}"]["steps"], thr, only=t)
            h, _, _ = score_positives(d, meta[f"positives-{t}"]["ends_ms"], t)
            miss = 1 - h / len(meta[f"positives-{t}"]["ends_ms"])
            fa = len(sweep(results["negatives"]["steps"], thr, only=t)) / neg_hours
            nm = len(sweep(results["near-misses"]["steps"], thr, only=t))
            cells.append(f"{miss * 100:.1f} % / {fa:.2f} / {nm}")
        sweep_rows.append((thr, cells))

    cmd = "bash models/training/evaluate.sh"
    lines = ["# Wake-word evaluation", "",
             "Held-out figures for the shipped models (`models/*.json`), measured with the Swift detector",
             "(`clawvoice wake detect`, all three models loaded together, default sensitivity 0.5, 2 s refractory).",
             "Regenerate with:", "", "```", "swift build -c release", cmd, "```", ""] + ([args.note, ""] if args.note else []) + [
             "## The held-out set", "",
             f"- voices: {', '.join(speech.TEST_VOICES)} (training used {', '.join(speech.TRAIN_VOICES)}), "
             f"with the {len(speech.TEST_VARIANTS)} held-out variants ({', '.join(speech.TEST_VARIANTS)}); "
             "rate 120–240 wpm, pitch and range jittered",
             "- text: sentences from Python standard-library docstrings in the 1-in-4 modules training never read; "
             "sentences containing a trigger removed",
             "- rooms: sparse early reflections plus a decaying tail, RT60 0.2–0.9 s, on 60 % of segments "
             "(training used a different, Gaussian-tail model)",
             "- noise: fan (rumble with mains hum), music (random chords), babble of held-out voices; SNR 5–20 dB "
             "for triggers, 5–25 dB for speech (training: white, pink, brown, training-voice babble and, from recipe v5, "
             "music from its own generator, `augment.train_music`; never these generators)",
             f"- seed {args.seed}; {args.positives} trigger events per trigger; "
             f"{meta['negatives']['seconds'] / 3600:.2f} h of non-trigger speech; {len(near)} near-miss utterances", "",
             "A trigger event counts as detected when a wake for that phrase lands between 0.5 s before and 1 s after",
             "the end of the spoken trigger.", "",
             "## Results at the shipped thresholds", "",
             "| trigger | threshold | events | missed | wrong phrase | wakes outside events |",
             "|---|---|---|---|---|---|"]
    for t, n, h, w, s in rows:
        lines.append(f"| {t} | {thresholds[t]:g} | {n} | {(n - h) / n * 100:.1f} % ({n - h}) | {w} | {s} |")
    by_phrase = {t: sum(1 for d in neg if d["phrase"] == t) for t in TRIGGERS}
    lines += ["", f"False wakes on {neg_hours:.2f} h of non-trigger speech: **{len(neg)} ({len(neg) / neg_hours:.2f} per hour)**"
              f" — by phrase: " + ", ".join(f"{t} {by_phrase[t]}" for t in TRIGGERS) + ".", "",
              f"Near misses: **{near_count} wakes in {len(near)} utterances** "
              f"({near_count / len(near) * 100:.1f} %) — " +
              (", ".join(f"{d['phrase']} on \"{near_word(d['ms'])}\"" for d in near_dets[:20]) or "none") + ".", "",
              "Near-miss words (each alone or in a carrier sentence): " +
              "; ".join(f"{t}: {', '.join(speech.NEAR_MISSES[t])}" for t in TRIGGERS) + ".", "",
              f"Missed wakes ({', '.join(present)} together) by condition:", ""] + miss_notes + ["",
              "## Threshold sweep, each model alone", "",
              "Each model alone, its `--scores` output replayed through the detector's rule in Python (2 s refractory,",
              "0.5 s warm-up, no decision window): missed wakes / false wakes per hour of speech / wakes on the",
              f"{len(near)} near-miss utterances. The shipped thresholds are per model (table above).", "",
              "| threshold | " + " | ".join(present) + " |",
              "|---|" + "---|" * len(present)]
    for thr, cells in sweep_rows:
        lines.append(f"| {thr:g} | " + " | ".join(cells) + " |")
    lines += ["", "## CPU", "",
              f"`clawvoice wake detect` over the {meta['negatives']['seconds'] / 3600:.2f} h of speech, all three models, "
              f"whole process (WAV read included): {cpu_s:.2f} s of CPU, **{cpu_fraction * 100:.3f} % of one core**."]
    lines += ["", f"Detector wall time over all {cpu_audio / 3600:.2f} h of audio, three models, `--scores` printing "
              f"included: {cpu_wall:.1f} s ({cpu_wall / cpu_audio * 100:.2f} % of real time).", ""]
    with open(args.report, "w") as f:
        f.write("\n".join(lines))
    log(f"wrote {args.report}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
