"""Leave one engine out ENTIRELY (train_head.py --hold-out ENGINE --hold-out-negatives): which
training engine spoke each cached negative canvas (near misses, plain speech, cut-short and
other triggers) and each 80 ms step of the validation stream, found by replaying the random
draws that built them without the front end, as canvas.canvas_engines does for the
trigger canvases. Each replay is checked against the cache by embedding its first canvas (or
the stream's first 30 s) again; labels are cached beside each part.

The main clip decides a canvas's engine (the near-miss word, the cropped sentence, the cut
trigger); speech placed around it and babble noise come from the whole training pool, so a
little of the held-out engine stays in other canvases' backgrounds (reported by the replay).
"""
import os
import time

import numpy as np

import canvas

log = canvas.log


class Tape(list):
    """A clip list that records every index taken from it."""

    def __init__(self, items):
        super().__init__(items)
        self.hits = []

    def __getitem__(self, i):
        self.hits.append(int(i))
        return list.__getitem__(self, i)


def owners(lists):
    return np.concatenate([np.full(len(v), i, np.int8) for i, v in enumerate(lists)])


class Replay:
    """A stub featurizer: records, per canvas, the clips taken since the previous canvas and
    keeps the first canvases' audio for the check."""

    def __init__(self, *tapes, keep=1):
        self.tapes, self.keep = tapes, keep
        self.seen = [0] * len(tapes)
        self.canvases, self.audio = [], []

    def __call__(self, audio, warp=True):
        got = []
        for j, t in enumerate(self.tapes):
            got.append(t.hits[self.seen[j]:])
            self.seen[j] = len(t.hits)
        self.canvases.append(got)
        if len(self.audio) < self.keep:
            self.audio.append(np.asarray(audio))
        return np.zeros((canvas.STEPS, canvas.frontend.EMB_DIM), np.float16)


def matches(fe, audio, cached_E, warps):
    """True when audio embeds to cached_E under the base mel filters or one of the warps."""
    base = fe.mel
    try:
        for m in [base] + list(warps):
            fe.mel = m
            e = fe.embed(audio)[:len(cached_E)].astype(np.float16).astype(np.float32)
            if np.max(np.abs(e - cached_E.astype(np.float32))) < 0.05:
                return True
    finally:
        fe.mel = base
    return False


def _cache(path, build):
    if os.path.exists(path):
        return np.load(path)
    t0 = time.time()
    lab = build()
    np.save(path, lab)
    log(f"  engines of {os.path.basename(path)[:-len('-engines.npy')]}: "
        + ", ".join(f"{int((lab == i).sum())}" + ("" if i >= 0 else " none") for i in sorted(set(lab.tolist())))
        + f" ({time.time() - t0:.0f} s)")
    return lab


def negatives_engines(path, fe, warps, pool, near_lists, seed_part, counts):
    """Engine (index into the engine list; -1 noise) of each canvas of a shared negatives part.
    The part was built by whichever default trigger's training came first, with that trigger's
    near-miss renderings: each candidate list is replayed until the first canvas matches."""
    def build():
        with np.load(path) as z:
            E0 = z["E"][0]
        for near_by_engine in near_lists:
            ptape, ntape = Tape([c for v in pool for c in v]), Tape([c for v in near_by_engine for c in v])
            rep = Replay(ptape, ntape)
            noise = canvas.Noise(np.random.default_rng(3), ptape)
            ptape.hits.clear()
            canvas.negatives(rep, np.random.default_rng(seed_part), ntape, ptape, noise, counts)
            if not matches(fe, rep.audio[0], E0, warps):
                continue
            po, no = owners(pool), owners(near_by_engine)
            lab = []
            for i, (ph, nh) in enumerate(rep.canvases):
                if i < counts["near"]:
                    lab.append(no[nh[0]])
                elif i < counts["near"] + counts["speech"]:
                    lab.append(po[ph[0]])
                else:
                    lab.append(-1)
            return np.array(lab, np.int8)
        raise SystemExit(f"holdout: no replay of {os.path.basename(path)} matches its cached canvases")
    return _cache(path[:-4] + "-engines.npy", build)


def partials_engines(path, fe, warps, clips_by_engine, pool, seed, n_pos, n):
    """Engine of each cut-short trigger canvas. partials() drew from the same generator as the
    trigger canvases: after them when both were built in one run, else fresh; both are tried."""
    def build():
        with np.load(path) as z:
            E0 = z["E"][0]
        names = list(clips_by_engine)
        co = owners([clips_by_engine[e] for e in names])
        flat = [c for e in names for c in clips_by_engine[e]]
        for after_positives in (True, False):
            rng = np.random.default_rng(seed)
            ptape = Tape([c for v in pool for c in v])
            noise = canvas.Noise(np.random.default_rng(3), ptape)
            if after_positives:
                canvas.positives(lambda a, warp=True: np.zeros((canvas.STEPS, canvas.frontend.EMB_DIM), np.float16), rng, flat, ptape, noise, n_pos)
            ctape = Tape(flat)
            rep = Replay(ctape)
            canvas.partials(rep, rng, ctape, ptape, noise, n)
            if matches(fe, rep.audio[0], E0, warps):
                return np.array([co[h[0][0]] for h in rep.canvases], np.int8)
        raise SystemExit(f"holdout: no replay of {os.path.basename(path)} matches its cached canvases")
    return _cache(path[:-4] + "-engines.npy", build)


def stream_engines(path, fe, pool, vpool, seeds, seconds):
    """Engine of the sentence under each 80 ms step of the validation stream (a gap belongs to
    the sentence before it). The stream was built by the first default trigger's training, with
    that trigger's seed: each candidate seed is replayed until the first 30 s match."""
    def build():
        with np.load(path) as z:
            E = z["E"][0]
        vo = owners(vpool)
        flat = [c for v in vpool for c in v]
        for seed in seeds:
            rng = np.random.default_rng(seed)
            noise = canvas.Noise(np.random.default_rng(3), [c for v in pool for c in v])
            total, starts, owner, first = 0, [], [], None
            order = rng.permutation(len(flat))
            i = 0
            while total < seconds * 16000:
                seg, seg_len = [], 0
                while seg_len < 30 * 16000:
                    c = flat[order[i % len(order)]].astype(np.float64)
                    starts.append(total + seg_len)
                    owner.append(vo[order[i % len(order)]])
                    g = np.zeros(int(rng.uniform(0.1, 1.0) * 16000))
                    seg += [c, g]
                    seg_len += len(c) + len(g)
                    i += 1
                y = canvas.finish(rng, np.concatenate(seg), noise, snr=(3.0, 30.0))
                if first is None:
                    first = y
                    if not matches(fe, first, E[:len(first) // canvas.frontend.CHUNK - 2], []):
                        break
                total += len(y)
            else:
                ends = (np.arange(len(E)) + 1) * canvas.frontend.CHUNK
                return np.asarray(owner, np.int8)[np.searchsorted(np.asarray(starts), ends, side="right") - 1]
        raise SystemExit(f"holdout: no replay of {os.path.basename(path)} matches the cached stream")
    return _cache(path[:-4] + "-engines.npy", build)
