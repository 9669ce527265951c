"""The training canvases of a wake head: augmentation (equalisers, speed and vocal-tract warps,
rooms, noise), placing a rendered clip on a canvas with its labels, the featurizer over the
frozen front end, and the example sets built from them (triggers, near misses, speech, noise,
cut-short triggers, human speech; cache_file.py keeps them; the streams are in streams.py). train_head.py trains
on them and holdout.py replays their draws; this module imports neither of them.
"""
import os
import time

import numpy as np
from scipy.signal import lfilter, resample_poly

import augment
import frontend
import render
import speech

CANVAS = 3.2                                           # seconds per training canvas
STEP_S = frontend.CHUNK / 16000                        # 0.08 s per score
POS_BEFORE, POS_AFTER = 0.04, 0.40                     # positive: trigger end in [t - 0.40, t + 0.04]
IGN_BEFORE, IGN_AFTER = 0.30, 1.00                     # ignored around that

log = render.log


# --- augmentation ------------------------------------------------------------------------------

def random_eq(rng, x):
    """One or two peaking biquads (RBJ), 150-6000 Hz, +-10 dB: microphones and voices differ."""
    for _ in range(1 if rng.random() < 0.6 else 2):
        f0, gain, q = np.exp(rng.uniform(np.log(150), np.log(6000))), rng.uniform(-10, 10), rng.uniform(0.5, 2.0)
        A, w0 = 10 ** (gain / 40), 2 * np.pi * f0 / 16000
        alpha = np.sin(w0) / (2 * q)
        x = lfilter([1 + alpha * A, -2 * np.cos(w0), 1 - alpha * A], [1 + alpha / A, -2 * np.cos(w0), 1 - alpha / A], x)
    if rng.random() < 0.3:                             # a small loudspeaker or phone: band-limit
        from scipy.signal import butter
        b, a = butter(2, [rng.uniform(150, 400) / 8000, rng.uniform(3400, 7000) / 8000], "band")
        x = lfilter(b, a, x)
    return x


WIDE_SPAN = (82, 123)           # recipe v4's wide speakers: resampling by 82-122 % (speed 0.82-1.22)


def speed(rng, w, bounds, span=(85, 116)):
    """Tempo, pitch and formants together by 0.85-1.15 (the wide speakers: 0.82-1.22)."""
    down = int(rng.integers(*span))
    s0, s1 = bounds
    return resample_poly(w, 100, down), (s0 * 100 // down, s1 * 100 // down)


class Noise:
    """Training noise: babble of the pool's speech, synthetic music and coloured noise. With an empty
    pool (the unseen-voice stream, whose only voices must be its own) no babble: music and coloured
    noise in the shares they have among the rest."""

    def __init__(self, rng, pool):
        self.pool = pool
        self.music = [augment.train_music(rng, 10 * 16000) for _ in range(120)]

    def babble(self, rng, n):
        out = np.zeros(n)
        for _ in range(rng.integers(2, 8)):
            u = self.pool[rng.integers(len(self.pool))].astype(np.float64)
            while len(u) < n:
                u = np.concatenate([u, np.zeros(int(rng.uniform(0.05, 0.4) * 16000)), self.pool[rng.integers(len(self.pool))].astype(np.float64)])
            s = rng.integers(0, len(u) - n + 1)
            out += u[s:s + n] / (np.std(u) + 1e-9) * 10 ** (rng.uniform(-6, 0) / 20)
        return out / (np.std(out) + 1e-12)

    def music_clip(self, rng, n):
        out, pos = np.zeros(n), 0
        while pos < n:
            c = self.music[rng.integers(len(self.music))]
            k = min(n - pos, len(c))
            out[pos:pos + k] = c[:k] * 10 ** (rng.uniform(-3, 3) / 20)
            pos += k
        return out / (np.std(out) + 1e-12)

    def __call__(self, rng, n):
        r = rng.random() if len(self.pool) else 0.35 + 0.65 * rng.random()
        x = self.babble(rng, n) if r < 0.35 else self.music_clip(rng, n) if r < 0.6 else augment.coloured_noise(rng, n, rng.uniform(0.0, 2.0))
        if rng.random() < 0.2:
            x = x + augment.coloured_noise(rng, n, rng.uniform(0, 2)) * 10 ** (-rng.uniform(3, 15) / 20)
        return x


def finish(rng, x, noise, snr=(0.0, 30.0), clean=0.12, room=0.5, rt60=(0.15, 0.7)):
    if rng.random() < 0.6:
        x = random_eq(rng, x)
    if rng.random() < room:
        x = augment.reverberate(x, augment.train_rir(rng, rt60))
    if rng.random() > clean:
        x = augment.mix_noise(x, noise(rng, len(x)), rng.uniform(*snr))
    else:
        x = x + augment.coloured_noise(rng, len(x), 0.0) * 10 ** (rng.uniform(-80, -55) / 20) * 32768
    return augment.to_int16(x, rng)


def place(rng, word, n, end_s, pool, wide=False):
    """A canvas of n samples with `word` (speech bounds computed here) ending at end_s; maybe
    speech before and after it. wide: a resampling span in percent (WIDE_SPAN): more and wider
    speed changes (more speakers)."""
    canvas = np.zeros(n)
    w = word.astype(np.float64)
    b = speech.speech_bounds(word)
    if rng.random() < (0.85 if wide else 0.7):
        w, b = speed(rng, w, b, wide or (85, 116))
    s0, s1 = b
    end = int(end_s * 16000)
    start = end - s1
    a, z = max(0, start), min(n, start + len(w))
    if z > a:
        canvas[a:z] += w[a - start:z - start]
    ws = start + s0
    if rng.random() < 0.5 and ws > 4000:
        u = pool[rng.integers(len(pool))].astype(np.float64) * 10 ** (rng.uniform(-6, 3) / 20)
        stop = ws - int(rng.uniform(0.05, 0.6) * 16000)
        if stop > 0:
            seg = u[-stop:]
            canvas[stop - len(seg):stop] += seg
    if rng.random() < 0.5:
        u = pool[rng.integers(len(pool))].astype(np.float64) * 10 ** (rng.uniform(-6, 3) / 20)
        begin = end + int(rng.uniform(0.1, 0.5) * 16000)
        if begin < n:
            seg = u[: n - begin]
            canvas[begin:begin + len(seg)] += seg
    return canvas, end


def crop(rng, pool, n):
    u = pool[rng.integers(len(pool))].astype(np.float64)
    if len(u) <= n:
        c = np.zeros(n)
        o = rng.integers(0, n - len(u) + 1)
        c[o:o + len(u)] = u
        return c
    o = rng.integers(0, len(u) - n + 1)
    return u[o:o + n].copy()


def labels(end_sample, steps):
    """Per-score labels of a canvas: 1 positive, 0 negative, -1 ignored. Score k is at the end
    of chunk k, t = 0.08 (k + 1) s."""
    lab = np.zeros(steps, np.int8)
    if end_sample is None:
        return lab
    e = end_sample / 16000
    for k in range(steps):
        t = STEP_S * (k + 1)
        if t - POS_AFTER <= e <= t + POS_BEFORE:
            lab[k] = 1
        elif t - IGN_AFTER <= e <= t + IGN_BEFORE:
            lab[k] = -1
    return lab


def warp_matrix(alpha):
    """Vocal-tract-length perturbation on the power spectrum: bin f takes the power at f / alpha."""
    n = frontend.NFFT // 2 + 1
    src = np.arange(n) / alpha
    W = np.zeros((n, n))
    i0 = np.clip(np.floor(src).astype(int), 0, n - 1)
    fr = src - np.floor(src)
    for f in range(n):
        if src[f] < n - 1:
            W[i0[f], f] += 1 - fr[f]
            W[i0[f] + 1, f] += fr[f]
    return W


class Featurizer:
    """Embeddings of canvases, with a random VTLP warp of the front end's mel filters."""

    def __init__(self, fe, rng, span=(0.88, 1.12), n=9, p=0.7):
        self.fe, self.rng, self.p = fe, rng, p
        self.base = fe.mel.copy()
        self.warps = [warp_matrix(a) @ self.base for a in np.linspace(span[0], span[1], n)]

    def __call__(self, audio, warp=True):
        self.fe.mel = self.warps[self.rng.integers(len(self.warps))] if warp and self.rng.random() < self.p else self.base
        e = self.fe.embed(audio)
        self.fe.mel = self.base
        return e.astype(np.float16)


# --- examples ------------------------------------------------------------------------------------

CANVAS_SAMPLES = int(CANVAS * 16000)
STEPS = CANVAS_SAMPLES // frontend.CHUNK               # scores per canvas
FIRST_STEP = 12                                        # loss on scores from here (the canvas's own history)


class Examples:
    """Embeddings (float16, (n, STEPS, 96)) and labels ((n, STEPS)) of canvases, built in
    batches and cached as one .npz per recipe key."""

    def __init__(self):
        self.E, self.Y, self.K = [], [], []

    def add(self, feat, audio, end, kind):
        self.E.append(feat(audio)[:STEPS])
        self.Y.append(labels(end, STEPS))
        self.K.append(kind)

    def arrays(self):
        return (np.stack(self.E) if self.E else np.zeros((0, STEPS, frontend.EMB_DIM), np.float16),
                np.stack(self.Y) if self.Y else np.zeros((0, STEPS), np.int8), np.array(self.K, np.int8))


KINDS = ["trigger", "near miss", "other trigger", "speech", "noise", "cut-short trigger", "human speech", "mined speech"]


def progress(what, i, n, t0):
    if (i + 1) % 500 == 0 or i + 1 == n:
        el = time.time() - t0
        log(f"  {what}: {i + 1}/{n} canvases ({el:.0f} s, ~{el / (i + 1) * (n - i - 1):.0f} s left)")


# --hard: trigger canvases in low SNR and larger rooms (recipe v5; training's own room generator)
HARD = dict(snr=(0.0, 12.0), clean=0.0, room=0.8, rt60=(0.3, 1.0))


def positives(feat, rng, clips, pool, noise, n, kind=0, wide=False, cond=None):
    ex, t0 = Examples(), time.time()
    cond = cond or dict(snr=(0.0, 30.0))
    for i in range(n):
        c, end = place(rng, clips[rng.integers(len(clips))], CANVAS_SAMPLES, rng.uniform(1.1, 3.1), pool, wide)
        if rng.random() < 0.1:                          # the trigger at the very start of a stream
            c, end = place(rng, clips[rng.integers(len(clips))], CANVAS_SAMPLES, rng.uniform(0.55, 1.3), pool, wide)
        ex.add(feat, finish(rng, c, noise, **cond), end if kind == 0 else None, kind)
        progress(KINDS[kind], i, n, t0)
    return ex.arrays()


def negatives(feat, rng, near, pool, noise, counts):
    ex, t0 = Examples(), time.time()
    n_all = sum(counts.values())
    i = 0
    for _ in range(counts["near"]):
        c, _ = place(rng, near[rng.integers(len(near))], CANVAS_SAMPLES, rng.uniform(0.8, 3.1), pool)
        ex.add(feat, finish(rng, c, noise), None, 1)
        progress("negatives", i, n_all, t0); i += 1
    for _ in range(counts["speech"]):
        ex.add(feat, finish(rng, crop(rng, pool, CANVAS_SAMPLES), noise), None, 3)
        progress("negatives", i, n_all, t0); i += 1
    for _ in range(counts["noise"]):
        ex.add(feat, finish(rng, rng.standard_normal(CANVAS_SAMPLES) * 1e-3, noise, clean=0.2), None, 4)
        progress("negatives", i, n_all, t0); i += 1
    return ex.arrays()


def node_speech(rng, pool, n):
    """n samples of the node's own voice as the microphone hears it after the echo canceller:
    sentences back to back, through a loudspeaker (band limit and colouring) and a training room."""
    seg, total = [], 0
    while total < n:
        u = pool[rng.integers(len(pool))].astype(np.float64)
        seg += [u, np.zeros(int(rng.uniform(0.1, 0.6) * 16000))]
        total += len(u) + len(seg[-1])
    x = np.concatenate(seg)
    o = rng.integers(0, len(x) - n + 1)
    x = x[o:o + n]
    from scipy.signal import butter
    b, a = butter(2, [rng.uniform(120, 350) / 8000, rng.uniform(3500, 7500) / 8000], "band")
    x = random_eq(rng, lfilter(b, a, x)) if rng.random() < 0.7 else lfilter(b, a, x)
    return augment.reverberate(x, augment.train_rir(rng, (0.15, 0.7)))


# --over-speech: the trigger said over the node's own speech at this many dB above it
OVER_SPEECH_SNR = (-2.0, 20.0)


def over_speech(feat, rng, clips, own_pool, pool, noise, n, n_neg):
    """The stop word's condition: the trigger said while the node speaks, over what is left of
    its voice after the echo canceller (node_speech: its own voice, espeak-ng, two times in
    three, any training voice otherwise), trigger-to-echo ratio OVER_SPEECH_SNR, a little room
    noise; and n_neg canvases of that speech alone (negatives, kind 3)."""
    ex, t0 = Examples(), time.time()
    quiet = [np.zeros(1, np.int16)]                   # place() adds no speech before or after
    for i in range(n + n_neg):
        bg = node_speech(rng, own_pool if rng.random() < 2 / 3 else pool, CANVAS_SAMPLES)
        if i < n:
            w, end = place(rng, clips[rng.integers(len(clips))], CANVAS_SAMPLES, rng.uniform(1.1, 3.1), quiet)
            if rng.random() < 0.5:
                w = augment.reverberate(w, augment.train_rir(rng, (0.15, 0.7)))[:CANVAS_SAMPLES]
            active = np.abs(w) > 1e-3 * (np.max(np.abs(w)) + 1e-9)
            p_w = np.mean(w[active] ** 2) if active.any() else 1e-9
            x = w + bg * np.sqrt(p_w / ((np.mean(bg ** 2) + 1e-12) * 10 ** (rng.uniform(*OVER_SPEECH_SNR) / 10)))
        else:
            x, end = bg, None
        ex.add(feat, finish(rng, x, noise, snr=(10.0, 40.0), clean=0.3, room=0.0), end, 0 if i < n else 3)
        progress("over the node's speech", i, n + n_neg, t0)
    return ex.arrays()


def partials(feat, rng, clips, pool, noise, n):
    ex, t0 = Examples(), time.time()
    for i in range(n):
        w = clips[rng.integers(len(clips))]
        s0, s1 = speech.speech_bounds(w)
        cut = s0 + int((s1 - s0) * rng.uniform(0.3, 0.55))
        c, _ = place(rng, w[:cut], CANVAS_SAMPLES, rng.uniform(0.8, 3.1), pool)
        ex.add(feat, finish(rng, c, noise), None, 5)
        progress("cut-short triggers", i, n, t0)
    return ex.arrays()


def human_negatives(feat, rng, recs, noise, n):
    """Canvases of recorded human speech (human.py), cropped or placed, in training conditions."""
    ex, t0 = Examples(), time.time()
    seg = 4 * 16000                                    # long recordings in 4 s pieces, so each is drawn by its length
    clips = [a[o:o + seg] for _, a in recs for o in range(0, max(1, len(a) - seg // 2), seg)]
    for i in range(n):
        c = crop(rng, clips, CANVAS_SAMPLES)
        if rng.random() < 0.5:
            w, _ = speed(rng, c, (0, 0))
            c = w[:CANVAS_SAMPLES] if len(w) >= CANVAS_SAMPLES else np.pad(w, (0, CANVAS_SAMPLES - len(w)))
        ex.add(feat, finish(rng, c * 10 ** (rng.uniform(-6, 6) / 20), noise), None, 6)
        progress("human speech", i, n, t0)
    return ex.arrays()


class _Recording(list):
    """A clip list that remembers the index of the last clip taken from it."""
    last = -1

    def __getitem__(self, i):
        self.last = int(i)
        return list.__getitem__(self, i)


def canvas_engines(path, clips_by_engine, rng, pool, noise, n, wide, cond=None):
    """The engine of each trigger canvas in a cached positives() part, found by replaying the
    part's random draws without the front end (the featurizer has its own generator, so the
    draws are the same); cached beside the part. The replayed labels must equal the cached ones."""
    out = path[:-4] + "-engines.npy"
    if os.path.exists(out):
        return np.load(out)
    names = list(clips_by_engine)
    owner = np.concatenate([np.full(len(clips_by_engine[e]), i) for i, e in enumerate(names)])
    rec = _Recording(c for e in names for c in clips_by_engine[e])
    picked = []

    def stub(audio, warp=True):
        picked.append(rec.last)
        return np.zeros((STEPS, frontend.EMB_DIM), np.float16)

    t0 = time.time()
    _, Y, _ = positives(stub, rng, rec, pool, noise, n, wide=wide, cond=cond)
    with np.load(path) as z:
        if not np.array_equal(Y, z["Y"]):
            raise SystemExit(f"canvas_engines: replaying {os.path.basename(path)} gave other labels; cannot tell engines")
    lab = owner[np.array(picked)].astype(np.int8)
    np.save(out, lab)
    log(f"  engines of {os.path.basename(path)}: " + ", ".join(f"{e} {int((lab == i).sum())}" for i, e in enumerate(names))
        + f" ({time.time() - t0:.0f} s)")
    return lab
