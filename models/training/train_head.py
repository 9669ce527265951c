"""Train one wake head on the frozen speech-embedding front end (frontend.py): render the trigger,
near misses and ordinary speech with every training engine (voices.py), make more speakers by
tempo, vocal-tract-length warping, microphone colouring, rooms and noise, compute embeddings
once (cached), train a small MLP on 16 embeddings (1.28 s), choose the threshold on a
validation stream of training engines, export models/<stem>.json + .bin and the golden fixture.

    python train_head.py --trigger "hey claw"     (train.sh sets up the venv and calls this)
"""
import argparse
import hashlib
import json
import os
import sys
import time
import zlib

import numpy as np

import frontend
import holdout
import human
import prompts
import real
import render
import voices
from canvas import (FIRST_STEP, HARD, KINDS, STEP_S, STEPS, Featurizer, Noise, cached, canvas_engines, human_negatives,
                    mining_stream, negatives, over_speech, partials, positives, validation_stream)
from render import (DEFAULT_TRIGGERS, file_stem, pool_tag, render_kokoro, render_kokoro_pool, render_mining_pool,
                    render_pool, render_trigger)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
RECIPE_VERSION = 4                                     # the shipped recipe; candidates v5-v8 by their flags (recipe_name)
DATA_VERSION = 1
HEAD_WINDOW = 16                                       # embeddings per head input (1.28 s)
HIDDEN = 64


log = render.log


# --- the head --------------------------------------------------------------------------------

def windows(E, zero, window=HEAD_WINDOW):
    """(n, S, 96) embeddings -> (n, S, window * 96) head inputs, history before the canvas = silence."""
    n, S, D = E.shape
    full = np.concatenate([np.broadcast_to(zero, (n, window - 1, D)), E], axis=1)
    idx = np.arange(S)[:, None] + np.arange(window)[None, :]
    return full[:, idx].reshape(n, S, window * D)


def init_params(key, d_in, hidden):
    import jax
    k1, k2, k3 = jax.random.split(key, 3)
    he = lambda k, i, o: jax.random.normal(k, (o, i)) * np.sqrt(2.0 / i)
    return {"w0": he(k1, d_in, hidden), "b0": np.zeros(hidden, np.float32),
            "w1": he(k2, hidden, hidden), "b1": np.zeros(hidden, np.float32),
            "w2": he(k3, hidden, 1) * 0.1, "b2": np.full(1, -3.0, np.float32)}


def forward(p, x):
    import jax.numpy as jnp
    h = jnp.maximum(x @ p["w0"].T + p["b0"], 0)
    h = jnp.maximum(h @ p["w1"].T + p["b1"], 0)
    return (h @ p["w2"].T + p["b2"])[..., 0]


def confirmed(scores, threshold, k=1):
    """Steps (along the last axis) that end a run of k consecutive scores at or over threshold."""
    over = (np.asarray(scores) >= threshold).astype(np.int32)
    if k <= 1:
        return over > 0
    c = np.cumsum(over, axis=-1)
    run = c.copy()
    run[..., k:] = c[..., k:] - c[..., :-k]
    run[..., :k - 1] = 0
    return run >= k


def detections(scores, threshold, refractory=25, k=1):
    n, last = 0, -10 ** 9
    for s in np.flatnonzero(confirmed(scores, threshold, k)):
        if s - last >= refractory:
            n += 1
            last = s
    return n


class Validation:
    """Validation scores of one head (what train_head.py saves): trigger canvases, other canvases
    and the validation stream, all training engines."""

    def __init__(self, z):
        self.S, lab, m = np.asarray(z["canvas"]), np.asarray(z["labels"]), np.asarray(z["mask"]) > 0
        is_pos = (lab == 1).any(axis=1)
        self.pos, self.pos_ok = self.S[is_pos], ((lab != 0) & m)[is_pos]
        self.neg, self.neg_ok, self.kinds = self.S[~is_pos], m[~is_pos], np.asarray(z["kinds"])[~is_pos]
        self.stream, self.hours = np.asarray(z["stream"]), float(z["stream_seconds"]) / 3600

    def recall(self, t, k=1):
        return float(np.mean((confirmed(self.pos, t, k) & self.pos_ok).any(axis=1))) if len(self.pos) else 0.0

    def canvas_fa(self, t, k=1, kinds=None):
        hit = (confirmed(self.neg, t, k) & self.neg_ok).any(axis=1)
        if kinds is not None:
            hit = hit[np.isin(self.kinds, kinds)]
        return float(np.mean(hit)) if len(hit) else 0.0

    def canvas_fa_by_kind(self, t, k=1):
        hit = (confirmed(self.neg, t, k) & self.neg_ok).any(axis=1)
        return {int(q): float(np.mean(hit[self.kinds == q])) for q in np.unique(self.kinds)}

    def stream_wakes(self, t, k=1):
        return detections(self.stream, t, k=k)


# Threshold rules (validation of training engines only). v1: recipe v1's rule (no wake in the
# 30-minute stream, <= 0.5 % of all other canvases over). v2: at most 0.5 false wakes per hour on
# the 2-hour stream, <= 0.5 % of plain-speech canvases and <= 3 % of near-miss, other-trigger and
# cut-short canvases over.
RULES = {"v1": dict(stream=0.25, all=0.005), "v2": dict(stream=0.5, speech=0.005, near=0.03),
         "stream-only": dict(stream=0.5)}
THRESHOLD_GRID = np.round(np.concatenate([np.arange(0.20, 0.98, 0.01), np.arange(0.98, 0.9991, 0.001)]), 3)


def rule_checks(v, rule, k=1):
    """Each limit of a rule as a test of one threshold (diagnose.py reads them one by one)."""
    r = RULES[rule]
    checks = {"stream": lambda t: v.stream_wakes(t, k) / v.hours <= r["stream"],
              "all": lambda t: v.canvas_fa(t, k) <= r["all"],
              "speech": lambda t: v.canvas_fa(t, k, [3, 4]) <= r["speech"],        # plain speech, noise
              "near": lambda t: v.canvas_fa(t, k, [1, 2, 5]) <= r["near"]}         # near miss, other trigger, cut short
    return {name: c for name, c in checks.items() if name in r}


def choose_threshold(v, rule, k=1):
    checks = rule_checks(v, rule, k).values()
    return next((float(t) for t in THRESHOLD_GRID if all(c(t) for c in checks)), 0.999)


def recipe_name(args, wide_changed):
    """The recipe a head was trained with: v4, or the candidate its flags make (each measured and
    not shipped, models/README.md), with those flags."""
    on = [(v, flag) for v, used, flag in [
        (5, args.hard > 0, f"--hard {args.hard}"),
        (6, args.kokoro > 0, f"--kokoro {args.kokoro}"),
        (7, args.near_weight > 1, f"--near-weight {args.near_weight}"),
        (10, args.over_speech > 0, f"--over-speech {args.over_speech}"),
        (9, args.real_negatives > 0, f"--real-negatives {args.real_negatives}"
                                     + (f" --real-exclude {args.real_exclude}" if args.real_exclude else "")),
        (11, args.window != HEAD_WINDOW, f"--window {args.window}"),
        (12, args.prompt_negatives > 0, f"--prompt-negatives {args.prompt_negatives}"),
        (8, wide_changed, f"--wide-speed {args.wide_speed[0]:g} {args.wide_speed[1]:g} "
                          f"--wide-vtlp {args.wide_vtlp[0]:g} {args.wide_vtlp[1]:g}")] if used]
    return f"models/training/train_head.py v{max((v for v, _ in on), default=RECIPE_VERSION)}" + "".join(f" ({f})" for _, f in on)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trigger", required=True)
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--hidden", type=int, default=HIDDEN)
    ap.add_argument("--window", type=int, default=HEAD_WINDOW, help="embeddings per head input (80 ms each; candidate "
                    "recipe v11: a shorter window for a one-syllable word, so less of what came before it is heard)")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--positives", type=int, default=3000, help="trigger canvases")
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies every data count (smoke tests)")
    ap.add_argument("--negatives-scale", type=float, default=1.0,
                    help="multiplies this training's own negatives and validation stream (the stop word, on a busy machine)")
    ap.add_argument("--models-dir", default=os.path.join(REPO, "models"))
    ap.add_argument("--fixtures-dir", default=os.path.join(REPO, "Tests", "WakeWordTests", "Fixtures"))
    ap.add_argument("--cache-dir", default=os.path.join(HERE, ".cache"))
    ap.add_argument("--wide", type=int, default=3000,
                    help="extra trigger canvases with wider speaker changes (speed 0.82-1.22, VTLP 0.84-1.18)")
    ap.add_argument("--wide-speed", type=float, nargs=2, default=(0.82, 1.22), metavar=("LO", "HI"),
                    help="the wide canvases' speed range (candidate recipe v8: 0.75 1.33)")
    ap.add_argument("--wide-vtlp", type=float, nargs=2, default=(0.84, 1.18), metavar=("LO", "HI"),
                    help="the wide canvases' VTLP range (candidate recipe v8: 0.78 1.25)")
    ap.add_argument("--hard", type=int, default=0, help="extra trigger canvases at 0-12 dB SNR, rooms on 80 %% with "
                    "RT60 0.3-1.0 s (candidate recipe v5: 1500, measured and not shipped, models/README.md; 0: recipe v4)")
    ap.add_argument("--human", type=int, default=400, help="canvases of recorded human speech (negatives)")
    ap.add_argument("--real-negatives", type=int, default=0,
                    help="candidate recipe v9: canvases of real people saying OTHER words (real.py: the training half "
                         "of ../shared/wake-real, never the trigger's own word), as negatives, training only")
    ap.add_argument("--real-exclude", default="", help="with --real-negatives: comma-separated words whose real clips "
                    "are never used (the real-speech yardstick leaves out alexa and jarvis)")
    ap.add_argument("--prompt-negatives", type=int, default=0,
                    help="canvases of recorded voice prompts as negatives, training only (candidate recipe v12): the "
                         "training half of prompts.py's five Asterisk sets; real_negatives.py --half eval scores the other")
    ap.add_argument("--kokoro", type=int, default=0, help="extra trigger canvases spoken by Kokoro's mixed speakers, "
                    "with Kokoro's near misses, cut-short triggers and speech as negatives, training only (candidate "
                    "recipe v6: 1500; 0: none)")
    ap.add_argument("--over-speech", type=int, default=0, help="extra trigger canvases said over the node's own speech "
                    "(espeak-ng, as the echo canceller leaves it), and half as many of that speech alone (the stop word: issue 22)")
    ap.add_argument("--near-weight", type=int, default=1, help="train on each near-miss canvas this many times "
                    "(candidate recipe v7 for openclaw, whose threshold rule v2's near-miss limit sets: 3; 1: recipe v4)")
    ap.add_argument("--val-minutes", type=int, default=120, help="length of the validation stream")
    ap.add_argument("--rule", default="v2", choices=sorted(RULES), help="threshold rule (validation only)")
    ap.add_argument("--consecutive", type=int, default=2, help="steps in a row over the threshold for a wake")
    ap.add_argument("--rescore", action="store_true",
                    help="no training: score the validation data with the existing models/<stem>.json head")
    ap.add_argument("--hold-out", default="", help="leave this engine (name prefix: espeak, piper, pico) out of the "
                    "trigger canvases and validate on it; no head is written")
    ap.add_argument("--hold-out-negatives", action="store_true", help="with --hold-out: leave the engine out "
                    "entirely (its near-miss, speech, cut-short and other-trigger canvases too, holdout.py) and validate on "
                    "all of them and on its part of the stream (calibrate.py reads them)")
    ap.add_argument("--stop-after", type=int, default=3,
                    help="stop after this many epochs of the --epochs learning-rate schedule (0: run it all)")
    ap.add_argument("--dropout", type=float, default=0.3, help="input dropout")
    ap.add_argument("--noise", type=float, default=1.0, help="Gaussian noise on the normalised inputs")
    ap.add_argument("--shift", type=float, default=1.0, help="one Gaussian offset per canvas on the normalised embeddings")
    ap.add_argument("--l2", type=float, default=1e-4, help="weight decay of the hidden layers")
    ap.add_argument("--mine-hours", type=float, default=0, help="hours of training sentences to mine hard negatives from (0: none)")
    ap.add_argument("--mine-threshold", type=float, default=0.2, help="windows scoring at least this are mined")
    ap.add_argument("--mine-weight", type=int, default=2, help="each mined window is trained on this many times")
    ap.add_argument("--mine-inset-weight", type=int, default=2, help="training negatives scoring over --mine-threshold "
                    "are trained on this many times (1: once, as before)")
    ap.add_argument("--mine-source", default="pool", choices=["pool", "fresh"], help="mine the training pool's sentences "
                    "or fresh ones no canvas holds")
    ap.add_argument("--mine-rounds", type=int, default=1, help="train, mine, retrain from scratch: this many times")
    ap.add_argument("--members", type=int, default=3, help="heads in the ensemble (logits averaged; recipe v4: 3, v3: 1)")
    ap.add_argument("--member", type=int, default=0, help="ensemble member: another initialisation, dropout and batch "
                    "order on the same data and validation split (0: the single head's)")
    ap.add_argument("--tag", default="", help="name of this run's validation-score file (.cache/valscores-<stem><tag>.npz)")
    args = ap.parse_args()

    import jax
    import jax.numpy as jnp

    t_start = time.time()
    trigger = args.trigger.strip()
    stem = file_stem(trigger)
    seed = args.seed + zlib.crc32(stem.encode()) % 100000
    os.makedirs(args.models_dir, exist_ok=True)   # --models-dir may name a new directory
    log(f"training wake head for {trigger!r} -> {os.path.join(args.models_dir, stem)}.json (seed {seed})")
    fe_path = os.path.join(args.models_dir, "frontend.json")
    if not os.path.exists(fe_path):
        frontend.export(args.models_dir)
        log("exported the front end to models/frontend.json + frontend.bin")
    fe = frontend.FrontEnd(args.models_dir)
    fe_sha = json.load(open(fe_path))["weightsSHA256"]
    zero = fe.embed_mels(np.repeat(fe.zero_mel[None], frontend.EMB_FRAMES, axis=0))[0].astype(np.float16)

    # --- rendering (cached per engine) ------------------------------------------------------
    kproc = None
    if args.kokoro > 0:      # Kokoro renders in a second process beside the other engines (2 cores)
        import subprocess
        ktrig = [trigger] + ([t for t in DEFAULT_TRIGGERS if t != trigger.lower()] if trigger.lower() in DEFAULT_TRIGGERS else [])
        kproc = subprocess.Popen([sys.executable, "-u", os.path.join(HERE, "render.py"), "--kokoro"]
                                 + [a for t in ktrig for a in ("--trigger", t)])
        log(f"kokoro: rendering in the background (pid {kproc.pid})")
    engines = voices.engines()
    pool, vpool, clips, near, pool_of = [], [], {}, [], {}
    tag = pool_tag(trigger)
    if tag:
        log(f"{trigger!r} occurs in the shared sentences: they are left out, and this training builds its own "
            f"negatives and validation stream (caches *{tag})")
    for eng in engines:
        pool_of[eng.name] = render_pool(eng, trigger=trigger)
        pool += pool_of[eng.name]
        vpool += render_pool(eng, 400, "val", trigger=trigger)
        own, nm = render_trigger(eng, trigger)
        clips[eng.name] = own
        near += nm
        log(f"{eng.name}: {len(own)} triggers, {len(near)} near misses")
    all_clips = [c for v in clips.values() for c in v]
    log(f"rendered: {len(all_clips)} triggers, {len(near)} near misses, {len(pool)} sentences "
        f"({sum(map(len, pool)) / 16000 / 60:.0f} min), {len(vpool)} validation sentences")

    # --- embeddings (cached) ---------------------------------------------------------------
    sc = args.scale
    key = f"v{DATA_VERSION}-s{sc:g}"
    ck = lambda name: os.path.join(args.cache_dir, "examples", f"{name}-{key}.npz")
    feat = Featurizer(fe, np.random.default_rng(seed + 9))
    noise = Noise(np.random.default_rng(3), pool)
    r = np.random.default_rng(seed)
    parts = []
    stem_idx = zlib.crc32(stem.encode()) % 3
    # This trigger's own canvases first (several trainings can run side by side).
    parts.append(cached(ck(f"trigger-{stem}-p{args.positives}"), lambda: positives(feat, r, all_clips, pool, noise, int(args.positives * sc))))
    if args.hold_out:        # which engine spoke each trigger canvas (leave-one-engine-out validation)
        eng_names = list(clips)
        held_ids = [i for i, e in enumerate(eng_names) if e.startswith(args.hold_out)]
        if not held_ids:
            raise SystemExit(f"--hold-out {args.hold_out!r} names no training engine ({', '.join(eng_names)})")
        eng_parts = {0: canvas_engines(ck(f"trigger-{stem}-p{args.positives}"), clips, np.random.default_rng(seed),
                                       pool, noise, int(args.positives * sc), wide=False)}
    ns = args.negatives_scale
    nt = "" if ns == 1 else f"-n{ns:g}"
    parts.append(cached(ck(f"partial-{stem}"), lambda: partials(feat, r, all_clips, pool, noise, int(600 * sc))))
    whole = args.hold_out and args.hold_out_negatives
    if whole:                # leave the engine out entirely: the engine of every negative canvas too (holdout.py)
        if trigger.lower() not in DEFAULT_TRIGGERS or sc != 1 or ns != 1 or tag:
            raise SystemExit("--hold-out-negatives: only for the default triggers at full scale")
        pools_by_engine = [render_pool(eng, trigger=trigger) for eng in engines]
        warps = Featurizer(fe, np.random.default_rng(0)).warps
        eng_parts[len(parts) - 1] = holdout.partials_engines(ck(f"partial-{stem}"), fe, warps, clips, pools_by_engine, seed,
                                                             int(args.positives * sc), int(600 * sc))
    if trigger.lower() not in DEFAULT_TRIGGERS:
        parts.append(cached(ck(f"near-{stem}{nt}"), lambda: negatives(feat, r, near, pool, noise,
                                                                  {"near": int(1500 * sc * ns), "speech": 0, "noise": 0})))
    # Trigger-independent negatives: speech, noise and near misses of every default trigger.
    # In three parts, so that trainings running side by side build them in parallel.
    order = [(stem_idx + k) % 3 for k in range(3)]
    for part in order:       # build the parts nobody is building yet, then wait for the rest
        if not (os.path.exists(ck(f"negatives{part}{tag}{nt}")) or os.path.exists(ck(f"negatives{part}{tag}{nt}") + ".building")):
            order = [part] + [q for q in order if q != part]
            break
    for part in order:
        parts.append(cached(ck(f"negatives{part}{tag}{nt}"), lambda part=part: negatives(
            feat, np.random.default_rng(101 + part), near, pool, noise,
            {k: int(v * sc * ns) for k, v in dict(near=1000, speech=1350, noise=100).items()})))
        if whole:
            near_lists = [[render_trigger(eng, t)[1] for eng in engines]
                          for t in [trigger] + [t for t in DEFAULT_TRIGGERS if t != trigger.lower()]]
            eng_parts[len(parts) - 1] = holdout.negatives_engines(ck(f"negatives{part}"), fe, warps, pools_by_engine, near_lists,
                                                                  101 + part, dict(near=1000, speech=1350, noise=100))
    # The other default triggers are negatives: their trigger canvases (another training's, or
    # made here) with the labels cleared.
    for t in DEFAULT_TRIGGERS:
        if file_stem(t) == stem:
            continue
        theirs = cached(ck(f"trigger-{file_stem(t)}-p{args.positives}"), None, wait_only=True)
        if theirs is None:
            oc = [c for eng in engines for c in render_trigger(eng, t)[0]]
            theirs = cached(ck(f"other-{file_stem(t)}"), lambda oc=oc: positives(feat, np.random.default_rng(zlib.crc32(t.encode())),
                                                                               oc, pool, noise, int(500 * sc), kind=2))
        pick = np.random.default_rng(zlib.crc32(t.encode()) + 1).permutation(len(theirs[0]))[:int(800 * sc)]
        parts.append((theirs[0][pick], np.zeros_like(theirs[1][pick]), np.full(len(pick), 2, np.int8)))
        if whole:            # their engines, as their own leave-one-engine-out runs found them
            their_clips = {eng.name: render_trigger(eng, t)[0] for eng in engines}
            their_seed = args.seed + zlib.crc32(file_stem(t).encode()) % 100000
            eng_parts[len(parts) - 1] = canvas_engines(ck(f"trigger-{file_stem(t)}-p{args.positives}"), their_clips,
                                                       np.random.default_rng(their_seed), pool, noise, int(args.positives * sc),
                                                       wide=False)[pick]
    n_orig = sum(len(p[0]) for p in parts)          # the validation canvases are drawn from these only
    wspan = (int(round(100 / args.wide_speed[1])), int(round(100 / args.wide_speed[0])) + 1)
    wtag = "" if (tuple(args.wide_speed), tuple(args.wide_vtlp)) == ((0.82, 1.22), (0.84, 1.18)) else \
        f"-s{args.wide_speed[0]:g}-{args.wide_speed[1]:g}-w{args.wide_vtlp[0]:g}-{args.wide_vtlp[1]:g}"
    if args.wide > 0:
        feat_wide = Featurizer(fe, np.random.default_rng(seed + 19), span=tuple(args.wide_vtlp), n=13, p=0.85)
        parts.append(cached(ck(f"wide-{stem}-p{args.wide}{wtag}"), lambda: positives(
            feat_wide, np.random.default_rng(seed + 17), all_clips, pool, noise, int(args.wide * sc), wide=wspan)))
        if args.hold_out:
            eng_parts[len(parts) - 1] = canvas_engines(ck(f"wide-{stem}-p{args.wide}{wtag}"), clips, np.random.default_rng(seed + 17),
                                                       pool, noise, int(args.wide * sc), wide=wspan)
    if args.hard > 0:
        feat_hard = Featurizer(fe, np.random.default_rng(seed + 29))
        parts.append(cached(ck(f"hard-{stem}-p{args.hard}"), lambda: positives(
            feat_hard, np.random.default_rng(seed + 27), all_clips, pool, noise, int(args.hard * sc), cond=HARD)))
        if args.hold_out:
            eng_parts[len(parts) - 1] = canvas_engines(ck(f"hard-{stem}-p{args.hard}"), clips, np.random.default_rng(seed + 27),
                                                       pool, noise, int(args.hard * sc), wide=False, cond=HARD)
    if args.over_speech > 0:  # the stop word's condition: said over the node's own voice (espeak-ng)
        feat_os = Featurizer(fe, np.random.default_rng(seed + 49))
        parts.append(cached(ck(f"overspeech-{stem}-p{args.over_speech}{tag}"), lambda: over_speech(
            feat_os, np.random.default_rng(seed + 47), all_clips, pool_of["espeak-ng"], pool, noise,
            int(args.over_speech * sc), int(args.over_speech * sc) // 2)))
    if args.human > 0:
        recs = human.recordings(args.cache_dir, log)
        if recs:
            log(f"human negatives: {len(recs)} recordings, {sum(len(a) for _, a in recs) / 16000:.0f} s")
            parts.append(cached(ck(f"human{args.human}"), lambda: human_negatives(
                feat, np.random.default_rng(303), recs, noise, int(args.human * sc))))
    if args.real_negatives > 0:   # candidate recipe v9: real people saying other words, training only
        excl = [w.strip() for w in args.real_exclude.split(",") if w.strip()]
        recs = real.training_negatives(stem, os.path.join(args.cache_dir, "real"), excl)
        if not recs:
            raise SystemExit(f"--real-negatives: no real clips left for {trigger!r} (excluded: {excl})")
        words = sorted({n.split("/")[0] for n, _ in recs})
        log(f"real negatives: {len(recs)} clips of {', '.join(words)} ({sum(len(a) for _, a in recs) / 3600 / 16000:.2f} h)")
        parts.append(cached(ck(f"real-{'-'.join(words)}-{args.real_negatives}"), lambda: human_negatives(
            feat, np.random.default_rng(313), recs, noise, int(args.real_negatives * sc))))
    if args.prompt_negatives > 0:  # candidate recipe v12: recorded voice prompts, their training half only
        from scipy.signal import resample_poly
        recs = []
        for key in prompts.SETS:
            for name, path in prompts.prompts(key, "train")[0]:
                data = prompts.read(path)
                if data is not None:      # 8 kHz -> the front end's 16 kHz
                    recs.append((f"{key}/{name}", np.clip(resample_poly(np.frombuffer(data, "<i2").astype(np.float64), 2, 1),
                                                           -32768, 32767).astype(np.int16)))
        log(f"prompt negatives: {len(recs)} prompts of the training half, {sum(len(a) for _, a in recs) / 16000 / 3600:.2f} h")
        parts.append(cached(ck(f"prompts-{args.prompt_negatives}"), lambda: human_negatives(
            feat, np.random.default_rng(323), recs, noise, int(args.prompt_negatives * sc))))
    if args.kokoro > 0:      # candidate recipe v6: Kokoro's speakers, training only (never validation)
        if kproc.wait() != 0:
            raise SystemExit(f"kokoro: rendering failed (exit {kproc.returncode}); see the lines above")
        keng = voices.kokoro_engine()
        kpos, knear = render_kokoro(keng, trigger)
        kpool = render_kokoro_pool(keng, trigger)
        log(f"kokoro: {len(kpos)} triggers, {len(knear)} near misses, {len(kpool)} sentences")
        feat_k = Featurizer(fe, np.random.default_rng(seed + 39))
        nk = int(args.kokoro * sc)
        # All-Kokoro canvases (its own sentences around its triggers), so a voice is never the cue.
        parts.append(cached(ck(f"kokoro-{stem}-p{args.kokoro}"), lambda: positives(
            feat_k, np.random.default_rng(seed + 37), kpos, kpool, noise, nk)))
        parts.append(cached(ck(f"kokoro-partial-{stem}"), lambda: partials(
            feat_k, np.random.default_rng(seed + 38), kpos, kpool, noise, nk // 6)))
        kshared = trigger.lower() in DEFAULT_TRIGGERS
        parts.append(cached(ck("kokoro-neg" + ("" if kshared else f"-{stem}") + tag), lambda: negatives(
            Featurizer(fe, np.random.default_rng(409)), np.random.default_rng(408), knear, kpool, noise,
            {"near": int(800 * sc), "speech": int(800 * sc), "noise": 0})))
        if kshared:          # the other default triggers in Kokoro's voices (a new phrase skips these: 16 min to render)
            for t in DEFAULT_TRIGGERS:
                if file_stem(t) != stem:
                    theirs = render_kokoro(keng, t)[0]
                    parts.append(cached(ck(f"kokoro-other-{file_stem(t)}"), lambda theirs=theirs, t=t: positives(
                        Featurizer(fe, np.random.default_rng(zlib.crc32(t.encode()) + 7)), np.random.default_rng(zlib.crc32(t.encode()) + 8),
                        theirs, kpool, noise, int(300 * sc), kind=2)))
    E = np.concatenate([p[0] for p in parts])
    engine_of = np.full(len(E), -1, np.int16)          # -1: not a trigger canvas whose engine is known
    if args.hold_out:
        offs = np.concatenate([[0], np.cumsum([len(p[0]) for p in parts])])
        for i, lab in eng_parts.items():
            engine_of[offs[i]:offs[i + 1]] = lab
    Y = np.concatenate([p[1] for p in parts])
    K = np.concatenate([p[2] for p in parts])
    log(f"{len(E)} canvases of {STEPS} scores, {int((Y == 1).any(axis=1).sum())} with the trigger "
        f"({(time.time() - t_start) / 60:.1f} min so far)")
    vrng = np.random.default_rng(seed + 1)
    vname = ("valstream" if args.val_minutes == 30 else f"valstream{args.val_minutes}m") + f"{tag}{nt}"
    vE, v_seconds = cached(ck(vname), lambda: (lambda e, s: (e[None], np.array([[s]]), np.zeros(1, np.int8)))(
        *validation_stream(feat, vrng, vpool, noise, args.val_minutes * 60 * sc * ns)))[:2]
    vE, v_seconds = vE[0], float(v_seconds[0, 0])
    log(f"validation stream: {v_seconds / 60:.1f} min of training-engine speech never trained on")
    stream_engine = None
    if whole:
        vpools_by_engine = [render_pool(eng, 400, "val", trigger=trigger) for eng in engines]
        seeds = [args.seed + zlib.crc32(file_stem(t).encode()) % 100000 + 1 for t in DEFAULT_TRIGGERS]
        seeds.sort(key=lambda s_: s_ != seed + 1)
        stream_engine = holdout.stream_engines(ck(vname), fe, pools_by_engine, vpools_by_engine, seeds, args.val_minutes * 60)
        log("validation stream by engine: " + ", ".join(f"{e} {np.mean(stream_engine == i) * v_seconds / 60:.1f} min"
                                                       for i, e in enumerate(eng_names)))
    if args.mine_hours > 0:   # trigger-independent, shared by all trainings
        if args.mine_source == "fresh":       # sentences no canvas holds (rendered once, cached)
            mpool = [c for eng in engines for c in render_mining_pool(eng, trigger=trigger)]
            mname = f"minestream-fresh{args.mine_hours:g}h{tag}{nt}"
        else:                                 # the training pool's own sentences (what recipe v4's first try used)
            mpool, mname = pool, f"minestream{args.mine_hours:g}h{tag}{nt}"
        mE = cached(ck(mname), lambda: mining_stream(
            Featurizer(fe, np.random.default_rng(405)), np.random.default_rng(404), mpool, noise, args.mine_hours * 3600 * sc * ns))[0]
        log(f"mining stream: {len(mE) * mE.shape[1] * STEP_S / 3600:.1f} h of {args.mine_source} training-engine sentences (hard-negative source)")

    # --- normalisation and split -----------------------------------------------------------
    flat = E[:, ::4].reshape(-1, frontend.EMB_DIM).astype(np.float64)
    mean, std = flat.mean(axis=0), np.maximum(flat.std(axis=0), 1e-3)
    mean_w, std_w = np.tile(mean, args.window).astype(np.float32), np.tile(std, args.window).astype(np.float32)
    rng = np.random.default_rng(seed + 2)
    perm = rng.permutation(n_orig)
    n_val = n_orig // 20
    val_idx, tr_idx = perm[:n_val], np.concatenate([perm[n_val:], np.arange(n_orig, len(E))])
    if args.hold_out:
        # Leave one engine out: none of its trigger canvases (plain or wide) is trained on; the
        # validation's trigger canvases are all of its plain ones and nothing else, so recall
        # measures a voice the head never heard. Negatives and the stream are as usual.
        held = np.isin(engine_of, held_ids)
        has_pos = (Y == 1).any(axis=1)
        val_idx = np.concatenate([val_idx[~has_pos[val_idx]], np.flatnonzero(held[:n_orig] & has_pos[:n_orig])])
        if whole:            # and every one of its negative canvases (none is trained on)
            extra_neg = np.setdiff1d(np.flatnonzero(held[:n_orig] & ~has_pos[:n_orig]), val_idx)
            val_idx = np.concatenate([val_idx, extra_neg])
            log(f"leave-one-engine-out entirely: {int((held & ~has_pos).sum())} of its negative canvases held out too")
        tr_idx = tr_idx[~held[tr_idx]]
        log(f"leave-one-engine-out: {', '.join(eng_names[i] for i in held_ids)} held out; training on "
            f"{int(has_pos[tr_idx].sum())} trigger canvases, validating on {int(held[:n_orig].sum())} of the held-out engine")
    if args.near_weight > 1:  # near-miss canvases (kind 1) trained on more often, validation untouched
        tr_idx = np.concatenate([tr_idx] + [tr_idx[K[tr_idx] == 1]] * (args.near_weight - 1))
        log(f"near-miss canvases trained {args.near_weight} times: {int((K[tr_idx] == 1).sum())} of {len(tr_idx)} training canvases")
    start_canvas = rng.random(len(E)) < 0.1             # these also learn from the stream-start scores
    step_ok = np.arange(STEPS)[None, :] >= FIRST_STEP
    mask_all = (step_ok | start_canvas[:, None]).astype(np.float32)

    def inputs(idx):
        return (windows(E[idx], zero, args.window).astype(np.float32) - mean_w) / std_w

    member_seed = lambda m: seed + 7919 * m            # member 0: exactly the single head's draws
    params = init_params(jax.random.PRNGKey(member_seed(args.member)), args.window * frontend.EMB_DIM, args.hidden)

    def loss_fn(p, x, y, m):
        logits = forward(p, x)
        valid = (y >= 0) * m
        pos = (y == 1).astype(jnp.float32)
        w = valid * (1.0 + 2.0 * pos)
        bce = jnp.maximum(logits, 0) - logits * pos + jnp.log1p(jnp.exp(-jnp.abs(logits)))
        frame = jnp.sum(w * bce) / jnp.sum(w)
        negm = (y == 0) * m
        worst = jnp.max(jnp.where(negm > 0, logits, -30.0), axis=1)
        has = (jnp.sum(negm, axis=1) > 0).astype(jnp.float32)
        worst_l = jnp.sum(has * jax.nn.softplus(worst)) / jnp.maximum(jnp.sum(has), 1.0)
        posm = pos * m
        best = jnp.max(jnp.where(posm > 0, logits, -30.0), axis=1)
        hasp = (jnp.sum(posm, axis=1) > 0).astype(jnp.float32)
        best_l = jnp.sum(hasp * jax.nn.softplus(-best)) / jnp.maximum(jnp.sum(hasp), 1.0)
        l2 = args.l2 * (jnp.sum(p["w0"] ** 2) + jnp.sum(p["w1"] ** 2))
        return frame + 2.0 * worst_l + 0.5 * best_l + l2

    @jax.jit
    def train_step(p, m1, v1, t, lr, x, y, m, dkey):
        k1, k2, k3 = jax.random.split(dkey, 3)
        if args.shift > 0:   # one offset per canvas, the same for every embedding of the window: a voice or channel the data lacks
            off = jax.random.normal(k2, (x.shape[0], 1, frontend.EMB_DIM)) * args.shift
            x = x + jnp.tile(off, (1, 1, args.window))
        if args.noise > 0:   # and independent noise on every value
            x = x + jax.random.normal(k3, x.shape) * args.noise
        x = x * (jax.random.uniform(k1, x.shape) > args.dropout) / (1 - args.dropout)      # dropout on the input
        loss, g = jax.value_and_grad(loss_fn)(p, x, y, m)
        b1, b2 = 0.9, 0.999
        m1 = jax.tree_util.tree_map(lambda a, b: b1 * a + (1 - b1) * b, m1, g)
        v1 = jax.tree_util.tree_map(lambda a, b: b2 * a + (1 - b2) * b * b, v1, g)
        p = jax.tree_util.tree_map(lambda a, b, c: a - lr * (b / (1 - b1 ** t)) / (jnp.sqrt(c / (1 - b2 ** t)) + 1e-8), p, m1, v1)
        return p, m1, v1, loss

    # An ensemble (a list of heads) scores with the mean of its members' logits, as WakeHead does.
    predict = jax.jit(lambda p, x: jax.nn.sigmoid(sum(forward(q, x) for q in p) / len(p) if isinstance(p, list) else forward(p, x)))
    vwin = ((windows(vE[None], zero, args.window)[0].astype(np.float32) - mean_w) / std_w)
    v_hours = v_seconds / 3600

    def validate(p):
        sc_ = np.concatenate([np.asarray(predict(p, inputs(val_idx[i:i + 512]))) for i in range(0, len(val_idx), 512)])
        lab, m = Y[val_idx], mask_all[val_idx] > 0
        is_pos = (lab == 1).any(axis=1)
        pos_max = np.where((lab != 0) & m, sc_, 0).max(axis=1)[is_pos]
        neg_max = np.where(m, sc_, 0).max(axis=1)[~is_pos]
        stream = np.asarray(predict(p, vwin))
        validate.canvas, validate.stream = sc_, stream
        kinds = K[val_idx][~is_pos]
        validate.by_kind = "  ".join(f"{KINDS[k]} {np.mean(neg_max[kinds == k] >= 0.5) * 100:.1f}%"
                                     for k in range(1, len(KINDS)) if (kinds == k).any())
        return pos_max, neg_max, stream

    def train(params, tr_idx, label="", member=args.member):
        ms = member_seed(member)
        member_rng = rng if member == 0 else np.random.default_rng(ms + 2)
        m1 = jax.tree_util.tree_map(jnp.zeros_like, params)
        v1 = jax.tree_util.tree_map(jnp.zeros_like, params)
        spe = len(tr_idx) // args.batch
        total = spe * args.epochs
        t, t_train = 0, time.time()
        dkey = jax.random.PRNGKey(ms + 5)
        n_epochs = min(args.stop_after or args.epochs, args.epochs)
        for epoch in range(args.epochs):
            order = member_rng.permutation(tr_idx)
            losses = []
            for i in range(spe):
                sel = np.sort(order[i * args.batch:(i + 1) * args.batch])
                t += 1
                lr = 1e-3 * 0.5 * (1 + np.cos(np.pi * t / total)) + 2e-5
                dkey, sub = jax.random.split(dkey)
                params, m1, v1, loss = train_step(params, m1, v1, t, lr, inputs(sel), Y[sel], mask_all[sel], sub)
                losses.append(float(loss))
            pos_max, neg_max, ss = validate(params)
            el = time.time() - t_train
            log(f"{label}epoch {epoch + 1}/{n_epochs}  loss {np.mean(losses):.4f}  val recall@0.5 {np.mean(pos_max >= 0.5) * 100:.1f}%  "
                f"window FA@0.5 {np.mean(neg_max >= 0.5) * 100:.2f}%  stream wakes@0.5 {detections(ss, 0.5)}  "
                f"({el:.0f} s, ETA {el / (epoch + 1) * (n_epochs - epoch - 1):.0f} s)")
            log(f"    false accepts@0.5 by kind: {validate.by_kind}")
            ve = Validation({"canvas": validate.canvas, "labels": Y[val_idx], "mask": mask_all[val_idx], "kinds": K[val_idx],
                             "stream": ss, "stream_seconds": v_seconds})
            te = choose_threshold(ve, args.rule, args.consecutive)
            what = f"held-out {args.hold_out}" if args.hold_out else "validation"
            log(f"    {what} after {label}epoch {epoch + 1}: recall {ve.recall(te, args.consecutive) * 100:.1f}% "
                f"at rule {args.rule}'s threshold {te:.3f} (stream wakes {ve.stream_wakes(te, args.consecutive)})")
            if args.stop_after and epoch + 1 >= args.stop_after:
                log(f"stopping after epoch {epoch + 1} of the {args.epochs}-epoch schedule (--stop-after)")
                break
        return params

    def mine(p):
        """Hard negatives for the next round: windows of the mining stream where head p scores
        at least --mine-threshold (one canvas per peak, peaks 1 s apart at least, the peak
        18-37 steps in so the head sees its full history), and the training negatives whose
        best score reaches it (trained on once more)."""
        mrng = np.random.default_rng(seed + 41)
        thr, canv = args.mine_threshold, []
        for i in range(0, len(mE), 8):
            sc_ = np.asarray(predict(p, (windows(mE[i:i + 8], zero, args.window).astype(np.float32) - mean_w) / std_w))
            for j, row in enumerate(sc_):
                row = row.copy()
                row[:args.window] = 0
                for k in np.argsort(-row):
                    if row[k] < thr:
                        break
                    if row[k] < 0:
                        continue
                    st = int(np.clip(k - mrng.integers(18, 38), 0, row.shape[0] - STEPS))
                    canv.append(mE[i + j, st:st + STEPS])
                    row[max(0, k - 12):k + 13] = -1
        negs = tr_idx[~(Y[tr_idx] == 1).any(axis=1) & (K[tr_idx] != 7)]
        best = np.concatenate([np.where(mask_all[negs[i:i + 512]] > 0, np.asarray(predict(p, inputs(negs[i:i + 512]))), 0).max(axis=1)
                               for i in range(0, len(negs), 512)])
        hard = negs[best >= thr]
        log(f"mined: {len(canv)} windows of the {len(mE) * mE.shape[1] * STEP_S / 3600:.1f} h mining stream and "
            f"{len(hard)} of {len(negs)} training negatives score >= {thr:g} ("
            + ", ".join(f"{KINDS[q]} {int((K[hard] == q).sum())}" for q in np.unique(K[hard])) + ")")
        return (np.stack(canv) if canv else np.zeros((0, STEPS, frontend.EMB_DIM), np.float16)), hard

    mined_total = 0
    if args.rescore:
        man = json.load(open(os.path.join(args.models_dir, f"{stem}.json")))
        wts = np.fromfile(os.path.join(args.models_dir, man["weights"]), "<f4")
        ten = {e["name"]: wts[e["offset"]:e["offset"] + int(np.prod(e["shape"]))].reshape(e["shape"]) for e in man["tensors"]}
        w0 = ten["dense0.weight"].astype(np.float64) * std_w[None, :]      # unfold the normalisation
        params = {"w0": w0.astype(np.float32), "b0": (ten["dense0.bias"] + w0 @ (mean_w / std_w)).astype(np.float32),
                  "w1": ten["dense1.weight"], "b1": ten["dense1.bias"], "w2": ten["dense2.weight"], "b2": ten["dense2.bias"]}
        args.epochs = 0
        log(f"rescoring the existing head models/{stem}.json (threshold {man['threshold']})")
    else:
        rounds = args.mine_rounds if args.mine_hours > 0 else 0
        params = train(params, tr_idx, "round 1 " if rounds else "")
        for rnd in range(rounds):
            newE, hard = mine(params)
            n0 = len(E)
            E = np.concatenate([E, newE.astype(E.dtype)])
            Y = np.concatenate([Y, np.zeros((len(newE), STEPS), Y.dtype)])
            K = np.concatenate([K, np.full(len(newE), 7, K.dtype)])
            mask_all = np.concatenate([mask_all, np.broadcast_to(step_ok, (len(newE), STEPS)).astype(np.float32)])
            mined_total += len(newE)
            w = args.mine_weight
            wi = args.mine_inset_weight
            tr_idx = np.concatenate([tr_idx, np.repeat(np.arange(n0, len(E)), w), np.repeat(hard, wi - 1)])
            log(f"round {rnd + 2}: retraining from scratch on {len(tr_idx)} canvases ({len(newE)} mined windows x{w}, "
                f"{len(hard)} hard training negatives x{wi})")
            params = train(init_params(jax.random.PRNGKey(member_seed(args.member)), args.window * frontend.EMB_DIM, args.hidden),
                           tr_idx, f"round {rnd + 2} ")
        if args.members > 1:   # more heads on the same data, other initialisations and draws; logits averaged
            params = [params] + [train(init_params(jax.random.PRNGKey(member_seed(args.member + m)), args.window * frontend.EMB_DIM,
                                                   args.hidden), tr_idx, f"member {m + 1}/{args.members} ", member=args.member + m)
                                 for m in range(1, args.members)]

    # --- threshold: validation of training engines only --------------------------------------
    pos_max, neg_max, ss = validate(params)
    vpath = os.path.join(args.cache_dir, f"valscores-{stem}{'-' + args.tag if args.tag else ''}.npz")
    np.savez(vpath, canvas=validate.canvas, labels=Y[val_idx], mask=mask_all[val_idx], kinds=K[val_idx],
             stream=ss, stream_seconds=v_seconds,
             **(dict(engines=engine_of[val_idx], stream_engines=stream_engine, held_out=np.array(held_ids)) if whole else {}))
    log(f"validation scores in {vpath}")
    if args.rescore or args.hold_out:
        if args.hold_out:
            v = Validation(dict(np.load(vpath)))
            k = args.consecutive
            thr = choose_threshold(v, args.rule, k)
            log(f"held-out {args.hold_out}: recall {v.recall(thr, k) * 100:.1f}% at rule {args.rule}'s threshold {thr:.3f} "
                f"(stream wakes {v.stream_wakes(thr, k)}); at 0.5: {v.recall(0.5, k) * 100:.1f}%")
        return 0
    v = Validation(dict(np.load(vpath)))
    k = args.consecutive
    chosen = choose_threshold(v, args.rule, k)
    recall = v.recall(chosen, k)
    stream_fw = v.stream_wakes(chosen, k)
    log(f"threshold {chosen:.3f} ({k} steps in a row, rule {args.rule}): validation recall {recall * 100:.1f}%, "
        f"false accepts {v.canvas_fa(chosen, k) * 100:.2f}% of other canvases, stream wakes {stream_fw} in {v_seconds / 60:.1f} min")

    # --- export (normalisation folded into the first layer) ----------------------------------
    tensors = []
    for mi, pm in enumerate(params if isinstance(params, list) else [params]):
        pre = "" if mi == 0 else f"member{mi}."
        w0 = np.asarray(pm["w0"], np.float64)
        b0 = np.asarray(pm["b0"], np.float64) - w0 @ (mean_w / std_w)
        w0 = w0 / std_w[None, :]
        tensors += [(pre + "dense0.weight", w0), (pre + "dense0.bias", b0), (pre + "dense1.weight", np.asarray(pm["w1"])),
                    (pre + "dense1.bias", np.asarray(pm["b1"])), (pre + "dense2.weight", np.asarray(pm["w2"])),
                    (pre + "dense2.bias", np.asarray(pm["b2"]))]
    blob = b"".join(np.asarray(a).astype("<f4").tobytes() for _, a in tensors)
    entries, off = [], 0
    for name, a in tensors:
        entries.append({"name": name, "shape": list(np.shape(a)), "offset": off})
        off += int(np.size(a))
    import jaxlib
    manifest = {
        "format": "clawvoice-wake", "version": 2, "phrase": trigger, "weights": f"{stem}.bin",
        "weightsBytes": len(blob), "weightsSHA256": hashlib.sha256(blob).hexdigest(), "threshold": round(chosen, 4),
        "consecutiveSteps": k,
        "frontEnd": {"manifest": "frontend.json", "weightsSHA256": fe_sha},
        "network": {"type": "embedding-mlp", "windowEmbeddings": args.window, "embeddingSize": frontend.EMB_DIM,
                    "hidden": [args.hidden, args.hidden], "activation": "relu", "output": "sigmoid",
                    "stepMilliseconds": 80, **({"members": len(params)} if isinstance(params, list) else {})},
        "tensors": entries,
        "training": {
            "recipe": recipe_name(args, bool(wtag)),
            "command": f'make wake-model TRIGGER="{trigger}"' + (f"; this head: bash models/training/train.sh {trigger} --negatives-scale {args.negatives_scale:g}" if args.negatives_scale != 1 else ""), "seed": seed,
            "framework": f"jax {jax.__version__} / jaxlib {jaxlib.__version__}, CPU",
            "engines": voices.TRAIN_ENGINES + (["kokoro"] if args.kokoro else []), "heldOut": "flite (awb, rms evaluated; kal, kal16, slt never used)",
            "canvases": int(len(E)), "triggerCanvases": int((Y == 1).any(axis=1).sum()), "epochs": args.stop_after or args.epochs,
            "epochSchedule": args.epochs, "inputDropout": args.dropout, "inputNoise": args.noise,
            "canvasShift": args.shift, "weightDecay": args.l2,
            "seconds": round(time.time() - t_start),
            "hardNegatives": {"mineHours": args.mine_hours, "threshold": args.mine_threshold, "weight": args.mine_weight,
                              "rounds": args.mine_rounds if args.mine_hours > 0 else 0, "insetWeight": args.mine_inset_weight, "source": args.mine_source, "minedWindows": mined_total},
            "thresholdRule": args.rule, "wideTriggerCanvases": int(args.wide * sc), "hardTriggerCanvases": int(args.hard * sc), "humanCanvases": int(args.human * sc), **({"realNegativeCanvases": int(args.real_negatives * sc)} if args.real_negatives else {}), **({"promptNegativeCanvases": int(args.prompt_negatives * sc)} if args.prompt_negatives else {}), "kokoroTriggerCanvases": int(args.kokoro * sc),
            "validation": {"recall": round(recall, 4), "streamMinutes": round(v_seconds / 60, 1),
                           "streamFalseWakes": stream_fw},
        },
    }
    with open(os.path.join(args.models_dir, f"{stem}.bin"), "wb") as f:
        f.write(blob)
    with open(os.path.join(args.models_dir, f"{stem}.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    log(f"wrote models/{stem}.json + models/{stem}.bin ({len(blob) / 1024:.0f} KiB) in {(time.time() - t_start) / 60:.1f} min")


if __name__ == "__main__":
    sys.exit(main())
