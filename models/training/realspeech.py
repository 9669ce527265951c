"""The real-speech yardstick (issue 22): heads trained from text for "alexa" and "jarvis"
(yardstick.sh trains them exactly as `make wake-model` would) scored on real people saying those
words, beside the `alexa` models of the pymicro-wakeword and pyopen-wakeword wheels on the same
files in the same run; writes the "Real speech" section of models/EVALUATION.md.

    bash models/training/yardstick.sh        (= make wake-eval-real; make wake-eval runs it too)

The set (built once into eval-real/, seed 2222; real.py reads the clips):
  positives   every clip of the word, 1 s of silence either side, once as recorded and once
              with noise at 10 dB SNR (over the word: speech.speech_bounds), white, pink, brown or
              babble in equal shares (a seeded shuffle); the babble is 3-6 real talkers from the
              clips of smart mirror, snowboy and view glass (words no yardstick head is scored on)
  negatives   (a) flite awb + rms, the 2.06 h stream make wake-eval builds (eval-flite/negatives.wav);
              (b) real: the other words' clips back to back (no gaps), as recorded: the other scored word's
              clips all, and the evaluation half (real.half) of smart mirror, snowboy, view glass,
              whose training half candidate recipe v9 may train on
A clip counts as heard when a wake for the word lands inside its segment. Our heads run through the
release Swift detector (`clawvoice wake detect`, one head loaded, its manifest threshold and steps,
2 s refractory); the anchors through their wheels' streaming APIs at their shipped settings
(microWakeWord: mean of 5 probabilities > 0.9, openWakeWord: > 0.5), the same 2 s refractory.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time
import wave

import numpy as np

import augment
import real
from eval_set import write_wav  # 16 kHz mono int16, as the held-out set writes it
import speech

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
SR = 16000
PAD = int(1.0 * SR)     # 2 s between any two clips' audio: the 2 s refractory never joins two clips
NOISES = ["white", "pink", "brown", "babble"]
BABBLE_WORDS = ["smart-mirror", "snowboy", "view-glass"]
REFRACTORY_MS = 2000


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def read_wav(path):
    with wave.open(path) as w:
        return np.frombuffer(w.readframes(w.getnframes()), np.int16)


def stream(out, name, clips, noisy=None, pad=PAD):
    """Writes clips back to back, each padded with `pad` samples either side (noise, when given,
    covers the whole segment); returns [(start_ms, end_ms)] per clip."""
    parts, segs, t = [], [], 0
    for i, (_, a) in enumerate(clips):
        x = np.concatenate([np.zeros(pad), a.astype(np.float64), np.zeros(pad)])
        if noisy is not None:
            x = noisy(i, a, x)
        segs.append((int(t * 1000 / SR), int((t + len(x)) * 1000 / SR)))
        parts.append(x)
        t += len(x)
    write_wav(os.path.join(out, name + ".wav"), np.concatenate(parts))
    return segs


def build(out, cache, seed):
    rng = np.random.default_rng(seed)
    allc = {w: real.clips(w, cache) for w in real.WORDS}
    babble_pool = [a for w in BABBLE_WORDS for _, a in allc[w]]
    meta = {}
    for word in real.YARDSTICK:
        clips = allc[word]
        kinds = [NOISES[k % 4] for k in rng.permutation(len(clips))]

        def noisy(i, a, x, kinds=kinds):
            s, e = speech.speech_bounds(a)
            word_part = a[s:e].astype(np.float64) if e > s else a.astype(np.float64)
            kind = kinds[i]
            n = augment.babble(rng, len(x), babble_pool) if kind == "babble" else \
                augment.coloured_noise(rng, len(x), NOISES.index(kind))
            p_s = np.mean(word_part ** 2) + 1e-9
            y = x + n * np.sqrt(p_s / (np.mean(n ** 2) * 10 ** (10 / 10.0)))
            peak = np.max(np.abs(y))
            return y * (32000 / peak) if peak > 32000 else y       # never clip: scale the mix down instead
        meta[f"{word}-clean"] = {"segments": stream(out, f"positives-{word}-clean", clips), "clips": len(clips)}
        meta[f"{word}-10db"] = {"segments": stream(out, f"positives-{word}-10db", clips, noisy), "noise": kinds,
                                "clips": len(clips)}
        negs = [(f"{w}/{n}", a) for w in real.WORDS if w != word for n, a in allc[w]
                if w in real.YARDSTICK or real.half(w, n) == 1]
        segs = stream(out, f"negatives-real-{word}", negs, pad=0)
        meta[f"{word}-realneg"] = {"segments": segs, "clips": len(negs), "seconds": segs[-1][1] / 1000,
                                   "words": sorted({n.split('/')[0] for n, _ in negs})}
        log(f"{word}: {len(clips)} clips (clean, 10 dB); real negatives {len(negs)} clips, {segs[-1][1] / 3.6e6:.2f} h")
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f)
    return meta


def detect_swift(binary, heads, word, wav):
    env = dict(os.environ, CLAWVOICE_MODELS_DIR=heads)
    r = subprocess.run([binary, "wake", "detect", "--input", wav, "--phrases", word], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"realspeech.py: {binary} wake detect failed: {r.stderr.strip()}")
    return [json.loads(l)["ms"] for l in r.stdout.splitlines() if l.startswith("{") and '"phrase"' in l]


def detect_anchor(kind, wav, out):
    """Wake times (ms) of a wheel's alexa model over a WAV, fed in 80 ms chunks as a stream; kept in
    `out` per file (name, size, time) since neither the wheels nor the file change between runs."""
    st = os.stat(wav)
    memo = os.path.join(out, f"anchor-{kind}-{os.path.basename(wav)}-{st.st_size}-{int(st.st_mtime)}.json")
    if os.path.exists(memo):
        return json.load(open(memo))
    wakes = _detect_anchor(kind, wav)
    with open(memo, "w") as f:
        json.dump(wakes, f)
    return wakes


def _detect_anchor(kind, wav):
    audio = read_wav(wav)
    out, last = [], -10 ** 9
    if kind == "pymicro":
        from pymicro_wakeword import MicroWakeWord, MicroWakeWordFeatures, Model
        feats, mww = MicroWakeWordFeatures(), MicroWakeWord.from_builtin(Model.ALEXA)
        step = lambda chunk: [mww.process_streaming(f) for f in feats.process_streaming(chunk)]
    else:
        from pyopen_wakeword import Model
        from pyopen_wakeword.openwakeword import OpenWakeWord, OpenWakeWordFeatures
        feats, oww = OpenWakeWordFeatures.from_builtin(), OpenWakeWord.from_builtin(Model.ALEXA)
        step = lambda chunk: [p > 0.5 for e in feats.process_streaming(chunk) for p in oww.process_streaming(e)]
    for i in range(0, len(audio) - 1279, 1280):
        ms = (i + 1280) * 1000 // SR
        if any(bool(d) for d in step(audio[i:i + 1280].tobytes())) and ms - last >= REFRACTORY_MS:
            out.append(ms)
            last = ms
    return out


def heard(wakes, segs):
    hit = [False] * len(segs)
    j = 0
    for ms in sorted(wakes):
        while j < len(segs) and segs[j][1] <= ms:
            j += 1
        if j < len(segs) and segs[j][0] <= ms:
            hit[j] = True
    return hit


def score(meta, word, wakes, flite_hours):
    """Figures of one model from its wakes per file."""
    clean = heard(wakes["clean"], meta[f"{word}-clean"]["segments"])
    noisy = heard(wakes["10db"], meta[f"{word}-10db"]["segments"])
    kinds = meta[f"{word}-10db"]["noise"]
    r = {"clips": len(clean), "missedClean": clean.count(False), "missed10dB": noisy.count(False),
         "byNoise": {k: [sum(1 for h, kk in zip(noisy, kinds) if kk == k and not h), kinds.count(k)] for k in NOISES},
         "fliteWakes": len(wakes["flite"]) if "flite" in wakes else None, "fliteHours": flite_hours,
         "realWakes": len(wakes["realneg"]), "realHours": meta[f"{word}-realneg"]["seconds"] / 3600}
    return r


def pct(m, n):
    return f"{m / n * 100:.1f} %" if n else "–"


def row(name, thr, r):
    n = r["clips"]
    pooled = (r["missedClean"] + r["missed10dB"]) / (2 * n) * 100
    return (f"| {name} | {thr} | {pct(r['missedClean'], n)} | {pct(r['missed10dB'], n)} | "
            + " | ".join(pct(*r["byNoise"][k]) for k in NOISES)
            + f" | **{pooled:.1f} %** | "
            + (f"**{r['fliteWakes'] / r['fliteHours']:.2f}** ({r['fliteWakes']})" if r["fliteWakes"] is not None else "–") + " | "
              f"**{r['realWakes'] / r['realHours']:.2f}** ({r['realWakes']}) |"), pooled


def threshold_rule(man):
    """The threshold rule a head's manifest records, as the tables name it ("v2", "v5b", "v5c", ...)."""
    m = re.search(r"rule (v\d+\w*)", str(man["training"].get("thresholdRule", "v2")))
    return m.group(1) if m else str(man["training"].get("thresholdRule", "v2"))


def report(meta, results, seed):
    """The "Real speech" section of EVALUATION.md from every recipe's saved results."""
    a = meta["alexa-realneg"]
    j = meta["jarvis-realneg"]
    lines = ["## Real speech", "",
             "The real-speech yardstick (issue 22): heads for \"alexa\" and \"jarvis\" trained from text exactly as "
             "`make wake-model TRIGGER=...` trains a user's trigger (espeak-ng, Piper, Pico; never a real recording of the "
             "word), scored on real people saying the word (../shared/wake-real: Picovoice's wake-word benchmark clips, "
             "more than 50 speakers), beside the `alexa` models of the `pymicro-wakeword` 2.5.0 and `pyopen-wakeword` "
             "1.1.0 wheels on the same files in the same run. Regenerate with:", "", "```", "make wake-eval-real", "```", "",
             "(= `swift build -c release` and `bash models/training/yardstick.sh`; `make wake-eval` runs it after the flite "
             "set. The heads are trained into models/training/.cache/yardstick/ when absent, as a new phrase trains: recipe "
             "v16 and threshold rule v5c since RULE-V24 (`WAKE_YARDSTICK_RECIPE=v4` for recipe v4 and rule v2); ~26 min "
             "the first from a clean cache, 5–8 min each after; the scoring itself takes a few minutes.)", "",
             f"- positives: every clip ({meta['alexa-clean']['clips']} alexa, {meta['jarvis-clean']['clips']} jarvis), 1 s "
             "of silence either side (so the 2 s refractory never spans two clips), once as recorded and once at **10 dB SNR** (over the word) of white, pink, brown or "
             "babble noise in equal shares; babble: 3–6 real talkers from the smart mirror, snowboy and view glass clips; "
             f"seed {seed}. Missed: no wake for the word inside the clip's segment. Pooled: clean and 10 dB together.",
             "- false wakes per hour: on the flite awb + rms negatives of `make wake-eval` "
             + (f"({results['flite_hours']:.2f} h, held out)" if results["flite_hours"] else "(not built for this run: –)")
             + ", and on **real** negatives: the other words' clips back to back, no gaps, as "
             f"recorded (for alexa {a['clips']} clips, {a['seconds'] / 3600:.2f} h: {', '.join(a['words'])}; for jarvis "
             f"{j['clips']} clips, {j['seconds'] / 3600:.2f} h), the other scored word's clips all and only the evaluation half "
             "(`real.half`) of the three others, since candidate recipe v9 trains on their other half.",
             "- our heads: the release Swift detector (`clawvoice wake detect`), one head loaded, at the threshold and steps "
             "in a row its training chose (rule v2 on training-engine validation; rule v5c raises it on voices the head "
             "never heard); the anchors at their shipped settings "
             "(microWakeWord: mean of 5 probabilities > 0.9; openWakeWord: > 0.5); 2 s refractory for all.", "",
             "| model | threshold | missed, as recorded | missed, 10 dB | white | pink | brown | babble | **missed, pooled** | "
             "false wakes / h, flite | false wakes / h, real |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    anchors = results["anchors"]
    rows = {}
    for recipe, res in sorted(results["recipes"].items()):
        for word in real.YARDSTICK:
            if word in res:
                # "v9 (--real-negatives ...)" or "v18 (--phonetic-near 40) (--members 5)": the flags
                flags = " ".join(re.findall(r"\(([^)]*)\)", res[word]["recipeNote"]))
                rule = f", rule {res[word]['rule']}" if res[word].get("rule") else ""
                line, pooled = row(f"{word}, ours (recipe {recipe}{': ' + flags if flags else ''}{rule})", res[word]["threshold"], res[word])
                rows[(recipe, word)] = pooled
                lines.append(line)
    for name, label, thr in (("pymicro", "alexa, `pymicro-wakeword` (microWakeWord)", "0.9, mean of 5"),
                             ("pyopen", "alexa, `pyopen-wakeword` (openWakeWord)", "0.5")):
        if name in anchors:
            line, pooled = row(label, thr, anchors[name])
            rows[name] = pooled
            lines.append(line)
    lines.append("")
    if not results["recipes"]:
        lines += ["No head of ours is in this table yet: its training (yardstick.sh) had not finished when the section "
                  "was written; the anchors' rows stand alone until `make wake-eval-real` is run again.", ""]
    if "pymicro" in rows and "pyopen" in rows:
        best = min(rows["pymicro"], rows["pyopen"])
        missed = lambda r: r["missedClean"] + r["missed10dB"]
        best_missed = min(missed(results["anchors"][k]) for k in ("pymicro", "pyopen"))
        for recipe in sorted(results["recipes"]):
            if (recipe, "alexa") in rows:
                r = results["recipes"][recipe]["alexa"]
                if r["fliteWakes"] is None:
                    continue
                fw = r["fliteWakes"] / r["fliteHours"]
                # The same clips for both: counts, so 54 of 658 is the bound 1.5 x 36, not a hair over it.
                ok = missed(r) <= 1.5 * best_missed and fw <= 0.5
                lines.append(f"Issue 22's goal, recipe {recipe}: alexa pooled {rows[(recipe, 'alexa')]:.1f} % against 1.5 × the "
                             f"better anchor's {best:.1f} % = {1.5 * best:.1f} %, at {fw:.2f} false wakes per hour on flite (≤ 0.5): "
                             f"**{'met' if ok else 'not met'}** (one head, one seed; other seeds: models/README.md, \"Seed check\"; recipe v16 "
                             f"with rule v5c met it on two alexa seeds of three)." + (f" jarvis pooled {rows[(recipe, 'jarvis')]:.1f} % (goal ≤ 8 %)."
                                                                    if (recipe, 'jarvis') in rows else ""))
        if len(results["recipes"]) > 1:
            lines.append("A candidate recipe is decided by the rule written before it ran (training/RULE-V9.md for v9: "
                         "recipe v4 stays, 2026-12-03), not by the goal line above.")
        lines.append("")
    return lines


def splice(path, section):
    """Replaces (or appends) the "## Real speech" section of a report up to its first "###" subsection
    (those are written by hand from other runs), leaving the rest as it is."""
    text = open(path).read() if os.path.exists(path) else ""
    lines = text.split("\n")
    start = next((i for i, l in enumerate(lines) if l.strip() == "## Real speech"), None)
    if start is None:
        lines = lines + [""] + section if text else section
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith(("## ", "### "))), len(lines))
        lines = lines[:start] + section + lines[end:]
    with open(path, "w") as f:
        f.write("\n".join(lines).rstrip("\n") + "\n")


def heads_at_thresholds(heads, overrides):
    """A temporary copy of the heads directory with the given words' manifest thresholds replaced."""
    import shutil
    import tempfile
    out = tempfile.mkdtemp(prefix="realspeech-heads-")
    for name in os.listdir(heads):
        if os.path.isfile(os.path.join(heads, name)):
            shutil.copy2(os.path.join(heads, name), out)
    for o in overrides:
        word, _, t = o.partition("=")
        path = os.path.join(out, f"{word}.json")
        if not os.path.exists(path) or not t:
            raise SystemExit(f"realspeech: --threshold {o}: expected WORD=T with a {word}.json head in {heads}")
        man = json.load(open(path))
        man["threshold"] = float(t)
        json.dump(man, open(path, "w"), indent=2)
        log(f"probe: {word} at threshold {float(t):g}")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clawvoice", default=os.path.join(REPO, ".build", "release", "clawvoice"))
    ap.add_argument("--heads", required=True, help="directory with alexa.json and jarvis.json (+ frontend)")
    ap.add_argument("--recipe", help="the row's name, kept in eval-real/results.json (yardstick.sh "
                    "passes its recipe: v16, v4, ...); a new name for a probe, so no yardstick row is replaced")
    ap.add_argument("--out", default=os.path.join(HERE, "eval-real"))
    ap.add_argument("--flite", default=os.path.join(HERE, "eval-flite", "negatives.wav"))
    ap.add_argument("--seed", type=int, default=2222)
    ap.add_argument("--report", default=os.path.join(REPO, "models", "EVALUATION.md"))
    ap.add_argument("--report-only", action="store_true", help="rewrite the section from eval-real/results.json, run nothing")
    ap.add_argument("--threshold", action="append", default=[], metavar="WORD=T",
                    help="a probe: score WORD's head at threshold T instead of its manifest's (a copy of --heads is "
                         "edited; give the run its own --recipe and --report)")
    args = ap.parse_args()
    if not args.recipe and not args.report_only:
        ap.error("--recipe NAME is required: the row's name in eval-real/results.json")
    if args.threshold:
        args.heads = heads_at_thresholds(args.heads, args.threshold)
    if args.report_only:
        splice(args.report, report(json.load(open(os.path.join(args.out, "meta.json"))),
                                   json.load(open(os.path.join(args.out, "results.json"))), args.seed))
        return
    os.makedirs(args.out, exist_ok=True)
    have_flite = os.path.exists(args.flite)
    if not have_flite:       # yardstick.sh builds it first; without it the flite column stays empty
        log(f"{args.flite} is missing (build it: models/training/.venv/bin/python models/training/evaluate.py "
            "--build-only); no false wakes on flite this run")
    meta_path = os.path.join(args.out, "meta.json")
    if os.path.exists(meta_path):
        meta = json.load(open(meta_path))
        log(f"reusing the real-speech set in {args.out}")
    else:
        meta = build(args.out, os.path.join(HERE, ".cache", "real"), args.seed)
    flite_hours = len(read_wav(args.flite)) / SR / 3600 if have_flite else 0.0
    res_path = os.path.join(args.out, "results.json")
    results = json.load(open(res_path)) if os.path.exists(res_path) else {}
    results.setdefault("recipes", {})
    results.setdefault("anchors", {})
    results["flite_hours"] = flite_hours
    files = lambda word: {"clean": os.path.join(args.out, f"positives-{word}-clean.wav"),
                          "10db": os.path.join(args.out, f"positives-{word}-10db.wav"),
                          "realneg": os.path.join(args.out, f"negatives-real-{word}.wav"),
                          **({"flite": args.flite} if have_flite else {})}
    mine = {}
    for word in real.YARDSTICK:
        if not os.path.exists(os.path.join(args.heads, f"{word}.json")):
            log(f"no {word} head in {args.heads} (yardstick.sh trains it); its row is left out this run")
            continue
        man = json.load(open(os.path.join(args.heads, f"{word}.json")))
        t0 = time.time()
        wakes = {k: detect_swift(args.clawvoice, args.heads, word, f) for k, f in files(word).items()}
        mine[word] = dict(score(meta, word, wakes, flite_hours), threshold=f"{man['threshold']:g} ({man.get('consecutiveSteps', 1)})",
                          recipeNote=man["training"]["recipe"].split(" ", 1)[1], sha=man["weightsSHA256"][:12],
                          rule=threshold_rule(man))
        log(f"{word} (recipe {args.recipe}): missed {mine[word]['missedClean']} + {mine[word]['missed10dB']} of "
            f"2 x {mine[word]['clips']}; false wakes flite {mine[word]['fliteWakes']}, real {mine[word]['realWakes']} "
            f"({time.time() - t0:.0f} s)")
    if mine:
        results["recipes"][args.recipe] = mine
    for kind in ("pymicro", "pyopen"):     # the anchors are run every time: same files, same run
        t0 = time.time()
        wakes = {k: detect_anchor(kind, f, args.out) for k, f in files("alexa").items()}
        results["anchors"][kind] = score(meta, "alexa", wakes, flite_hours)
        r = results["anchors"][kind]
        log(f"alexa, {kind}: missed {r['missedClean']} + {r['missed10dB']} of 2 x {r['clips']}; false wakes flite "
            f"{r['fliteWakes']}, real {r['realWakes']} ({time.time() - t0:.0f} s)")
    with open(res_path, "w") as f:
        json.dump(results, f, indent=1)
    section = report(meta, results, args.seed)
    splice(args.report, section)
    log(f"wrote the Real speech section of {args.report}")
    print("\n".join(section))


if __name__ == "__main__":
    main()
