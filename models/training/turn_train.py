"""Trains the end-of-turn detector (models/turn.json): a logistic model over the features the
Swift TurnDetector computes in every pause after speech (how the pitch and the level moved over
the last 300 ms of speech and where they ended against the turn's median, how long the last run
of speech and of voicing lasted, how long the pause is so far), deciding whether the turn is over.

Turns: one to three clauses from speech.everyday_sentences (not the bench's clause list), each
said on its own by a training engine (espeak-ng, Pico en-US/en-GB; Piper joe with --piper N, one
turn in N: 8 s a clause on the shared machine; never flite: awb and rms are the bench's held-out
voices), trimmed, joined with 150-800 ms pauses (a comma ends every clause but the last, whose
ending is the engine's own: espeak-ng and Pico say "x," and "x." differently, in pitch), 0.3-0.8 s
before, 2 s after, in training noise (white, pink, brown) at clean/20/10/5 dB. Rendered turns and
their features are cached in .cache/turn/<key>/. The features come from the Swift code itself
(`clawvoice-bench --turn-features`), so training and the node compute the same.

The threshold and the shortest pause are chosen on a validation split of the training engines
(every fifth turn): the quickest median (last word -> decision, 900 ms window as the ceiling)
whose turns cut early stay within --max-cut (0.5 %) of the window alone's. Also printed: each
engine's validation figures, and each engine family left out of the fit (how far the model
carries to voices it never heard).

Run: models/training/turn_train.sh (what `make turn-model` runs). Pure numpy.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
import wave

import numpy as np

import augment
import speech

SR = 16000
FRAME = 320
HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.dirname(HERE)
ROOT = os.path.dirname(MODELS)
CACHE = os.path.join(HERE, ".cache", "turn")
FEATURES = ["pauseMs", "pitchSlope", "pitchEnd", "levelSlope", "levelEnd", "lastRunMs", "lastVoicedMs", "speechMs", "voicedShare"]


def log(msg):
    print(f"[turn {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def engines(piper):
    """The training engines that load here (Piper and Pico need the venv's wheels). Piper only with
    --piper: it takes 8 s a clause on the shared 2-core machine (espeak-ng 0.03 s, Pico 0.14 s)."""
    import voices
    out = [voices.EspeakEngine()]
    makers = [lambda: voices.PicoEngine("en-US"), lambda: voices.PicoEngine("en-GB")]
    if piper:
        makers.insert(0, voices.PiperEngine)
    for make in makers:
        try:
            out.append(make())
        except Exception as e:  # a missing wheel: say so, train with the rest
            log(f"engine unavailable ({e.__class__.__name__}: {e}); training without it")
    return out


def sounding(x):
    """Per 10 ms of x: within 40 dB of the loudest 10 ms."""
    n = len(x) // 160
    rms = np.sqrt((x[:n * 160].astype(np.float64).reshape(n, 160) ** 2).mean(axis=1))
    return rms > rms.max() / 100 if n else np.zeros(0, bool)


def trimmed(a):
    """Clause audio without the engine's own silence (10 ms frames within 40 dB of the loudest)."""
    on = np.nonzero(sounding(a))[0]
    return a[on[0] * 160:(on[-1] + 1) * 160] if len(on) else a


def clauses(rng, k):
    out = []
    for s in speech.everyday_sentences(rng, k):
        out.append(s.rstrip(".!?"))
    return out


def render(n_turns, seed, eng_list, piper_every, whole=0.0):
    """Turns as (audio int16, last word end in samples, engine name)."""
    rng = np.random.default_rng(seed)
    turns = []
    noises = ["white", "pink", "brown", None]
    slow = [e for e in eng_list if e.name.startswith("piper")]
    fast = [e for e in eng_list if not e.name.startswith("piper")]
    for i in range(n_turns):
        # Piper takes ~50 times as long as the others here: one turn in `piper_every`.
        eng = slow[0] if slow and piper_every and i % piper_every == piper_every - 1 else fast[i % len(fast)]
        k = int(rng.choice([1, 2, 2, 3, 3]))
        cs = clauses(rng, k)
        parts = []
        speaker = int(rng.integers(1 << 31))   # one speaker's settings for every clause of the turn
        ending = str(rng.choice([".", ".", "?", "!"]))
        if whole and k > 1 and rng.random() < whole:
            # Said whole, in one utterance (the engine's own phrasing at each comma), cut at its
            # comma pauses: the bench says its held-out sentences this way too.
            parts = said_whole(eng, cs, ending, speaker) or []
        if not parts:
            for j, c in enumerate(cs):
                text = c + ("," if j < k - 1 else ending)
                a = trimmed(eng.render(text, np.random.default_rng(speaker)))
                parts.append(a.astype(np.float64))
        lead = int(rng.uniform(0.3, 0.8) * SR)
        pieces = [np.zeros(lead)]
        for j, p in enumerate(parts):
            pieces.append(p)
            if j < k - 1:
                pieces.append(np.zeros(int(rng.uniform(150, 800) / 1000 * SR)))
        last_end = sum(len(p) for p in pieces)
        pieces.append(np.zeros(2 * SR))
        clean = np.concatenate(pieces)
        kind = noises[int(rng.integers(len(noises)))]
        x = clean
        if kind is not None:
            snr = float(rng.choice([20, 10, 5]))
            nz = augment.coloured_noise(rng, len(clean), {"white": 0, "pink": 1, "brown": 2}[kind])
            x = augment.mix_noise(clean, nz, snr)
        x = x + rng.normal(0, 1e-3 * (np.abs(clean).max() + 1e-9), len(x))  # nothing is digital silence
        turns.append((augment.to_int16(x, rng, (-25.0, -3.0)), last_end, eng.name))
        if (i + 1) % 100 == 0:
            log(f"rendered {i + 1}/{n_turns}")
    return turns


def said_whole(eng, cs, ending, speaker):
    """The clauses said in one utterance, cut at the engine's pauses at the commas: the k-1 longest
    stretches more than 40 dB under the loudest 10 ms, each at least 80 ms and half as long again
    as any other gap (a stop's closure), else None (the caller says the clauses one by one)."""
    x = trimmed(eng.render(", ".join(cs) + ending, np.random.default_rng(speaker))).astype(np.float64)
    # Quiet runs as (start, end) in 10 ms frames, longest first.
    edges = np.diff(np.r_[1, sounding(x).astype(int), 1])
    runs = sorted(zip(np.nonzero(edges == -1)[0], np.nonzero(edges == 1)[0]), key=lambda r: r[0] - r[1])
    need = len(cs) - 1
    lengths = [e - b for b, e in runs]
    if len(runs) < need or lengths[need - 1] < 8 or (len(runs) > need and lengths[need - 1] < 1.5 * lengths[need]):
        return None
    bounds = [0] + [i * 160 for r in sorted(runs[:need]) for i in r] + [len(x)]
    parts = [x[bounds[i]:bounds[i + 1]] for i in range(0, len(bounds), 2)]
    return parts if all(len(p) > 1600 for p in parts) else None


def write_wav(path, a):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes(a.astype("<i2").tobytes())


def features(turns, bench, tag):
    """Per turn: (frame indices, feature rows) from the Swift bench."""
    d = os.path.join(CACHE, tag)
    os.makedirs(d, exist_ok=True)
    paths = []
    for i, (a, _, _) in enumerate(turns):
        p = os.path.join(d, f"{i:05d}.wav")
        write_wav(p, a)
        paths.append(p)
    lst = os.path.join(d, "list.txt")
    open(lst, "w").write("\n".join(paths) + "\n")
    done = os.path.join(d, "features-v2.jsonl")  # the Swift features of TurnModel version 2
    if os.path.exists(done):
        out = open(done).read()
    else:
        out = subprocess.run([bench, "--turn-features", lst], capture_output=True, text=True, check=True).stdout
        open(done, "w").write(out)
    rows = {}
    for line in out.splitlines():
        o = json.loads(line)
        r = np.array(o["rows"], dtype=np.float64).reshape(-1, 1 + len(FEATURES))
        rows[o["file"]] = (r[:, 0].astype(int), r[:, 1:])
    return [rows[p] for p in paths]


def dataset(turns, feats, ceiling_ms):
    X, Y = [], []
    for (a, last, _), (idx, F) in zip(turns, feats):
        end = (idx + 1) * FRAME  # the frame's end, in samples
        keep = F[:, 0] <= ceiling_ms
        X.append(F[keep])
        Y.append((end[keep] > last).astype(np.float64))
    return np.concatenate(X), np.concatenate(Y)


# Not learnt from (weight 0): how much speech the turn has had. The renders' turns have 1-3 clauses
# and the bench's 2-3, so it would learn the generators' turn lengths, not how a turn ends.
UNUSED = ["speechMs"]


def fit(X, Y, l2=1e-3, iters=60):
    """Logistic regression by Newton's method on standardised features, classes balanced; the
    UNUSED features get weight 0 (mean 0, scale 1)."""
    keep = np.array([f not in UNUSED for f in FEATURES])
    mean, scale, w, b = _fit(X[:, keep], Y, l2, iters)
    M, S, W = np.zeros(len(FEATURES)), np.ones(len(FEATURES)), np.zeros(len(FEATURES))
    M[keep], S[keep], W[keep] = mean, scale, w
    return M, S, W, b


def _fit(X, Y, l2, iters):
    mean, scale = X.mean(axis=0), X.std(axis=0) + 1e-9
    Z = np.hstack([(X - mean) / scale, np.ones((len(X), 1))])
    wpos = 0.5 / max(Y.mean(), 1e-9)
    wneg = 0.5 / max(1 - Y.mean(), 1e-9)
    sw = np.where(Y > 0, wpos, wneg)
    w = np.zeros(Z.shape[1])
    for _ in range(iters):
        p = 1 / (1 + np.exp(-Z @ w))
        g = Z.T @ (sw * (p - Y)) / len(Y) + l2 * np.r_[w[:-1], 0]
        H = (Z * (sw * p * (1 - p))[:, None]).T @ Z / len(Y) + l2 * np.eye(len(w))
        w -= np.linalg.solve(H, g)
    return mean, scale, w[:-1], w[-1]


def simulate(turns, feats, model, threshold, min_ms, window_ms):
    """Per turn: the decision in samples (nil when none within the clip) as the Endpointer makes it."""
    mean, scale, w, b = model
    out = []
    for (a, last, _), (idx, F) in zip(turns, feats):
        p = 1 / (1 + np.exp(-(((F - mean) / scale) @ w + b)))
        hit = np.nonzero(((F[:, 0] >= min_ms) & (p >= threshold)) | (F[:, 0] >= window_ms))[0]
        out.append(None if len(hit) == 0 else (idx[hit[0]] + 1) * FRAME)
    return out


def score(turns, decisions):
    cut = sum(1 for (a, last, _), d in zip(turns, decisions) if d is not None and d < last)
    lat = [(d - last) / 16 for (a, last, _), d in zip(turns, decisions) if d is not None and d >= last]
    return cut / len(turns), (float(np.median(lat)) if lat else float("nan"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=800)
    ap.add_argument("--seed", type=int, default=25)
    ap.add_argument("--window", type=float, default=900, help="the silence window the model sits under (ms)")
    ap.add_argument("--max-cut", type=float, default=0.005, help="early cuts allowed beyond the window alone's, on validation")
    ap.add_argument("--whole", type=float, default=0.0, help="share of turns of 2-3 clauses said whole and cut at the engine's comma pauses")
    ap.add_argument("--piper", type=int, default=0, help="one turn in N from Piper (0: none; slow)")
    ap.add_argument("--bench", default=os.environ.get("TURN_BENCH", os.path.join(ROOT, ".build", "release", "clawvoice-bench")))
    args = ap.parse_args()
    eng_list = engines(args.piper)
    names = [e.name for e in eng_list]
    key = hashlib.sha1(repr((2, args.turns, args.seed, names, args.piper) + ((args.whole,) if args.whole else ())).encode()).hexdigest()[:10]
    t0 = time.time()
    cached = os.path.join(CACHE, key, "turns.npz")
    if os.path.exists(cached):
        z = np.load(cached, allow_pickle=False)
        bounds = np.cumsum(z["lengths"])[:-1]
        turns = list(zip(np.split(z["audio"], bounds), z["last"].tolist(), z["engine"].tolist()))
        log(f"{len(turns)} turns from the cache ({cached})")
    else:
        turns = render(args.turns, args.seed, eng_list, args.piper, args.whole)
        log(f"{len(turns)} turns from {', '.join(names)} in {time.time() - t0:.0f} s")
        os.makedirs(os.path.dirname(cached), exist_ok=True)
        np.savez(cached, audio=np.concatenate([t[0] for t in turns]), lengths=np.array([len(t[0]) for t in turns]),
                 last=np.array([t[1] for t in turns]), engine=np.array([t[2] for t in turns]))
    t0 = time.time()
    if not os.access(args.bench, os.X_OK):
        sys.exit(f"turn_train.py: {args.bench} is missing; build it with: swift build -c release --product clawvoice-bench")
    feats = features(turns, args.bench, key)
    log(f"features in {time.time() - t0:.0f} s")
    # Validation: every fifth turn (all engines in both halves).
    va = [i for i in range(len(turns)) if i % 5 == 4]
    tr = [i for i in range(len(turns)) if i % 5 != 4]
    X, Y = dataset([turns[i] for i in tr], [feats[i] for i in tr], args.window)
    log(f"{len(Y)} pause frames, {Y.mean() * 100:.1f} % after the last word")
    model = fit(X, Y)
    vt, vf = [turns[i] for i in va], [feats[i] for i in va]
    base = score(vt, simulate(vt, vf, model, 2.0, 1e9, args.window))
    log(f"validation, window alone ({args.window:.0f} ms): cut {base[0] * 100:.1f} %, median {base[1]:.0f} ms")
    # Never more turns cut early than the window alone cuts (the renders' pauses reach 800 ms, so the
    # 900 ms window itself cuts a few), nor more than --max-cut beyond that.
    allowed = base[0] + args.max_cut
    best = None
    for min_ms in (100, 140, 180, 220, 260, 300):
        for th in np.arange(0.50, 0.9995, 0.0025):
            cut, med = score(vt, simulate(vt, vf, model, th, min_ms, args.window))
            if cut <= allowed and (best is None or med < best[2]):
                best = (float(th), float(min_ms), med, cut)
    if best is None:
        sys.exit("turn_train.py: no threshold keeps the early cuts under --max-cut")
    for eng in sorted(set(t[2] for t in vt)):
        sel = [i for i, t in enumerate(vt) if t[2] == eng]
        c, m = score([vt[i] for i in sel], simulate([vt[i] for i in sel], [vf[i] for i in sel], model, best[0], best[1], args.window))
        log(f"  validation {eng}: {len(sel)} turns, cut {c * 100:.1f} %, median {m:.0f} ms")
    # How far it carries to a voice it never heard: fit on one engine family, score the other.
    for held in ("espeak", "pico"):
        tr2 = [i for i in tr if not turns[i][2].startswith(held)]
        te2 = [i for i in va if turns[i][2].startswith(held)]
        if tr2 and te2:
            X2, Y2 = dataset([turns[i] for i in tr2], [feats[i] for i in tr2], args.window)
            m2 = fit(X2, Y2)
            c, m = score([turns[i] for i in te2], simulate([turns[i] for i in te2], [feats[i] for i in te2], m2, best[0], best[1], args.window))
            log(f"  {held} left out of the fit, chosen threshold: cut {c * 100:.1f} %, median {m:.0f} ms")
    th, min_ms, med, cut = best
    log(f"chosen: threshold {th:.2f}, at least {min_ms:.0f} ms of pause: validation median {med:.0f} ms, cut {cut * 100:.1f} %")
    mean, scale, w, b = model
    out = {
        "format": "clawvoice-turn-detector", "version": 2,
        "source": "models/training/turn_train.py (make turn-model)",
        "features": FEATURES, "mean": mean.tolist(), "scale": scale.tolist(), "weights": w.tolist(), "bias": float(b),
        "threshold": th, "minimumSilenceMs": min_ms, "trainingEngines": names,
        "validation": {"turns": len(vt), "windowMs": args.window, "medianMs": med, "cutEarly": cut,
                       "windowAloneMedianMs": base[1]},
    }
    with open(os.path.join(MODELS, "turn.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    log("wrote models/turn.json")


if __name__ == "__main__":
    main()
